import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { SDJwtVcInstance } from '@sd-jwt/sd-jwt-vc';
import * as Jose from 'jose';
import { issueSdJwtVc } from '../../plugins/oid4vci/formats/sd-jwt';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';
import { DEMO_ROOT_PEM } from '../helpers/pki';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const hasher = (data: string | ArrayBuffer) => new Uint8Array(Crypto.createHash('sha256').update(typeof data === 'string' ? data : Buffer.from(data)).digest());

for (const dialect of DIALECTS) {
    describe(`OpenID4VP with an SD-JWT VC, by hand (${dialect})`, () => {
        let t: TestServer;
        let admin: string;
        let holder: Awaited<ReturnType<typeof Jose.generateKeyPair>>;
        let credential: string;

        before(async () => {
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-oid4vp', 'hallmark-kms-db', 'hallmark-tenancy') });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            const call = async (url: string, payload: object) => {
                const res = await t.server.inject({ method: 'POST', url, headers: bearer(admin), payload });
                expect(res.statusCode, res.payload).to.equal(201);
                return res.result as any;
            };
            const issuer = await call('/api/key-chain', { id: 'issuer', usageType: 'attestation', subject: { commonName: 'Acme', country: 'DE' } });
            await call('/api/key-chain', { id: 'verifier', usageType: 'access', subject: { commonName: 'Acme verifier' } });
            await call('/api/trust-lists', { id: 'acme', entities: [{ name: 'Acme', serviceType: 'pid-issuance', certificates: [issuer.rootCertificate] }] });
            await call('/api/verifier/config', {
                id: 'age',
                dcql_query: { credentials: [{ id: 'pid', format: 'dc+sd-jwt', meta: { vct_values: ['urn:eudi:pid:1'] }, claims: [{ path: ['given_name'] }, { path: ['age_over_18'], values: [true] }] }] }
            });
            holder = await Jose.generateKeyPair('ES256', { extractable: true });
            credential = await issueSdJwtVc(t.server.signing, {
                tenantId: 'acme', keyChainId: 'issuer', issuer: 'http://hallmark.test/issuers/acme', vct: 'urn:eudi:pid:1',
                claims: { given_name: 'Erika', family_name: 'Mustermann', age_over_18: true },
                fields: [{ path: ['given_name'], disclosable: true }, { path: ['family_name'], disclosable: true }, { path: ['age_over_18'], disclosable: true }],
                holderJwk: await Jose.exportJWK(holder.publicKey)
            });
        });
        after(() => t.stop());

        const present = async (nonce: string, clientId: string) => {
            const sdjwt = new SDJwtVcInstance({
                hasher,
                kbSignAlg: 'ES256',
                kbSigner: async (data: string) => Buffer.from(Crypto.sign('sha256', Buffer.from(data), { key: Crypto.createPrivateKey({ key: await Jose.exportJWK(holder.privateKey) as Crypto.JsonWebKey, format: 'jwk' }), dsaEncoding: 'ieee-p1363' })).toString('base64url')
            });
            return sdjwt.present(credential, { given_name: true, age_over_18: true }, { kb: { payload: { aud: clientId, nonce, iat: Math.floor(Date.now() / 1000) } } });
        };

        it('verifies an encrypted direct_post.jwt response and completes the session', async () => {
            const offer = await t.server.inject({ method: 'POST', url: '/api/verifier/offer', headers: bearer(admin), payload: { requestId: 'age', reference: 'order-1' } });
            expect(offer.statusCode, offer.payload).to.equal(201);
            const { uri, session } = offer.result as any;
            const link = new URL(uri);
            const requestUri = link.searchParams.get('request_uri')!;
            const fetched = await t.server.inject(requestUri.replace('http://hallmark.test', ''));
            expect(fetched.statusCode, fetched.payload).to.equal(200);
            expect(fetched.headers['content-type']).to.contain('application/oauth-authz-req+jwt');
            const jar = fetched.payload;
            const header = Jose.decodeProtectedHeader(jar);
            expect(header.typ).to.equal('oauth-authz-req+jwt');
            const leaf = await Jose.importX509(`-----BEGIN CERTIFICATE-----\n${header.x5c![0]}\n-----END CERTIFICATE-----`, 'ES256');
            const { payload } = await Jose.jwtVerify(jar, leaf);
            expect(payload.client_id).to.equal(link.searchParams.get('client_id'));
            expect(payload.client_id as string).to.startWith('x509_hash:');
            const vpToken = { pid: [await present(payload.nonce as string, payload.client_id as string)] };
            const encKey = (payload.client_metadata as any).jwks.keys[0];
            const jwe = await new Jose.CompactEncrypt(new TextEncoder().encode(JSON.stringify({ vp_token: vpToken, state: payload.state })))
                .setProtectedHeader({ alg: 'ECDH-ES', enc: 'A256GCM', kid: encKey.kid }).encrypt(await Jose.importJWK(encKey, 'ECDH-ES'));
            const response = await t.server.inject({ method: 'POST', url: (payload.response_uri as string).replace('http://hallmark.test', ''), payload: `response=${jwe}`, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
            expect(response.statusCode, response.payload).to.equal(200);
            const result = (await t.server.inject({ url: `/api/session/${session}`, headers: bearer(admin) })).result as any;
            expect(result.status).to.equal('completed');
            expect(result.credentials[0].values[0]).to.include({ given_name: 'Erika', age_over_18: true });
            expect(result.credentials[0].values[0].family_name).to.not.exist();
            expect(result.outcome).to.equal({ result: 'success', credentials: [{ id: 'pid', format: 'dc+sd-jwt', verified: true }] });
            const replay = await t.server.inject({ method: 'POST', url: (payload.response_uri as string).replace('http://hallmark.test', ''), payload: `response=${jwe}`, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
            expect(replay.statusCode).to.equal(400);
            expect((replay.result as any).error_description).to.contain('already been used');
        });

        it('an inline webhook.url is checked against the outbound policy when the request is made (400 naming the field and the address class)', async () => {
            const cases: Array<[string, string]> = [
                ['https://127.0.0.1:8443/hook', 'loopback address'],
                ['https://10.1.2.3/hook', 'private address'],
                ['https://[::1]/hook', 'loopback address'],
                ['http://webhook.example/hook', 'http URLs are not allowed']
            ];
            for (const [url, reason] of cases) {
                const res = await t.server.inject({ method: 'POST', url: '/api/verifier/offer', headers: bearer(admin), payload: { requestId: 'age', webhook: { url } } });
                expect(res.statusCode, url).to.equal(400);
                const { message, details } = res.result as { message: string; details: unknown };
                expect(message).to.startWith('webhook.url: ');
                expect(message).to.contain(reason);
                expect(details).to.equal([{ path: 'webhook.url', message: message.slice('webhook.url: '.length) }]);
            }
        });

        it('makes each request from the presentation configuration as it stands: created, changed and deleted between requests', async () => {
            const offer = () => t.server.inject({ method: 'POST', url: '/api/verifier/offer', headers: bearer(admin), payload: { requestId: 'changing' } });
            const claimsOf = async () => {
                const res = await offer();
                expect(res.statusCode, res.payload).to.equal(201);
                const jar = (await t.server.inject(new URL((res.result as any).uri).searchParams.get('request_uri')!.replace('http://hallmark.test', ''))).payload;
                return (Jose.decodeJwt(jar) as any).dcql_query.credentials[0].claims.map((c: { path: string[] }) => c.path.join('.'));
            };
            // Unknown, then known: an answer for a missing configuration is not kept once it exists.
            expect((await offer()).statusCode).to.equal(400);
            const created = await t.server.inject({ method: 'POST', url: '/api/verifier/config', headers: bearer(admin), payload: {
                id: 'changing',
                dcql_query: { credentials: [{ id: 'pid', format: 'dc+sd-jwt', meta: { vct_values: ['urn:eudi:pid:1'] }, claims: [{ path: ['given_name'] }] }] }
            } });
            expect(created.statusCode, created.payload).to.equal(201);
            expect(await claimsOf()).to.equal(['given_name']);
            expect(await claimsOf()).to.equal(['given_name']);
            const changed = await t.server.inject({ method: 'PATCH', url: '/api/verifier/config/changing', headers: bearer(admin), payload: {
                dcql_query: { credentials: [{ id: 'pid', format: 'dc+sd-jwt', meta: { vct_values: ['urn:eudi:pid:1'] }, claims: [{ path: ['family_name'] }] }] }
            } });
            expect(changed.statusCode, changed.payload).to.equal(200);
            expect(await claimsOf()).to.equal(['family_name']);
            expect((await t.server.inject({ method: 'DELETE', url: '/api/verifier/config/changing', headers: bearer(admin) })).statusCode).to.equal(204);
            expect((await offer()).statusCode).to.equal(400);
        });

        it('fails closed with trust_list_unavailable when a remote trust list applies, which cannot be loaded', async () => {
            const create = await t.server.inject({ method: 'POST', url: '/api/trust-lists', headers: bearer(admin), payload: { id: 'remote', url: 'https://tl.example.eu/tsl.xml', signerCertificates: [DEMO_ROOT_PEM] } });
            expect(create.statusCode, create.payload).to.equal(201);
            await t.server.inject({ method: 'POST', url: '/api/verifier/config', headers: bearer(admin), payload: {
                id: 'remote-only',
                dcql_query: { credentials: [{ id: 'pid', format: 'dc+sd-jwt', meta: { vct_values: ['urn:eudi:pid:1'] }, claims: [{ path: ['given_name'] }], trusted_authorities: [{ type: 'etsi_tl', values: [{ trustListId: 'remote' }] }] }] }
            } });
            const offer = await t.server.inject({ method: 'POST', url: '/api/verifier/offer', headers: bearer(admin), payload: { requestId: 'remote-only' } });
            const { uri, session } = offer.result as any;
            const jar = (await t.server.inject(new URL(uri).searchParams.get('request_uri')!.replace('http://hallmark.test', ''))).payload;
            const request = Jose.decodeJwt(jar) as any;
            const vpToken = { pid: [await present(request.nonce, request.client_id)] };
            const encKey = request.client_metadata.jwks.keys[0];
            const jwe = await new Jose.CompactEncrypt(new TextEncoder().encode(JSON.stringify({ vp_token: vpToken, state: request.state })))
                .setProtectedHeader({ alg: 'ECDH-ES', enc: 'A128GCM', kid: encKey.kid }).encrypt(await Jose.importJWK(encKey, 'ECDH-ES'));
            const response = await t.server.inject({ method: 'POST', url: request.response_uri.replace('http://hallmark.test', ''), payload: `response=${jwe}`, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
            expect(response.statusCode).to.equal(400);
            const result = (await t.server.inject({ url: `/api/session/${session}`, headers: bearer(admin) })).result as any;
            expect(result.status).to.equal('failed');
            expect(result.failureCode).to.equal('trust_list_unavailable');
            expect(result.errorReason).to.equal('The trusted list could not be loaded, so the credential could not be validated.');
            expect(result.outcome.credentials).to.equal([{ id: 'pid', format: 'dc+sd-jwt', verified: false, error: 'trust_list_unavailable', message: 'The trusted list could not be loaded, so the credential could not be validated.' }]);
            expect(JSON.stringify(result.outcome)).to.not.contain('tl.example.eu');
        });
    });
}
