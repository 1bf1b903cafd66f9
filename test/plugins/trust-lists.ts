import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as X509 from '@peculiar/x509';
import { SDJwtVcInstance } from '@sd-jwt/sd-jwt-vc';
import * as Jose from 'jose';
import { issueSdJwtVc } from '../../plugins/oid4vci/formats/sd-jwt';
import { walletProviderKey } from '../../plugins/oid4vci/services/wallet-provider-trust';
import { TrustAnchors } from '../../plugins/oid4vp/services/trust-anchors';
import * as trust from '../../plugins/trust';
import { parseTrustList } from '../../plugins/trust/services/list-formats';
import { VerificationFailure } from '../../lib/verify/failures';
import { verifyCertificateChain } from '../../lib/verify/trust';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { freePort } from '../helpers/net';
import { party, type Party } from '../helpers/pki';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';
import { rsaSigner, signLote, signTrustedList, startListServer, SVC, trustedListXml, type ListServer, type XmlSigner } from '../helpers/trust-lists';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const HOUR = 3_600_000;
const b64 = (p: Party) => Buffer.from(p.cert.rawData).toString('base64');
const pem = (p: Party | XmlSigner) => ('cert' in p ? p.cert : p.certificate).toString('pem');

/** The failure code of a chain check against the anchors of a query (undefined: trusted). */
const outcome = async (anchors: TrustAnchors, tenantId: string, x5c: string[], authorities?: Array<{ type: string; values: unknown[] }>, serviceTypes?: Array<'pid-issuance' | 'eaa-issuance' | 'wallet-provider'>): Promise<string | undefined> => {
    try {
        const set = await anchors.forQuery(tenantId, authorities);
        await verifyCertificateChain(x5c, set, new Date(), serviceTypes ? { serviceTypes } : {});
        return undefined;
    }
    catch (err) {
        if (err instanceof VerificationFailure) {
            return err.code;
        }
        throw err;
    }
};

const hasher = (data: string | ArrayBuffer) => new Uint8Array(Crypto.createHash('sha256').update(typeof data === 'string' ? data : Buffer.from(data)).digest());

