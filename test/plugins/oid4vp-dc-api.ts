import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { SDJwtVcInstance } from '@sd-jwt/sd-jwt-vc';
import * as Jose from 'jose';
import { issueSdJwtVc } from '../../plugins/oid4vci/formats/sd-jwt';
import { DIALECTS } from '../helpers/databases';
import { newHolderKey, type HolderKey } from '../helpers/holder';
import { dcApiTranscript, deviceResponse } from '../helpers/mdoc-wallet';
import type { Receiver } from '../helpers/net';
import type { TestServer } from '../helpers/server';
import { DOCTYPE, NS, startVerifierTenant, TRUSTED_ISSUER, type VerifierTenant } from '../helpers/verifier-tenant';

/**
 * OpenID4VP over the W3C Digital Credentials API (OpenID4VP 1.0 Appendix A, contract "Presentation"): the signed
 * request object (openid4vp-v1-signed, dc_api.jwt, expected_origins), the wallet's JWE posted with the page's origin
 * by the relying party, SD-JWT VC (KB-JWT aud origin:<origin>) and mdoc (OpenID4VPDCAPIHandover) end to end, the trust
 * outcome and webhook, an origin that was not expected, replay, bad input, and x509_san_dns client ids.
 */

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const VCT = 'urn:eudi:pid:1';
const ORIGIN = 'https://rp.example';
const PID_QUERY = { credentials: [{ id: 'pid', format: 'dc+sd-jwt', meta: { vct_values: [VCT] }, claims: [{ path: ['given_name'] }, { path: ['age_over_18'], values: [true] }] }] };
const MDL_QUERY = { credentials: [{ id: 'mdl', format: 'mso_mdoc', meta: { doctype_value: DOCTYPE }, claims: [{ path: [NS, 'family_name'] }, { path: [NS, 'age_over_18'] }] }] };
const hasher = (data: string | ArrayBuffer) => new Uint8Array(Crypto.createHash('sha256').update(typeof data === 'string' ? data : Buffer.from(data)).digest());

