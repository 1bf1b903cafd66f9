import Crypto from 'node:crypto';
import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as Jose from 'jose';
import Pino from 'pino';
import { importConfigFolder } from '../../lib/config-import';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { ISSUER, PRE_AUTHORIZED, pidConfig } from '../helpers/pid-config';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const pid = pidConfig({ path: ['issuing_country'], type: 'string', defaultValue: 'DE' });

for (const dialect of DIALECTS) {
    describe(`OID4VCI pre-authorized flow, by hand (${dialect})`, () => {
        let t: TestServer;
        let admin: string;
        const holder = Jose.generateKeyPair('ES256', { extractable: true });
        const proof = async (nonce: string) => {
            const { privateKey, publicKey } = await holder;
            return new Jose.SignJWT({ nonce, aud: ISSUER }).setProtectedHeader({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: await Jose.exportJWK(publicKey) }).setIssuedAt().sign(privateKey);
        };

        before(async () => {
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-oid4vci', 'hallmark-kms-db', 'hallmark-docs', 'hallmark-tenancy') });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            expect((await t.server.inject({ method: 'POST', url: '/api/key-chain', headers: bearer(admin), payload: { id: 'issuer', usageType: 'attestation', subject: { commonName: 'Acme', country: 'DE' } } })).statusCode).to.equal(201);
            const res = await t.server.inject({ method: 'POST', url: '/api/issuer/credentials', headers: bearer(admin), payload: pid });
            expect(res.statusCode, res.payload).to.equal(201);
        });
        after(() => t.stop());

        it('issues an SD-JWT VC', async () => {
            const offer = await t.server.inject({ method: 'POST', url: '/api/issuer/offer', headers: bearer(admin), payload: { credentialConfigurationIds: ['pid'], credentialClaims: { pid: { type: 'inline', claims: { given_name: 'Erika', family_name: 'Mustermann' } } }, tx_code: true } });
            expect(offer.statusCode, offer.payload).to.equal(201);
            const { uri, tx_code: txCode, session } = offer.result as any;
            const offerUri = decodeURIComponent(new URL(uri.replace('openid-credential-offer://', 'https://x/')).searchParams.get('credential_offer_uri')!);
            const fetched = await t.server.inject(offerUri.replace('http://hallmark.test', ''));
            expect(fetched.statusCode).to.equal(200);
            expect((await t.server.inject(offerUri.replace('http://hallmark.test', ''))).statusCode).to.equal(404);
            const code = (fetched.result as any).grants['urn:ietf:params:oauth:grant-type:pre-authorized_code']['pre-authorized_code'];
            const metadata = (await t.server.inject('/.well-known/openid-credential-issuer/issuers/acme')).result as any;
            expect(metadata.credential_configurations_supported.pid.vct).to.equal('urn:eudi:pid:1');

            const token = await t.server.inject({ method: 'POST', url: '/issuers/acme/authorize/token', payload: `grant_type=${encodeURIComponent('urn:ietf:params:oauth:grant-type:pre-authorized_code')}&pre-authorized_code=${code}&tx_code=${txCode}`, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
            expect(token.statusCode, token.payload).to.equal(200);
            const accessToken = (token.result as any).access_token;
            const nonce = ((await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/nonce' })).result as any).c_nonce;
            const credential = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/credential', headers: { authorization: `Bearer ${accessToken}` }, payload: { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proof(nonce) } } });
            expect(credential.statusCode, credential.payload).to.equal(200);
            const body = credential.result as any;
            expect(body.credentials).to.have.length(1);
            expect(body.credentials[0].credential.split('~').length).to.equal(4);
            const status = ((await t.server.inject({ url: `/api/session/${session}`, headers: bearer(admin) })).result as any).status;
            expect(status).to.equal('fetched');
            const notified = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/notification', headers: { authorization: `Bearer ${accessToken}` }, payload: { notification_id: body.notification_id, event: 'credential_accepted' } });
            expect(notified.statusCode, notified.payload).to.equal(204);
            expect(((await t.server.inject({ url: `/api/session/${session}`, headers: bearer(admin) })).result as any).status).to.equal('completed');
        });

        it('answers invalid_proof, never 500, for a proof whose jwk header is not an object', async () => {
            const offer = await t.server.inject({ method: 'POST', url: '/api/issuer/offer', headers: bearer(admin), payload: { credentialConfigurationIds: ['pid'], credentialClaims: { pid: { type: 'inline', claims: { given_name: 'Erika' } } }, byReference: false } });
            expect(offer.statusCode, offer.payload).to.equal(201);
            const offered = JSON.parse(new URL((offer.result as any).uri.replace('openid-credential-offer://', 'https://x/')).searchParams.get('credential_offer')!);
            const code = offered.grants[PRE_AUTHORIZED]['pre-authorized_code'];
            const token = await t.server.inject({ method: 'POST', url: '/issuers/acme/authorize/token', payload: new URLSearchParams({ grant_type: PRE_AUTHORIZED, 'pre-authorized_code': code }).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
            expect(token.statusCode, token.payload).to.equal(200);
            const { privateKey } = await holder;
            const signingKey = Crypto.createPrivateKey({ key: await Jose.exportJWK(privateKey) as Crypto.JsonWebKey, format: 'jwk' });
            for (const jwk of ['not-a-key', 42, true, [], ['EC'], null]) {
                const nonce = ((await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/nonce' })).result as any).c_nonce;
                // Made by hand: jose would not sign a JWT with such a header.
                const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
                const input = `${b64({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk })}.${b64({ nonce, aud: ISSUER, iat: Math.floor(Date.now() / 1000) })}`;
                const signature = Crypto.sign('sha256', Buffer.from(input), { key: signingKey, dsaEncoding: 'ieee-p1363' }).toString('base64url');
                const res = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/credential', headers: { authorization: `Bearer ${(token.result as any).access_token}` }, payload: { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: `${input}.${signature}` } } });
                expect(res.statusCode, `${JSON.stringify(jwk)}: ${res.payload}`).to.equal(400);
                expect((res.result as any).error).to.equal('invalid_proof');
            }
        });

        it('answers invalid_nonce, never 500, for a proof nonce with a NUL or any shape it never issued', async () => {
            const offer = await t.server.inject({ method: 'POST', url: '/api/issuer/offer', headers: bearer(admin), payload: { credentialConfigurationIds: ['pid'], credentialClaims: { pid: { type: 'inline', claims: { given_name: 'Erika' } } }, byReference: false } });
            const offered = JSON.parse(new URL((offer.result as any).uri.replace('openid-credential-offer://', 'https://x/')).searchParams.get('credential_offer')!);
            const token = await t.server.inject({ method: 'POST', url: '/issuers/acme/authorize/token', payload: new URLSearchParams({ grant_type: PRE_AUTHORIZED, 'pre-authorized_code': offered.grants[PRE_AUTHORIZED]['pre-authorized_code'] }).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
            expect(token.statusCode, token.payload).to.equal(200);
            const issued = ((await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/nonce' })).result as any).c_nonce as string;
            for (const nonce of [`${issued.slice(0, 10)}\u0000${issued.slice(11)}`, 'x\u0000y', 'a'.repeat(300), `${issued}=`]) {
                const res = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/credential', headers: { authorization: `Bearer ${(token.result as any).access_token}` }, payload: { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proof(nonce) } } });
                expect(res.statusCode, `${JSON.stringify(nonce)}: ${res.payload}`).to.equal(400);
                expect((res.result as any).error).to.equal('invalid_nonce');
            }
            // The issued nonce itself still works.
            const ok = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/credential', headers: { authorization: `Bearer ${(token.result as any).access_token}` }, payload: { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proof(issued) } } });
            expect(ok.statusCode, ok.payload).to.equal(200);
        });

        it('refuses settings whose feature is not built yet (400 naming it), and mso_mdoc without key binding', async () => {
            const refused = async (method: string, url: string, payload: object, details: Array<{ path: string; message: string }>) => {
                const res = await t.server.inject({ method, url, headers: bearer(admin), payload });
                expect(res.statusCode, res.payload).to.equal(400);
                expect((res.result as any).details, res.payload).to.equal(details);
            };
            const statusLists = (path: string) => ({ path, message: `"${path}": token status lists are not available in this deployment (the status plugin is not loaded)` });
            await refused('POST', '/api/issuer/credentials', { ...pid, id: 'pid-status', statusManagement: true }, [statusLists('statusManagement')]);
            await refused('POST', '/api/issuer/credentials', { ...pid, id: 'pid-status', status: { enabled: true } }, [statusLists('status.enabled')]);
            const mdl = { id: 'mdl-unbound', config: { format: 'mso_mdoc', docType: 'org.iso.18013.5.1.mDL', display: [{ locale: 'en', name: 'mDL' }] }, fields: [{ path: ['org.iso.18013.5.1', 'given_name'], type: 'string' }], keyChainId: 'issuer', keyBinding: false };
            await refused('POST', '/api/issuer/credentials', mdl, [{ path: 'keyBinding', message: '"keyBinding" must be true for mso_mdoc: an mdoc always carries the device key' }]);
            // Switched off, they are accepted.
            const off = await t.server.inject({ method: 'PUT', url: '/api/issuer/config', headers: bearer(admin), payload: { walletAttestationRequired: false, refreshTokenEnabled: false } });
            expect(off.statusCode, off.payload).to.equal(200);
            const saved = await t.server.inject({ method: 'POST', url: '/api/issuer/credentials', headers: bearer(admin), payload: { ...pid, id: 'pid-off', statusManagement: false, status: { enabled: false } } });
            expect(saved.statusCode, saved.payload).to.equal(201);
            expect((await t.server.inject({ method: 'DELETE', url: '/api/issuer/credentials/pid-off', headers: bearer(admin) })).statusCode).to.equal(204);
        });

        it('refuses the same settings in the configuration import, and the tenant is not imported', async () => {
            const folder = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-import-'));
            try {
                Fs.cpSync(Path.join(__dirname, '../../examples/config/demo'), Path.join(folder, 'refused'), { recursive: true });
                const edit = (file: string, change: (spec: any) => void) => {
                    const path = Path.join(folder, 'refused', file);
                    const document = JSON.parse(Fs.readFileSync(path, 'utf8'));
                    change(document.spec);
                    Fs.writeFileSync(path, JSON.stringify(document));
                };
                edit('issuance/credentials/mdl.json', (spec) => (spec.keyBinding = false));
                edit('issuance/credentials/pid.json', (spec) => (spec.config.keyAttestationsRequired = { key_storage: [] }));
                const report = await importConfigFolder({ folder, registry: t.server.registry, log: Pino({ level: 'silent' }), variables: {}, unresolvedPlaceholders: 'warn' });
                const [result] = report.tenants;
                expect(result).to.include({ tenantId: 'refused', status: 'failed', created: 0 });
                expect(result!.error).to.contain('"keyBinding" must be true for mso_mdoc');
                expect(result!.error).to.contain('"config.keyAttestationsRequired.key_storage" must contain at least 1 items');
                const root = await rootToken(t.server);
                expect((await t.server.inject({ url: '/api/tenants/refused', headers: bearer(root) })).statusCode).to.equal(404);
            }
            finally {
                Fs.rmSync(folder, { recursive: true, force: true });
            }
        });

        it('publishes proof_types_supported as configured (jwt and attestation when absent), and none without key binding', async () => {
            const configured = await t.server.inject({ method: 'POST', url: '/api/issuer/credentials', headers: bearer(admin), payload: { ...pid, id: 'pid-jwt', config: { ...pid.config, proofTypesSupported: ['jwt'] } } });
            expect(configured.statusCode, configured.payload).to.equal(201);
            const unbound = await t.server.inject({ method: 'POST', url: '/api/issuer/credentials', headers: bearer(admin), payload: { ...pid, id: 'pid-unbound', keyBinding: false } });
            expect(unbound.statusCode, unbound.payload).to.equal(201);
            const supported = ((await t.server.inject('/.well-known/openid-credential-issuer/issuers/acme')).result as any).credential_configurations_supported;
            expect(supported.pid.proof_types_supported).to.equal({ jwt: { proof_signing_alg_values_supported: ['ES256'] }, attestation: { proof_signing_alg_values_supported: ['ES256'] } });
            expect(supported['pid-jwt'].proof_types_supported).to.equal({ jwt: { proof_signing_alg_values_supported: ['ES256'] } });
            expect(supported['pid-unbound'].proof_types_supported).to.not.exist();
        });

        it('describes credentialClaims, both forms, with an example in the API docs', async () => {
            const doc = JSON.parse((await t.server.inject('/api/docs-json')).payload);
            const property = doc.definitions.CredentialOfferRequest.properties.credentialClaims;
            const claims = property.$ref ? doc.definitions[property.$ref.replace('#/definitions/', '')] : property;
            expect(claims.description).to.contain('{"type": "inline", "claims": {...}}');
            expect(claims.description).to.contain('{"type": "attributeProvider", "attributeProviderId": "..."}');
            expect(Object.values(claims.example).map((source: any) => source.type).sort()).to.equal(['attributeProvider', 'inline']);
            expect(claims.example.pid.claims).to.include({ given_name: 'Erika' });
        });
    });
}

describe('OID4VCI wallet endpoints with malformed input', () => {
    it('answer 400, never 500', async () => {
        const t = await startTestServer('sqlite', { env: { CONFIG_FOLDER: require('node:path').join(__dirname, '../../examples/config') } });
        try {
            const token = async (payload: object) => t.server.inject({ method: 'POST', url: '/issuers/demo/authorize/token', payload });
            for (const payload of [{ grant_type: 'urn:ietf:params:oauth:grant-type:pre-authorized_code', 'pre-authorized_code': 123 }, { grant_type: 'urn:ietf:params:oauth:grant-type:pre-authorized_code', 'pre-authorized_code': 'x', tx_code: 1234 }, { grant_type: 'urn:ietf:params:oauth:grant-type:pre-authorized_code', 'pre-authorized_code': ['a'] }]) {
                const res = await token(payload);
                expect(res.statusCode, JSON.stringify(payload)).to.equal(400);
                expect((res.result as any).error).to.equal('invalid_request');
            }
            const unknown = await t.server.inject({ method: 'GET', url: '/anything?%E0=1' });
            expect(unknown.statusCode).to.equal(404);
        }
        finally {
            await t.stop();
        }
    });
});
