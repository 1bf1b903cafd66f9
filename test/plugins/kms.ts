import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as X509 from '@peculiar/x509';
import { cborDecode, cborEncode } from '@animo-id/mdoc';
import * as Jose from 'jose';
import { DIALECTS } from '../helpers/databases';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const x509 = (pem: string) => new X509.X509Certificate(pem);

/** Verifies a certificate's signature with an issuer certificate's public key. */
const signedBy = (cert: X509.X509Certificate, issuer: X509.X509Certificate) => cert.verify({ publicKey: issuer.publicKey, signatureOnly: true });

for (const dialect of DIALECTS) {
    describe(`key chains on the db provider (${dialect})`, () => {
        let t: TestServer;
        let keyAdmin: string;
        let reader: string;
        let other: string;
        const inject = (token: string, method: string, url: string, payload?: object) => t.server.inject({ method, url, payload, headers: bearer(token) });

        before(async () => {
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-kms', 'hallmark-kms-db', 'hallmark-tenancy') });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            await createTenant(t.server, root, 'globex');
            keyAdmin = (await clientWithToken(t.server, root, { clientId: 'acme-keys', roles: ['key:manage'], tenantId: 'acme' })).token;
            reader = (await clientWithToken(t.server, root, { clientId: 'acme-reader', roles: ['key:read'], tenantId: 'acme' })).token;
            other = (await clientWithToken(t.server, root, { clientId: 'globex-admin', roles: ['tenant:admin'], tenantId: 'globex' })).token;
        });
        after(() => t.stop());

        it('creates an internalChain: a leaf signed by the tenant root CA, digitalSignature and a DNS SAN, root left out of the chain', async () => {
            const res = await inject(keyAdmin, 'POST', '/api/key-chain', { id: 'issuer', usageType: 'attestation', subject: { commonName: 'Acme Issuer', organization: 'Acme', country: 'DE' } });
            expect(res.statusCode).to.equal(201);
            const body = res.result as any;
            expect(body.kmsProvider).to.equal('db');
            expect(body.certificateChain).to.have.length(1);
            const leaf = x509(body.certificateChain[0]);
            const root = x509(body.rootCertificate);
            expect(await signedBy(leaf, root)).to.be.true();
            expect(leaf.subject).to.not.equal(leaf.issuer);
            expect(leaf.issuer).to.equal(root.subject);
            expect(leaf.subject).to.contain('CN=Acme Issuer');
            expect(leaf.subject).to.contain('C=DE');
            const usage = leaf.getExtension(X509.KeyUsagesExtension)!;
            expect(usage.usages & X509.KeyUsageFlags.digitalSignature).to.not.equal(0);
            expect(usage.usages & X509.KeyUsageFlags.keyCertSign).to.equal(0);
            expect(leaf.getExtension(X509.SubjectAlternativeNameExtension)!.names.items.map((n) => n.value)).to.equal(['hallmark.test']);
            expect(leaf.getExtension(X509.BasicConstraintsExtension)!.ca).to.be.false();
            expect(root.getExtension(X509.BasicConstraintsExtension)!.ca).to.be.true();
            expect(root.getExtension(X509.KeyUsagesExtension)!.usages & X509.KeyUsageFlags.keyCertSign).to.not.equal(0);
            expect(await root.isSelfSigned()).to.be.true();
            // The leaf certifies the published public key.
            const leafJwk = Crypto.createPublicKey({ key: Buffer.from(leaf.publicKey.rawData), format: 'der', type: 'spki' }).export({ format: 'jwk' });
            expect(leafJwk.x).to.equal(body.publicJwk.x);
        });

        it('reuses the tenant root CA and makes a standalone self-signed leaf on request', async () => {
            const second = (await inject(keyAdmin, 'POST', '/api/key-chain', { id: 'access', usageType: 'access', sanDns: ['verifier.acme.example'] })).result as any;
            const first = (await inject(keyAdmin, 'GET', '/api/key-chain/issuer')).result as any;
            expect(second.rootCertificate).to.equal(first.rootCertificate);
            expect(x509(second.certificateChain[0]).getExtension(X509.SubjectAlternativeNameExtension)!.names.items.map((n) => n.value)).to.equal(['verifier.acme.example']);
            const standalone = (await inject(keyAdmin, 'POST', '/api/key-chain', { id: 'solo', usageType: 'statusList', type: 'standalone' })).result as any;
            expect(standalone.rootCertificate).to.not.exist();
            expect(await x509(standalone.certificateChain[0]).isSelfSigned()).to.be.true();
        });

        it('signs ES256 JWTs through the signing service that verify with the key chain\'s key and its x5c', async () => {
            const jws = await t.server.signing.jws('acme', 'issuer', { header: { typ: 'JWT' }, payload: { sub: 'x', iat: 1 } });
            const { payload, protectedHeader } = await Jose.jwtVerify(jws, async (header) => Jose.importX509(`-----BEGIN CERTIFICATE-----\n${header.x5c![0]}\n-----END CERTIFICATE-----`, 'ES256'));
            expect(payload.sub).to.equal('x');
            expect(protectedHeader.x5c).to.have.length(1);
            const material = await t.server.signing.material('acme', 'issuer');
            await Jose.compactVerify(jws, await Jose.importJWK(material.publicJwk, 'ES256'));
        });

        it('signs COSE_Sign1 with the chain in x5chain', async () => {
            const payload = new Uint8Array([1, 2, 3]);
            const tagged = await t.server.signing.coseSign1('acme', 'issuer', { payload, tagged: true });
            expect(tagged[0]).to.equal(0xd2);
            const [protectedBytes, unprotected, body, signature] = cborDecode(tagged.subarray(1)) as [Uint8Array, Map<number, unknown>, Uint8Array, Uint8Array];
            expect((cborDecode(protectedBytes) as Map<number, unknown>).get(1)).to.equal(-7);
            expect(Buffer.from(body)).to.equal(Buffer.from(payload));
            const x5chain = unprotected.get(33) as Uint8Array;
            const cert = x509(Buffer.from(x5chain).toString('base64'));
            const toBeSigned = cborEncode(['Signature1', protectedBytes, new Uint8Array(), payload]);
            const key = Crypto.createPublicKey({ key: Buffer.from(cert.publicKey.rawData), format: 'der', type: 'spki' });
            expect(Crypto.verify('sha256', toBeSigned, { key, dsaEncoding: 'ieee-p1363' }, signature)).to.be.true();
        });

        it('lists by usage type and answers public parts only, never a private key', async () => {
            const all = (await inject(reader, 'GET', '/api/key-chain')).result as any;
            expect(all.total).to.equal(3);
            const access = (await inject(reader, 'GET', '/api/key-chain?usageType=access')).result as any;
            expect(access.items.map((k: any) => k.id)).to.equal(['access']);
            const privateD = await t.server.db.knex('kms_db_keys').where({ tenant_id: 'acme' });
            expect(privateD.length).to.equal(4); // three chains and the root CA
            for (const row of privateD) {
                expect(row.privateJwk.startsWith('hm1.')).to.be.true();
                const d = JSON.parse(t.server.db.cipher.decrypt(row.privateJwk)).d as string;
                expect(JSON.stringify(all)).to.not.contain(d);
            }
            expect((await inject(reader, 'POST', '/api/key-chain', { id: 'x', usageType: 'access' })).statusCode).to.equal(403);
        });

        it('rotates: a new key and certificate, the previous public key kept for verification', async () => {
            const before = (await inject(keyAdmin, 'GET', '/api/key-chain/issuer')).result as any;
            const oldJws = await t.server.signing.jws('acme', 'issuer', { payload: { n: 1 } });
            const rotated = await inject(keyAdmin, 'POST', '/api/key-chain/issuer/rotate');
            expect(rotated.statusCode).to.equal(200);
            const after = rotated.result as any;
            expect(after.publicJwk.x).to.not.equal(before.publicJwk.x);
            expect(after.certificateChain[0]).to.not.equal(before.certificateChain[0]);
            expect(after.previousPublicJwks.map((k: any) => k.x)).to.equal([before.publicJwk.x]);
            await Jose.compactVerify(oldJws, await Jose.importJWK(after.previousPublicJwks[0], 'ES256'));
            const newJws = await t.server.signing.jws('acme', 'issuer', { payload: { n: 2 } });
            await Jose.compactVerify(newJws, await Jose.importJWK(after.publicJwk, 'ES256'));
        });

        it('imports a private key with its certificate chain', async () => {
            const { privateKey, publicKey } = await Jose.generateKeyPair('ES256', { extractable: true });
            const keys = { privateKey: privateKey as unknown as Crypto.webcrypto.CryptoKey, publicKey: publicKey as unknown as Crypto.webcrypto.CryptoKey };
            const cert = await X509.X509CertificateGenerator.createSelfSigned({ name: 'CN=Imported', keys, signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' } as any, notAfter: new Date(Date.now() + 86_400_000) }, Crypto.webcrypto as any);
            const privateJwk = await Jose.exportJWK(privateKey);
            const res = await inject(keyAdmin, 'POST', '/api/key-chain/import', { id: 'imported', usageType: 'attestation', privateJwk, certificateChain: [cert.toString('pem')] });
            expect(res.statusCode).to.equal(201);
            expect(JSON.stringify(res.result)).to.not.contain(privateJwk.d!);
            const jws = await t.server.signing.jws('acme', 'imported', { payload: { ok: true } });
            await Jose.compactVerify(jws, publicKey);
            const mismatch = await inject(keyAdmin, 'POST', '/api/key-chain/import', { id: 'mismatch', usageType: 'attestation', privateJwk: await Jose.exportJWK((await Jose.generateKeyPair('ES256', { extractable: true })).privateKey), certificateChain: [cert.toString('pem')] });
            expect(mismatch.statusCode).to.equal(400);
            const audit = await t.server.db.knex('audit_logs').where({ tenant_id: 'acme', kind: 'KeyChain', resource_id: 'imported' });
            expect(JSON.stringify(audit)).to.not.contain(privateJwk.d!);
        });

        it('accepts an external key reference only when the provider signs a challenge the stated key verifies', async () => {
            const { store } = await t.server.kms.provider('acme', 'db');
            const publicJwk = await store.create('hsm-key-1', 'ES256');
            const ok = await inject(keyAdmin, 'POST', '/api/key-chain', { id: 'external', usageType: 'attestation', keySource: { type: 'external-reference', provider: 'db', externalKeyId: 'hsm-key-1', publicJwk } });
            expect(ok.statusCode).to.equal(201);
            expect((ok.result as any).publicJwk.x).to.equal(publicJwk.x);
            const wrong = (await Jose.exportJWK((await Jose.generateKeyPair('ES256', { extractable: true })).publicKey)) as any;
            const refused = await inject(keyAdmin, 'POST', '/api/key-chain', { id: 'external2', usageType: 'attestation', keySource: { type: 'external-reference', provider: 'db', externalKeyId: 'hsm-key-1', publicJwk: wrong } });
            expect(refused.statusCode).to.equal(400);
            expect((refused.result as any).message).to.contain('does not match');
        });

        it('rejects unknown fields, unknown providers and bad values with 400 naming them', async () => {
            const unknown = await inject(keyAdmin, 'POST', '/api/key-chain', { id: 'k', usageType: 'access', colour: 'red' });
            expect(unknown.statusCode).to.equal(400);
            expect((unknown.result as any).details[0].path).to.equal('colour');
            const usage = await inject(keyAdmin, 'POST', '/api/key-chain', { id: 'k', usageType: 'everything' });
            expect(usage.statusCode).to.equal(400);
            const provider = await inject(keyAdmin, 'POST', '/api/key-chain', { id: 'k', usageType: 'access', kmsProvider: 'nowhere' });
            expect(provider.statusCode).to.equal(400);
            expect((provider.result as any).message).to.contain('nowhere');
            expect((await inject(keyAdmin, 'POST', '/api/key-chain', { id: 'issuer', usageType: 'access' })).statusCode).to.equal(409);
        });

        it('keeps tenants apart', async () => {
            expect((await inject(other, 'GET', '/api/key-chain/issuer')).statusCode).to.equal(404);
            expect((await inject(other, 'DELETE', '/api/key-chain/issuer')).statusCode).to.equal(404);
            expect((await inject(other, 'POST', '/api/key-chain/issuer/rotate')).statusCode).to.equal(404);
            expect(((await inject(other, 'GET', '/api/key-chain')).result as any).total).to.equal(0);
            await expect(t.server.signing.jws('globex', 'issuer', { payload: {} })).to.reject(/not found/);
        });

        it('deletes a key chain and the keys it generated', async () => {
            const before = await t.server.db.knex('kms_db_keys').where({ tenant_id: 'acme' }).count({ n: '*' });
            expect((await inject(keyAdmin, 'DELETE', '/api/key-chain/solo')).statusCode).to.equal(204);
            expect((await inject(keyAdmin, 'GET', '/api/key-chain/solo')).statusCode).to.equal(404);
            const after = await t.server.db.knex('kms_db_keys').where({ tenant_id: 'acme' }).count({ n: '*' });
            expect(Number(after[0]!.n)).to.equal(Number(before[0]!.n) - 1);
        });

        it('lists providers with health and manages the tenant KMS configuration', async () => {
            const providers = (await inject(reader, 'GET', '/api/key-chain/providers')).result as any[];
            expect(providers).to.equal([{ id: 'db', type: 'db', description: 'Keys sealed in the service database', default: true, status: 'up' }]);
            expect((await inject(keyAdmin, 'GET', '/api/key-chain/providers/config')).statusCode).to.equal(404);
            const put = await inject(keyAdmin, 'PUT', '/api/key-chain/providers/config', { defaultProvider: 'main', providers: [{ id: 'main', type: 'db', description: 'Main' }] });
            expect(put.statusCode).to.equal(200);
            const listed = (await inject(reader, 'GET', '/api/key-chain/providers')).result as any[];
            expect(listed.find((p) => p.id === 'main').default).to.be.true();
            const unknownType = await inject(keyAdmin, 'PUT', '/api/key-chain/providers/config', { providers: [{ id: 'x', type: 'quantum' }] });
            expect(unknownType.statusCode).to.equal(400);
            expect((unknownType.result as any).message).to.contain('quantum');
            const unknownField = await inject(keyAdmin, 'PUT', '/api/key-chain/providers/config', { providers: [{ id: 'x', type: 'db', region: 'eu' }] });
            expect(unknownField.statusCode).to.equal(400);
            expect((unknownField.result as any).message).to.contain('region');
            const badDefault = await inject(keyAdmin, 'PUT', '/api/key-chain/providers/config', { defaultProvider: 'ghost', providers: [] });
            expect(badDefault.statusCode).to.equal(400);
            expect((await inject(keyAdmin, 'DELETE', '/api/key-chain/providers/config')).statusCode).to.equal(204);
            expect(((await inject(reader, 'GET', '/api/key-chain/providers')).result as any[]).map((p) => p.id)).to.equal(['db']);
        });
    });
}

describe('global kms.json and rotation policy', () => {
    it('merges the global kms.json under the tenant\'s own configuration', async () => {
        const Fs = await import('node:fs');
        const Os = await import('node:os');
        const Path = await import('node:path');
        const folder = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-kms-config-'));
        Fs.writeFileSync(Path.join(folder, 'kms.json'), JSON.stringify({ defaultProvider: 'shared', providers: [{ id: 'shared', type: 'db', description: '${KMS_LABEL:Shared keys}' }] }));
        Fs.mkdirSync(Path.join(folder, 'acme'));
        Fs.writeFileSync(Path.join(folder, 'acme', 'info.json'), JSON.stringify({ name: 'Acme' }));
        Fs.writeFileSync(Path.join(folder, 'acme', 'kms.json'), JSON.stringify({ providers: [{ id: 'own', type: 'db' }] }));
        Fs.mkdirSync(Path.join(folder, 'globex'));
        Fs.writeFileSync(Path.join(folder, 'globex', 'info.json'), JSON.stringify({ name: 'Globex' }));
        Fs.writeFileSync(Path.join(folder, 'globex', 'kms.json'), JSON.stringify({ defaultProvider: 'db', providers: [] }));
        const t = await startTestServer('sqlite', { manifest: manifestFor('hallmark-kms', 'hallmark-kms-db', 'hallmark-tenancy'), env: { CONFIG_FOLDER: folder } });
        try {
            const acme = await t.server.kms.effectiveConfig('acme');
            expect(acme.defaultProvider).to.equal('shared');
            expect(acme.providers.map((p) => [p.id, p.description])).to.equal([['db', 'Keys sealed in the service database'], ['shared', 'Shared keys'], ['own', undefined]]);
            expect((await t.server.kms.effectiveConfig('globex')).defaultProvider).to.equal('db');
        }
        finally {
            await t.stop();
            Fs.rmSync(folder, { recursive: true, force: true });
        }
    });

    it('rotates key chains whose rotation policy is due, and leaves the others', async () => {
        const t = await startTestServer('sqlite', { manifest: manifestFor('hallmark-kms', 'hallmark-kms-db', 'hallmark-tenancy') });
        try {
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            const admin = (await clientWithToken(t.server, root, { clientId: 'acme-keys', roles: ['key:manage'], tenantId: 'acme' })).token;
            const create = (payload: object) => t.server.inject({ method: 'POST', url: '/api/key-chain', payload, headers: bearer(admin) });
            const due = (await create({ id: 'due', usageType: 'attestation', rotationPolicy: { enabled: true, intervalDays: 30 } })).result as any;
            const fresh = (await create({ id: 'fresh', usageType: 'attestation', rotationPolicy: { enabled: true, intervalDays: 30 } })).result as any;
            const off = (await create({ id: 'off', usageType: 'attestation', rotationPolicy: { enabled: false, intervalDays: 1 } })).result as any;
            await t.server.db.knex('key_chain_keys').whereIn('key_chain_id', ['due', 'off']).update({ rotated_at: new Date(Date.now() - 31 * 86_400_000).toISOString() });
            await t.server.jobs.runNow('key-chain.rotation');
            const get = async (id: string) => ((await t.server.inject({ url: `/api/key-chain/${id}`, headers: bearer(admin) })).result as any).publicJwk.x;
            expect(await get('due')).to.not.equal(due.publicJwk.x);
            expect(await get('fresh')).to.equal(fresh.publicJwk.x);
            expect(await get('off')).to.equal(off.publicJwk.x);
        }
        finally {
            await t.stop();
        }
    });
});