for (const dialect of DIALECTS) {
    describe(`remote trust lists (${dialect})`, () => {
        let t: TestServer;
        let admin: string;
        let lists: ListServer;
        let anchors: TrustAnchors;
        let rsa: XmlSigner;
        let ecSigner: Party;
        let pidCa: Party;
        let pidLeaf: Party;
        let pidCa2: Party;
        let pidLeaf2: Party;
        let walletCa: Party;
        let walletLeaf: Party;
        let strangerCa: Party;
        let strangerLeaf: Party;
        let qcCa: Party;
        let qcLeaf: Party;

        const call = async (method: 'POST' | 'PATCH' | 'PUT' | 'DELETE', url: string, payload?: object, status = method === 'POST' ? 201 : 200) => {
            const res = await t.server.inject({ method, url, headers: bearer(admin), ...(payload ? { payload } : {}) });
            expect(res.statusCode, res.payload).to.equal(status);
            return res.result as any;
        };
        const serveXml = (path: string, services: Parameters<typeof trustedListXml>[0], nextUpdate = new Date(Date.now() + 24 * HOUR), signer: XmlSigner = rsa) => {
            lists.routes.set(path, { body: signTrustedList(trustedListXml(services, nextUpdate), signer) });
        };

        before(async () => {
            t = await startTestServer(dialect, {
                manifest: manifestFor({ plugin: trust.plugin, options: { fetchTimeoutMs: 1500, refreshIntervalSeconds: 3600 } }, 'hallmark-oid4vp', 'hallmark-kms-db', 'hallmark-tenancy'),
                env: { OUTBOUND_URL_ALLOW_HTTP: 'true', OUTBOUND_URL_ALLOW_PRIVATE_NETWORK: 'true' }
            });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            anchors = new TrustAnchors({ registry: t.server.registry });
            lists = await startListServer();
            rsa = await rsaSigner('Trusted list operator');
            ecSigner = await party('LoTE operator', null, { ca: true });
            pidCa = await party('PID CA', null, { ca: true });
            pidLeaf = await party('PID issuer', pidCa);
            pidCa2 = await party('PID CA 2', null, { ca: true });
            pidLeaf2 = await party('PID issuer 2', pidCa2);
            walletCa = await party('Wallet provider CA', null, { ca: true });
            walletLeaf = await party('Wallet provider', walletCa);
            strangerCa = await party('Stranger CA', null, { ca: true });
            strangerLeaf = await party('Stranger', strangerCa);
            qcCa = await party('QC CA', null, { ca: true });
            qcLeaf = await party('QC leaf', qcCa);
        });
        after(async () => {
            await lists?.close();
            await t?.stop();
        });

        it('trusts the PID providers of a signed ETSI TS 119 612 list, and only those (service types mapped)', async () => {
            serveXml('/tl.xml', [
                { type: SVC.pidXml, certificates: [pidCa.cert] },
                { type: SVC.walletXml, certificates: [walletCa.cert] },
                { type: SVC.qcCa, certificates: [qcCa.cert] },
                { type: SVC.pidXml, certificates: [strangerCa.cert], status: 'http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/withdrawn' }
            ]);
            await call('POST', '/api/trust-lists', { id: 'xml', url: `${lists.base}/tl.xml`, signerCertificates: [pem(rsa)] });
            const byId = [{ type: 'etsi_tl', values: [{ trustListId: 'xml' }] }];
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)], byId)).to.be.undefined();
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)], [{ type: 'etsi_tl', values: [{ url: `${lists.base}/tl.xml` }] }])).to.be.undefined();
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)])).to.be.undefined();
            // A CA service of another type identifies the chain but does not issue PIDs; a withdrawn service is out.
            expect(await outcome(anchors, 'acme', [b64(qcLeaf)], byId)).to.equal('trust_chain_not_trusted');
            expect(await outcome(anchors, 'acme', [b64(strangerLeaf)], byId)).to.equal('no_trust_chain_to_root');
            // The wallet provider entry serves the issuer side (wallet and key attestations).
            expect(await outcome(anchors, 'acme', [b64(walletLeaf)], undefined, ['wallet-provider'])).to.be.undefined();
            const key = await walletProviderKey(anchors, 'acme', [b64(walletLeaf)], new Date(), 'wallet attestation', (d) => new Error(d));
            expect(key.export({ format: 'jwk' }).x).to.equal(walletLeaf.privateJwk.x);
            // Fetched once, then served from the snapshot.
            expect(lists.hits.get('/tl.xml')).to.equal(1);
        });

        it('an ECDSA-signed XML list verifies too; a list signed by another key, or altered after signing, is unavailable', async () => {
            const ecXml = { privateKey: ecSigner.privateKey, certificate: ecSigner.cert };
            serveXml('/ec.xml', [{ type: SVC.pidXml, certificates: [pidCa.cert] }], undefined, ecXml);
            await call('POST', '/api/trust-lists', { id: 'ec', url: `${lists.base}/ec.xml`, signerCertificates: [pem(ecSigner)] });
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)], [{ type: 'etsi_tl', values: [{ trustListId: 'ec' }] }])).to.be.undefined();

            const other = await rsaSigner('Impostor');
            serveXml('/impostor.xml', [{ type: SVC.pidXml, certificates: [strangerCa.cert] }], undefined, other);
            await call('POST', '/api/trust-lists', { id: 'impostor', url: `${lists.base}/impostor.xml`, signerCertificates: [pem(rsa)] });
            expect(await outcome(anchors, 'acme', [b64(strangerLeaf)], [{ type: 'etsi_tl', values: [{ trustListId: 'impostor' }] }])).to.equal('trust_list_unavailable');

            // Altered after signing: the stranger's CA swapped in for the PID CA.
            const signed = signTrustedList(trustedListXml([{ type: SVC.pidXml, certificates: [pidCa.cert] }], new Date(Date.now() + HOUR)), rsa);
            lists.routes.set('/altered.xml', { body: signed.replace(b64(pidCa), b64(strangerCa)) });
            await call('POST', '/api/trust-lists', { id: 'altered', url: `${lists.base}/altered.xml`, signerCertificates: [pem(rsa)] });
            expect(await outcome(anchors, 'acme', [b64(strangerLeaf)], [{ type: 'etsi_tl', values: [{ trustListId: 'altered' }] }])).to.equal('trust_list_unavailable');

            // Signature wrapping: a forged list around the signed one is never read.
            const wrapped = signed.replace('<tsl:SchemeInformation>', `<tsl:TrustServiceProviderList><tsl:TrustServiceProvider><tsl:TSPServices><tsl:TSPService><tsl:ServiceInformation><tsl:ServiceTypeIdentifier>${SVC.pidXml}</tsl:ServiceTypeIdentifier><tsl:ServiceDigitalIdentity><tsl:DigitalId><tsl:X509Certificate>${b64(strangerCa)}</tsl:X509Certificate></tsl:DigitalId></tsl:ServiceDigitalIdentity><tsl:ServiceStatus>http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/granted</tsl:ServiceStatus></tsl:ServiceInformation></tsl:TSPService></tsl:TSPServices></tsl:TrustServiceProvider></tsl:TrustServiceProviderList><tsl:SchemeInformation>`);
            lists.routes.set('/wrapped.xml', { body: wrapped });
            await call('POST', '/api/trust-lists', { id: 'wrapped', url: `${lists.base}/wrapped.xml`, signerCertificates: [pem(rsa)] });
            expect(await outcome(anchors, 'acme', [b64(strangerLeaf)], [{ type: 'etsi_tl', values: [{ trustListId: 'wrapped' }] }])).to.equal('trust_list_unavailable');

            // No signer certificates: the signature could never be checked, so such a list is refused.
            await call('POST', '/api/trust-lists', { id: 'unsigned', url: `${lists.base}/tl.xml` }, 400);
        });

        it('a list whose NextUpdate has passed is unavailable (fail closed)', async () => {
            serveXml('/stale.xml', [{ type: SVC.pidXml, certificates: [pidCa.cert] }], new Date(Date.now() - 1000));
            await call('POST', '/api/trust-lists', { id: 'stale', url: `${lists.base}/stale.xml`, signerCertificates: [pem(rsa)] });
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)], [{ type: 'etsi_tl', values: [{ trustListId: 'stale' }] }])).to.equal('trust_list_unavailable');
            // A verified snapshot serves until its NextUpdate; then the list is fetched again, and while the server
            // still has a list whose NextUpdate passed, it is unavailable rather than trusted as it was.
            serveXml('/short.xml', [{ type: SVC.pidXml, certificates: [pidCa.cert] }], new Date(Date.now() + 1200));
            await call('POST', '/api/trust-lists', { id: 'short', url: `${lists.base}/short.xml`, signerCertificates: [pem(rsa)] });
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)], [{ type: 'etsi_tl', values: [{ trustListId: 'short' }] }])).to.be.undefined();
            await new Promise((resolve) => setTimeout(resolve, 1300));
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)], [{ type: 'etsi_tl', values: [{ trustListId: 'short' }] }])).to.equal('trust_list_unavailable');
            expect(lists.hits.get('/short.xml')).to.equal(2);
            expect(await t.server.db.knex('trust_list_snapshots').where({ tenantId: 'acme', listId: 'short' })).to.have.length(1);
            await call('DELETE', '/api/trust-lists/short', undefined, 204);
            // The snapshot of a deleted list goes with it (in the background).
            for (let i = 0; i < 50 && (await t.server.db.knex('trust_list_snapshots').where({ tenantId: 'acme', listId: 'short' })).length; i++) {
                await new Promise((resolve) => setTimeout(resolve, 20));
            }
            expect(await t.server.db.knex('trust_list_snapshots').where({ tenantId: 'acme', listId: 'short' })).to.have.length(0);
        });

        it('a server that is down or slow makes only the credentials that depend on its list fail, with trust_list_unavailable', async () => {
            const down = await freePort();
            await call('POST', '/api/trust-lists', { id: 'down', url: `http://127.0.0.1:${down}/tl.xml`, signerCertificates: [pem(rsa)] });
            lists.routes.set('/slow.xml', { body: signTrustedList(trustedListXml([{ type: SVC.pidXml, certificates: [pidCa2.cert] }], new Date(Date.now() + HOUR)), rsa), delayMs: 4000 });
            await call('POST', '/api/trust-lists', { id: 'slow', url: `${lists.base}/slow.xml`, signerCertificates: [pem(rsa)] });
            await call('POST', '/api/trust-lists', { id: 'inline', entities: [{ serviceType: 'pid-issuance', certificates: [pem(pidCa2)] }] });

            expect(await outcome(anchors, 'acme', [b64(pidLeaf)], [{ type: 'etsi_tl', values: [{ trustListId: 'down' }] }])).to.equal('trust_list_unavailable');
            expect(await outcome(anchors, 'acme', [b64(pidLeaf2)], [{ type: 'etsi_tl', values: [{ trustListId: 'slow' }] }])).to.equal('trust_list_unavailable');
            // A query naming other lists is not affected.
            expect(await outcome(anchors, 'acme', [b64(pidLeaf2)], [{ type: 'etsi_tl', values: [{ trustListId: 'inline' }] }])).to.be.undefined();
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)], [{ type: 'etsi_tl', values: [{ trustListId: 'xml' }, { trustListId: 'down' }] }])).to.be.undefined();
            // A query naming none uses every list: what an available list trusts verifies, anything else may depend on
            // the unavailable ones.
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)])).to.be.undefined();
            expect(await outcome(anchors, 'acme', [b64(strangerLeaf)])).to.equal('trust_list_unavailable');
            // A url that is not one of the tenant's lists has no signer to check it with.
            expect(await outcome(anchors, 'acme', [b64(pidLeaf2)], [{ type: 'etsi_tl', values: [{ url: 'https://tl.example.eu/x.xml' }] }])).to.equal('trust_list_unavailable');
            await call('DELETE', '/api/trust-lists/down', undefined, 204);
            await call('DELETE', '/api/trust-lists/slow', undefined, 204);
        });

        it('a list changed between fetches: the refresh job replaces the snapshot, and a changed configuration is fetched anew', async () => {
            serveXml('/changing.xml', [{ type: SVC.pidXml, certificates: [pidCa.cert] }]);
            await call('POST', '/api/trust-lists', { id: 'changing', url: `${lists.base}/changing.xml`, signerCertificates: [pem(rsa)] });
            const byId = [{ type: 'etsi_tl', values: [{ trustListId: 'changing' }] }];
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)], byId)).to.be.undefined();
            expect(await outcome(anchors, 'acme', [b64(pidLeaf2)], byId)).to.equal('no_trust_chain_to_root');

            serveXml('/changing.xml', [{ type: SVC.pidXml, certificates: [pidCa2.cert] }]);
            // Not due yet: the snapshot stays.
            await t.server.jobs.runNow('trust-lists:refresh');
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)], byId)).to.be.undefined();
            await t.server.db.knex('trust_list_snapshots').where({ tenantId: 'acme', listId: 'changing' }).update({ refreshAt: 0 });
            await t.server.jobs.runNow('trust-lists:refresh');
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)], byId)).to.equal('no_trust_chain_to_root');
            expect(await outcome(anchors, 'acme', [b64(pidLeaf2)], byId)).to.be.undefined();

            // A failed refresh keeps the verified snapshot until its NextUpdate.
            lists.routes.set('/changing.xml', { status: 500, body: '' });
            await t.server.db.knex('trust_list_snapshots').where({ tenantId: 'acme', listId: 'changing' }).update({ refreshAt: 0 });
            await t.server.jobs.runNow('trust-lists:refresh');
            expect(await outcome(anchors, 'acme', [b64(pidLeaf2)], byId)).to.be.undefined();

            // Another signer certificate: the snapshot of the old configuration no longer applies.
            serveXml('/changing2.xml', [{ type: SVC.pidXml, certificates: [pidCa.cert] }]);
            await call('PATCH', '/api/trust-lists/changing', { url: `${lists.base}/changing2.xml` });
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)], byId)).to.be.undefined();
            expect(await outcome(anchors, 'acme', [b64(pidLeaf2)], byId)).to.equal('no_trust_chain_to_root');
        });

        it('JWT lists of trusted entities (TS 119 602): trusted, untrusted, bad signature, expired NextUpdate', async () => {
            const loteLeaf = await party('LoTE signing', ecSigner);
            const services = [
                { type: SVC.pidLote, certificates: [pidCa2.cert] },
                { type: SVC.walletLote, certificates: [walletCa.cert] },
                { type: SVC.pidRevocationLote, certificates: [qcCa.cert] }
            ];
            lists.routes.set('/lote.jwt', { body: await signLote(services, new Date(Date.now() + HOUR), loteLeaf.privateKey, [loteLeaf.cert]), contentType: 'application/jwt' });
            await call('POST', '/api/trust-lists', { id: 'lote', url: `${lists.base}/lote.jwt`, signerCertificates: [pem(ecSigner)] });
            const byId = [{ type: 'etsi_tl', values: [{ trustListId: 'lote' }] }];
            expect(await outcome(anchors, 'acme', [b64(pidLeaf2)], byId)).to.be.undefined();
            expect(await outcome(anchors, 'acme', [b64(qcLeaf)], byId)).to.equal('trust_chain_not_trusted');
            expect(await outcome(anchors, 'acme', [b64(strangerLeaf)], byId)).to.equal('no_trust_chain_to_root');
            expect(await outcome(anchors, 'acme', [b64(walletLeaf)], byId, ['wallet-provider'])).to.be.undefined();

            // Signed with the signer certificate's own key, without x5c.
            lists.routes.set('/bare.jwt', { body: await signLote(services, new Date(Date.now() + HOUR), ecSigner.privateKey) });
            await call('POST', '/api/trust-lists', { id: 'bare', url: `${lists.base}/bare.jwt`, signerCertificates: [pem(ecSigner)] });
            expect(await outcome(anchors, 'acme', [b64(pidLeaf2)], [{ type: 'etsi_tl', values: [{ trustListId: 'bare' }] }])).to.be.undefined();

            const forger = await party('Forger', null, { ca: true });
            lists.routes.set('/forged.jwt', { body: await signLote([{ type: SVC.pidLote, certificates: [strangerCa.cert] }], new Date(Date.now() + HOUR), forger.privateKey) });
            await call('POST', '/api/trust-lists', { id: 'forged', url: `${lists.base}/forged.jwt`, signerCertificates: [pem(ecSigner)] });
            expect(await outcome(anchors, 'acme', [b64(strangerLeaf)], [{ type: 'etsi_tl', values: [{ trustListId: 'forged' }] }])).to.equal('trust_list_unavailable');

            lists.routes.set('/old.jwt', { body: await signLote(services, new Date(Date.now() - 1000), ecSigner.privateKey) });
            await call('POST', '/api/trust-lists', { id: 'old', url: `${lists.base}/old.jwt`, signerCertificates: [pem(ecSigner)] });
            expect(await outcome(anchors, 'acme', [b64(pidLeaf2)], [{ type: 'etsi_tl', values: [{ trustListId: 'old' }] }])).to.equal('trust_list_unavailable');

            lists.routes.set('/garbage', { body: 'neither XML nor a JWS' });
            await call('POST', '/api/trust-lists', { id: 'garbage', url: `${lists.base}/garbage`, signerCertificates: [pem(ecSigner)] });
            expect(await outcome(anchors, 'acme', [b64(pidLeaf2)], [{ type: 'etsi_tl', values: [{ trustListId: 'garbage' }] }])).to.equal('trust_list_unavailable');
            for (const id of ['forged', 'old', 'garbage', 'impostor', 'altered', 'wrapped', 'stale']) {
                await call('DELETE', `/api/trust-lists/${id}`, undefined, 204);
            }
        });

        it('aki and verifierKey pick the anchor with that key from the tenant\'s lists; openid_federation alone is refused', async () => {
            const aki = (p: Party) => X509.SubjectKeyIdentifierExtension.create(p.cert.publicKey).then((e) => Buffer.from(e.keyId, 'hex').toString('base64url'));
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)], [{ type: 'aki', values: [await aki(pidCa)] }])).to.be.undefined();
            // The key of another listed PID CA: that anchor alone applies.
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)], [{ type: 'aki', values: [await aki(pidCa2)] }])).to.equal('no_trust_chain_to_root');
            expect(await outcome(anchors, 'acme', [b64(strangerLeaf)], [{ type: 'aki', values: [await aki(strangerCa)] }])).to.equal('no_trust_chain_to_root');
            const jwk = (p: Party) => ({ kty: p.privateJwk.kty, crv: p.privateJwk.crv, x: p.privateJwk.x, y: p.privateJwk.y });
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)], [{ type: 'etsi_tl', values: [{ verifierKey: jwk(pidCa) }] }])).to.be.undefined();
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)], [{ type: 'etsi_tl', values: [{ verifierKey: jwk(strangerCa) }] }])).to.equal('no_trust_chain_to_root');
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)], [{ type: 'openid_federation', values: ['https://federation.example'] }])).to.equal('verification_error');
            // Beside an evaluable authority, a federation authority adds nothing (never the tenant's other lists).
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)], [{ type: 'openid_federation', values: ['https://federation.example'] }, { type: 'aki', values: [await aki(pidCa2)] }])).to.equal('no_trust_chain_to_root');
            // With a list of the tenant down, an aki that matches nothing may be on it.
            const down = await freePort();
            await call('POST', '/api/trust-lists', { id: 'down2', url: `http://127.0.0.1:${down}/tl.xml`, signerCertificates: [pem(rsa)] });
            expect(await outcome(anchors, 'acme', [b64(strangerLeaf)], [{ type: 'aki', values: [await aki(strangerCa)] }])).to.equal('trust_list_unavailable');
            expect(await outcome(anchors, 'acme', [b64(pidLeaf)], [{ type: 'aki', values: [await aki(pidCa)] }])).to.be.undefined();
            await call('DELETE', '/api/trust-lists/down2', undefined, 204);
        });

        it('a presentation trusts "the PID providers on this signed list" end to end, and fails closed when the list goes', async () => {
            const issuer = await call('POST', '/api/key-chain', { id: 'issuer', usageType: 'attestation', subject: { commonName: 'Acme PID', country: 'DE' } });
            await call('POST', '/api/key-chain', { id: 'verifier', usageType: 'access', subject: { commonName: 'Acme verifier' } });
            const issuerRoot = new X509.X509Certificate(issuer.rootCertificate as string);
            const started = Date.now();
            serveXml('/pid.xml', [{ type: SVC.pidXml, certificates: [issuerRoot] }], new Date(Date.now() + 3000));
            await call('POST', '/api/trust-lists', { id: 'pid-list', url: `${lists.base}/pid.xml`, signerCertificates: [pem(rsa)] });
            await call('POST', '/api/verifier/config', {
                id: 'pid', accessKeyChainId: 'verifier',
                dcql_query: { credentials: [{ id: 'pid', format: 'dc+sd-jwt', meta: { vct_values: ['urn:eudi:pid:1'] }, claims: [{ path: ['given_name'] }], trusted_authorities: [{ type: 'etsi_tl', values: [{ trustListId: 'pid-list' }] }] }] }
            });
            const holder = await Jose.generateKeyPair('ES256', { extractable: true });
            const credential = await issueSdJwtVc(t.server.signing, {
                tenantId: 'acme', keyChainId: 'issuer', issuer: 'http://hallmark.test/issuers/acme', vct: 'urn:eudi:pid:1',
                claims: { given_name: 'Erika' }, fields: [{ path: ['given_name'], disclosable: true }], holderJwk: await Jose.exportJWK(holder.publicKey)
            });
            const present = async () => {
                const offer = await call('POST', '/api/verifier/offer', { requestId: 'pid' });
                const jar = (await t.server.inject(new URL(offer.uri).searchParams.get('request_uri')!.replace('http://hallmark.test', ''))).payload;
                const request = Jose.decodeJwt(jar) as any;
                const sdjwt = new SDJwtVcInstance({
                    hasher, kbSignAlg: 'ES256',
                    kbSigner: async (data: string) => Buffer.from(Crypto.sign('sha256', Buffer.from(data), { key: holder.privateKey as unknown as Crypto.KeyObject, dsaEncoding: 'ieee-p1363' })).toString('base64url')
                });
                const vp = await sdjwt.present(credential, { given_name: true }, { kb: { payload: { aud: request.client_id, nonce: request.nonce, iat: Math.floor(Date.now() / 1000) } } });
                const encKey = request.client_metadata.jwks.keys[0];
                const jwe = await new Jose.CompactEncrypt(new TextEncoder().encode(JSON.stringify({ vp_token: { pid: [vp] }, state: request.state })))
                    .setProtectedHeader({ alg: 'ECDH-ES', enc: 'A128GCM', kid: encKey.kid }).encrypt(await Jose.importJWK(encKey, 'ECDH-ES'));
                await t.server.inject({ method: 'POST', url: request.response_uri.replace('http://hallmark.test', ''), payload: `response=${jwe}`, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
                return (await t.server.inject({ url: `/api/session/${offer.session}`, headers: bearer(admin) })).result as any;
            };
            const ok = await present();
            expect(ok.status, JSON.stringify(ok)).to.equal('completed');

            // The list server stops serving and the list's NextUpdate passes: fail closed.
            lists.routes.set('/pid.xml', { status: 503, body: '' });
            await new Promise((resolve) => setTimeout(resolve, Math.max(0, started + 3100 - Date.now())));
            const failed = await present();
            expect(failed.status).to.equal('failed');
            expect(failed.failureCode).to.equal('trust_list_unavailable');
            expect(JSON.stringify(failed.outcome)).to.not.contain('127.0.0.1');
        });

        it('parses lists directly: bad input is refused with a reason, never a crash', async () => {
            const signer = [rsa.certificate];
            for (const body of ['', '<', '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><x>&a;</x>', '<other xmlns="urn:x"/>', trustedListXml([], new Date(Date.now() + HOUR)), 'a.b.c', 'eyJhbGciOiJub25lIn0.e30.']) {
                await expect(parseTrustList(body, signer, new Date())).to.reject();
            }
            await expect(parseTrustList(signTrustedList(trustedListXml([], new Date(Date.now() + HOUR)), rsa), [], new Date())).to.reject(Error, /no signerCertificates/);
            // Expired signer certificate; two signatures; no NextUpdate.
            const expired = await party('Expired operator', null, { ca: true, from: -3 * 86_400_000, to: -86_400_000 });
            const ecXml = signTrustedList(trustedListXml([], new Date(Date.now() + HOUR)), { privateKey: expired.privateKey, certificate: expired.cert });
            await expect(parseTrustList(ecXml, [expired.cert], new Date())).to.reject(Error, /expired or not yet valid/);
            const once = signTrustedList(trustedListXml([], new Date(Date.now() + HOUR)), rsa);
            await expect(parseTrustList(signTrustedList(once, rsa), signer, new Date())).to.reject(Error, /2 enveloped signatures/);
            const noNextUpdate = signTrustedList(trustedListXml([], new Date(Date.now() + HOUR)).replace(/<tsl:NextUpdate>.*<\/tsl:NextUpdate>/, ''), rsa);
            await expect(parseTrustList(noNextUpdate, signer, new Date())).to.reject(Error, /NextUpdate is missing/);
            // JWS: not a LoTE, an unknown algorithm, an x5c that chains elsewhere, a payload that is not JSON.
            const ec = [ecSigner.cert];
            const jws = (payload: string, header: Jose.CompactJWSHeaderParameters, key: Crypto.KeyObject = ecSigner.privateKey) => new Jose.CompactSign(new TextEncoder().encode(payload)).setProtectedHeader(header).sign(key);
            await expect(parseTrustList(await jws('{"x":1}', { alg: 'ES256' }), ec, new Date())).to.reject(Error, /not a list of trusted entities/);
            await expect(parseTrustList(await jws('not json', { alg: 'ES256' }), ec, new Date())).to.reject(Error, /not JSON/);
            await expect(parseTrustList(await jws('{}', { alg: 'HS256' }, Crypto.createSecretKey(Buffer.alloc(32))), ec, new Date())).to.reject(Error, /algorithm HS256/);
            await expect(parseTrustList(await jws('{}', { alg: 'ES256', x5c: [b64(strangerLeaf)] }, strangerLeaf.privateKey), ec, new Date())).to.reject(Error, /does not chain to a signer/);
            // Odd shapes inside a LoTE are skipped, never trusted: only the well-formed, in-force service counts.
            const odd = JSON.stringify({ LoTE: { ListAndSchemeInformation: { NextUpdate: new Date(Date.now() + HOUR).toISOString(), LoTESequenceNumber: 3 }, TrustedEntitiesList: [
                'entity', { TrustedEntityServices: 'x' }, { TrustedEntityServices: [null, { ServiceInformation: 'x' }, { ServiceInformation: { ServiceTypeIdentifier: SVC.pidLote, ServiceStatus: 'http://uri.etsi.org/TrstSvc/TrustedList/Svcstatus/withdrawn', ServiceDigitalIdentity: { X509Certificates: [{ val: b64(strangerCa) }] } } },
                    { ServiceInformation: { ServiceTypeIdentifier: 7, ServiceDigitalIdentity: { X509Certificates: [{ val: 5 }, 'x', { val: '!!' }, { val: b64(qcCa) }] } } },
                    { ServiceInformation: { ServiceTypeIdentifier: SVC.pidLote, ServiceDigitalIdentity: { X509Certificates: [{ val: b64(pidCa) }] } } }] }
            ] } });
            const oddList = await parseTrustList(await jws(odd, { alg: 'ES256' }), ec, new Date());
            expect(oddList).to.include({ format: 'lote-jwt', sequence: 3 });
            const derOf = (text: string) => Buffer.from(new X509.X509Certificate(text).rawData).toString('base64');
            expect(oddList.anchors.map((a) => [a.serviceType, derOf(a.certificate)])).to.equal([['other', b64(qcCa)], ['pid-issuance', b64(pidCa)]]);
            const parsed = await parseTrustList(signTrustedList(trustedListXml([{ type: SVC.pidXml, certificates: [pidCa.cert] }], new Date(Date.now() + HOUR), 7), rsa), signer, new Date());
            expect(parsed).to.include({ format: 'etsi-tl-xml', sequence: 7 });
            expect(parsed.anchors).to.equal([{ certificate: pidCa.cert.toString('pem'), serviceType: 'pid-issuance' }]);
        });
    });
}