for (const dialect of DIALECTS) {
    describe(`OpenID4VP over the Digital Credentials API (${dialect})`, () => {
        let tenant: VerifierTenant | undefined;
        let t: TestServer;
        let api: VerifierTenant['api'];
        let create: VerifierTenant['create'];
        let holderKey: HolderKey;
        let deviceKey: HolderKey;
        let pid: string;
        let mdl: string;
        let issuerRoot: string;
        let receiver: Receiver;

        before(async () => {
            tenant = await startVerifierTenant(dialect, 'hallmark-oid4vp');
            ({ t, api, create, deviceKey, mdl, issuerRoot, receiver } = tenant);
            await create('/api/key-chain', { id: 'verifier-dns', usageType: 'access', subject: { commonName: 'Acme verifier DNS' }, sanDns: ['verifier.acme.example'] });
            await create('/api/issuer/webhook-endpoints', { id: 'hook', name: 'Results', url: `${receiver.url}/endpoint`, auth: { type: 'none' } });
            await create('/api/verifier/config', { id: 'pid', dcql_query: PID_QUERY, accessKeyChainId: 'verifier', webhookEndpointId: 'hook', redirectUri: 'https://rp.example/ignored' });
            await create('/api/verifier/config', { id: 'mdl', dcql_query: MDL_QUERY, accessKeyChainId: 'verifier' });
            await create('/api/verifier/config', { id: 'pid-long', dcql_query: PID_QUERY, accessKeyChainId: 'verifier', lifeTime: 900 });
            await create('/api/verifier/config', { id: 'pid-dns', dcql_query: PID_QUERY, accessKeyChainId: 'verifier-dns', clientIdPrefix: 'x509_san_dns' });
            await create('/api/key-chain', { id: 'verifier-no-san', usageType: 'access', subject: { commonName: 'Acme verifier without SAN' }, sanDns: [] });
            await create('/api/verifier/config', { id: 'pid-dns-missing', dcql_query: PID_QUERY, accessKeyChainId: 'verifier-no-san', clientIdPrefix: 'x509_san_dns' });
            holderKey = await newHolderKey();
            pid = await issueSdJwtVc(t.server.signing, {
                tenantId: 'acme', keyChainId: 'issuer', issuer: 'http://hallmark.test/issuers/acme', vct: VCT,
                claims: { given_name: 'Erika', family_name: 'Mustermann', age_over_18: true },
                fields: ['given_name', 'family_name', 'age_over_18'].map((name) => ({ path: [name], disclosable: true })),
                holderJwk: holderKey.publicJwk
            });
        });
        after(() => tenant?.stop());

        /** The offer and the request object as the wallet checks it: signed by the x5c leaf of its header. */
        const offer = async (requestId: string, body: Record<string, unknown> = {}) => {
            const res = await api('POST', '/api/verifier/offer', { requestId, response_type: 'dc-api', expected_origins: [ORIGIN], ...body });
            expect(res.status, res.payload).to.equal(201);
            const { session, request } = res.body as { session: string; request: string };
            expect(Object.keys(res.body).sort()).to.equal(['request', 'session']);
            const header = Jose.decodeProtectedHeader(request);
            expect(header.typ).to.equal('oauth-authz-req+jwt');
            const leaf = await Jose.importX509(`-----BEGIN CERTIFICATE-----\n${header.x5c![0]}\n-----END CERTIFICATE-----`, 'ES256');
            const { payload } = await Jose.jwtVerify(request, leaf);
            return { session, request, payload: payload as Record<string, any>, x5c: header.x5c! };
        };
        const sdJwt = (nonce: string, aud: string) => new SDJwtVcInstance({
            hasher,
            kbSignAlg: 'ES256',
            kbSigner: (data: string) => Buffer.from(Crypto.sign('sha256', Buffer.from(data), { key: Crypto.createPrivateKey({ key: holderKey.privateJwk as Crypto.JsonWebKey, format: 'jwk' }), dsaEncoding: 'ieee-p1363' })).toString('base64url')
        }).present(pid, { given_name: true, age_over_18: true }, { kb: { payload: { aud, nonce, iat: Math.floor(Date.now() / 1000) } } });
        /** The wallet's dc_api.jwt response: {vp_token} encrypted (ECDH-ES) to the request's client_metadata key. */
        const encrypt = async (payload: Record<string, any>, vpToken: Record<string, string[]>) => {
            const key = payload.client_metadata.jwks.keys[0];
            return new Jose.CompactEncrypt(new TextEncoder().encode(JSON.stringify({ vp_token: vpToken })))
                .setProtectedHeader({ alg: 'ECDH-ES', enc: 'A128GCM', kid: key.kid }).encrypt(await Jose.importJWK(key, 'ECDH-ES'));
        };
        /** What the relying party's backend posts: the wallet's response and the page's origin. */
        const post = (session: string, body: Record<string, unknown>) => t.server.inject({ method: 'POST', url: `/presentations/${session}/oid4vp`, payload: body });
        const sessionOf = async (id: string) => (await api('GET', `/api/session/${id}`)).body;
        const thumbprint = (der: string) => Crypto.createHash('sha256').update(new Crypto.X509Certificate(Buffer.from(der.replace(/-----[^-]+-----|\s/g, ''), 'base64')).raw).digest('base64url');

        it('answers a signed dc_api.jwt request object with expected_origins', async () => {
            const { payload, x5c } = await offer('pid');
            expect(payload).to.include({ response_type: 'vp_token', response_mode: 'dc_api.jwt', expected_origins: [ORIGIN] });
            expect(payload.client_id).to.equal(`x509_hash:${Crypto.createHash('sha256').update(Buffer.from(x5c[0]!, 'base64')).digest('base64url')}`);
            expect(payload.response_uri).to.not.exist();
            expect(payload.state).to.not.exist();
            expect(payload.dcql_query).to.equal(PID_QUERY);
            expect(payload.nonce).to.be.a.string();
        });

        it('makes the request object expire with its session (the page may hand it to the wallet any time before)', async () => {
            const { session, payload } = await offer('pid-long');
            expect(payload.exp).to.equal(Math.floor(Date.parse((await sessionOf(session)).expiresAt) / 1000));
        });

        it('verifies an SD-JWT VC bound to origin:<origin>: completed with trust and webhook, skipping fetched; replay answers 400', async () => {
            const { session, payload } = await offer('pid', { reference: 'dc-1' });
            expect((await sessionOf(session)).status).to.equal('active');
            const response = await encrypt(payload, { pid: [await sdJwt(payload.nonce, `origin:${ORIGIN}`)] });
            const res = await post(session, { response, origin: ORIGIN });
            expect(res.statusCode, res.payload).to.equal(200);
            expect(res.result).to.equal({});
            const stored = await sessionOf(session);
            expect(stored.status).to.equal('completed');
            expect(stored.credentials[0].values[0]).to.include({ vct: VCT, given_name: 'Erika', age_over_18: true });
            expect(stored.credentials[0].values[0].family_name).to.not.exist();
            expect(stored.outcome).to.equal({ result: 'success', credentials: [{ id: 'pid', format: 'dc+sd-jwt', verified: true, trust: { matchedIssuer: TRUSTED_ISSUER, issuanceThumbprint: thumbprint(issuerRoot), matchMode: 'ca' } }] });
            const hook = receiver.deliveries.find((d) => d.body?.session === session)!;
            expect(hook.body).to.include({ status: 'completed', outcome: stored.outcome, reference: 'dc-1' });
            const again = await post(session, { response, origin: ORIGIN });
            expect(again.statusCode).to.equal(400);
            expect((again.result as any).error_description).to.equal('The presentation offer has already been used');
        });

        it('fails an SD-JWT VC whose KB-JWT names the client_id instead of the origin', async () => {
            const { session, payload } = await offer('pid');
            const response = await encrypt(payload, { pid: [await sdJwt(payload.nonce, payload.client_id)] });
            const res = await post(session, { response, origin: ORIGIN });
            expect(res.statusCode).to.equal(400);
            expect((await sessionOf(session)).status).to.equal('failed');
        });

        it('verifies an mdoc over the OpenID4VP DC API handover; another handover is signature_invalid', async () => {
            const { session, payload } = await offer('mdl');
            const key = payload.client_metadata.jwks.keys[0];
            const jkt = new Uint8Array(Buffer.from(await Jose.calculateJwkThumbprint(key, 'sha256'), 'base64url'));
            const elements: Array<[string, string]> = [[NS, 'family_name'], [NS, 'age_over_18']];
            const token = Buffer.from(await deviceResponse(mdl, deviceKey, DOCTYPE, elements, dcApiTranscript(ORIGIN, payload.nonce, jkt))).toString('base64url');
            const res = await post(session, { response: await encrypt(payload, { mdl: [token] }), origin: ORIGIN });
            expect(res.statusCode, res.payload).to.equal(200);
            const stored = await sessionOf(session);
            expect(stored.status).to.equal('completed');
            expect(stored.credentials).to.equal([{ id: 'mdl', values: [{ [NS]: { family_name: 'Mustermann', age_over_18: true } }] }]);
            expect(stored.outcome.credentials[0]).to.include({ id: 'mdl', format: 'mso_mdoc', docType: DOCTYPE, verified: true });
            expect(stored.outcome.credentials[0].trust).to.include({ matchedIssuer: TRUSTED_ISSUER, matchMode: 'ca' });

            const second = await offer('mdl');
            const otherOrigin = Buffer.from(await deviceResponse(mdl, deviceKey, DOCTYPE, elements, dcApiTranscript('https://evil.example', second.payload.nonce, jkt))).toString('base64url');
            const failed = await post(second.session, { response: await encrypt(second.payload, { mdl: [otherOrigin] }), origin: ORIGIN });
            expect(failed.statusCode).to.equal(400);
            expect(await sessionOf(second.session)).to.include({ status: 'failed', failureCode: 'signature_invalid' });
        });

        it('fails the session when the origin is not one of expected_origins', async () => {
            const { session, payload } = await offer('pid');
            const evil = 'https://evil.example';
            const response = await encrypt(payload, { pid: [await sdJwt(payload.nonce, `origin:${evil}`)] });
            const res = await post(session, { response, origin: evil });
            expect(res.statusCode).to.equal(400);
            expect(res.result).to.equal({ error: 'invalid_request', error_description: 'The credential could not be verified.' });
            const stored = await sessionOf(session);
            expect(stored).to.include({ status: 'failed', failureCode: 'verification_error' });
            expect(stored.outcome).to.equal({ result: 'failed', error: 'verification_error', message: 'The credential could not be verified.' });
        });

        it('records a wallet error response', async () => {
            const { session, payload } = await offer('pid');
            const key = payload.client_metadata.jwks.keys[0];
            const response = await new Jose.CompactEncrypt(new TextEncoder().encode(JSON.stringify({ error: 'access_denied', error_description: 'user declined' })))
                .setProtectedHeader({ alg: 'ECDH-ES', enc: 'A128GCM', kid: key.kid }).encrypt(await Jose.importJWK(key, 'ECDH-ES'));
            const res = await post(session, { response, origin: ORIGIN });
            expect(res.statusCode).to.equal(200);
            expect(await sessionOf(session)).to.include({ status: 'failed', failureCode: 'access_denied' });
        });

        it('fails an error response posted with an origin that was not expected as verification_error', async () => {
            const { session, payload } = await offer('pid');
            const key = payload.client_metadata.jwks.keys[0];
            const response = await new Jose.CompactEncrypt(new TextEncoder().encode(JSON.stringify({ error: 'access_denied', error_description: 'user declined' })))
                .setProtectedHeader({ alg: 'ECDH-ES', enc: 'A128GCM', kid: key.kid }).encrypt(await Jose.importJWK(key, 'ECDH-ES'));
            const res = await post(session, { response, origin: 'https://evil.example' });
            expect(res.statusCode).to.equal(400);
            expect(await sessionOf(session)).to.include({ status: 'failed', failureCode: 'verification_error' });
        });

        it('refuses bad input with 400 and leaves the session open', async () => {
            for (const body of [{ response_type: 'dc-api' }, { response_type: 'dc-api', expected_origins: [] }, { response_type: 'dc-api', expected_origins: ['not a url'] }, { response_type: 'dc-api', expected_origins: [ORIGIN], redirectUri: 'https://rp.example/x' }, { expected_origins: [ORIGIN] }]) {
                const res = await api('POST', '/api/verifier/offer', { requestId: 'pid', ...body });
                expect(res.status, JSON.stringify(body)).to.equal(400);
            }
            const { session, payload } = await offer('pid');
            const response = await encrypt(payload, { pid: [await sdJwt(payload.nonce, `origin:${ORIGIN}`)] });
            expect((await post(session, { response })).statusCode).to.equal(400);
            expect((await post(session, { response: 'not-a-jwe', origin: ORIGIN })).statusCode).to.equal(400);
            expect((await sessionOf(session)).status).to.equal('active');
            // No request object to fetch for a DC API session, even by its (never published) wallet nonce.
            const { walletNonce } = (await t.server.sessions.get(session))!;
            expect((await t.server.inject(`/presentations/${walletNonce}/oid4vp/request`)).statusCode).to.equal(400);
            expect((await t.server.inject({ method: 'POST', url: `/presentations/${walletNonce}/oid4vp/request` })).statusCode).to.equal(400);
            expect((await sessionOf(session)).status).to.equal('active');
            expect((await post(session, { response, origin: ORIGIN })).statusCode).to.equal(200);
            // After expiresAt: 400 with the spec's message.
            const expired = await offer('pid');
            await t.server.sessions.update(expired.session, { expiresAt: new Date(Date.now() - 1000).toISOString() });
            const late = await post(expired.session, { response: await encrypt(expired.payload, { pid: [await sdJwt(expired.payload.nonce, `origin:${ORIGIN}`)] }), origin: ORIGIN });
            expect(late.statusCode).to.equal(400);
            expect((late.result as any).error_description).to.equal('The presentation session has expired');
        });

        it('uses the x509_san_dns client id when the configuration asks for it, and refuses it without a DNS SAN', async () => {
            const { payload, x5c } = await offer('pid-dns');
            expect(payload.client_id).to.equal('x509_san_dns:verifier.acme.example');
            // The name is a DNS SAN of the very leaf that signed the request (offer() verified the signature with it).
            expect(new Crypto.X509Certificate(Buffer.from(x5c[0]!, 'base64')).subjectAltName!.split(', ')).to.include('DNS:verifier.acme.example');
            const redirect = await api('POST', '/api/verifier/offer', { requestId: 'pid-dns' });
            expect(redirect.status, redirect.payload).to.equal(201);
            expect(new URL(redirect.body.uri).searchParams.get('client_id')).to.equal('x509_san_dns:verifier.acme.example');
            const missing = await api('POST', '/api/verifier/offer', { requestId: 'pid-dns-missing', response_type: 'dc-api', expected_origins: [ORIGIN] });
            expect(missing.status).to.equal(400);
            expect(missing.payload).to.contain('DNS');
            const invalid = await api('POST', '/api/verifier/config', { id: 'bad-prefix', dcql_query: PID_QUERY, clientIdPrefix: 'redirect_uri' });
            expect(invalid.status, invalid.payload).to.equal(400);
        });
    });
}
