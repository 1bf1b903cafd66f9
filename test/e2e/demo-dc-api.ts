import Crypto from 'node:crypto';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { SDJwtVcInstance } from '@sd-jwt/sd-jwt-vc';
import * as Jose from 'jose';
import { bearer, clientWithToken, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { annexCTranscript, dcApiTranscript, deviceResponse, sealResponse } from '../helpers/mdoc-wallet';
import { freePort } from '../helpers/net';
import { startTestServer, type TestServer } from '../helpers/server';
import { Wallet, type Received } from '../helpers/wallet';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const NS = 'org.iso.18013.5.1';
const DOCTYPE = 'org.iso.18013.5.1.mDL';
const ORIGIN = 'https://rp.example';
const hasher = (data: string | ArrayBuffer) => new Uint8Array(Crypto.createHash('sha256').update(typeof data === 'string' ? data : Buffer.from(data)).digest());

/**
 * The demo tenant of examples/config through the two browser paths: its `identify` configuration accepts the demo
 * mDL over ISO 18013-7 Annex C (only its mso_mdoc option goes into the DeviceRequest) and the demo PID and mDL over
 * OpenID4VP with the Digital Credentials API.
 */
for (const dialect of DIALECTS) {
    describe(`demo configuration over ISO 18013-7 and the DC API (${dialect})`, () => {
        let t: TestServer;
        let offerer: string;
        let verifier: string;
        let mdl: Received;
        let pid: Received;
        before(async () => {
            const port = await freePort();
            t = await startTestServer(dialect, { listen: true, env: { PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}`, CONFIG_FOLDER: Path.join(__dirname, '../../examples/config') } });
            const root = await rootToken(t.server);
            offerer = (await clientWithToken(t.server, root, { clientId: 'demo-offers', roles: ['issuance:offer'], tenantId: 'demo' })).token;
            verifier = (await clientWithToken(t.server, root, { clientId: 'demo-verifier', roles: ['presentation:request'], tenantId: 'demo' })).token;
            const issue = async (configurationId: string, claims: object) => {
                const res = await t.server.inject({ method: 'POST', url: '/api/issuer/offer', headers: bearer(offerer), payload: { credentialConfigurationIds: [configurationId], credentialClaims: { [configurationId]: { type: 'inline', claims } } } });
                expect(res.statusCode, res.payload).to.equal(201);
                return new Wallet().receive((res.result as { uri: string }).uri, { configurationId });
            };
            mdl = await issue('mdl', { [NS]: { family_name: 'Mustermann', given_name: 'Erika', age_over_18: true } });
            pid = await issue('pid', { given_name: 'Erika', family_name: 'Mustermann', birthdate: '1964-08-12' });
        });
        after(() => t?.stop());

        const offer = async (payload: object) => {
            const res = await t.server.inject({ method: 'POST', url: '/api/verifier/offer', headers: bearer(verifier), payload: { requestId: 'identify', ...payload } });
            expect(res.statusCode, res.payload).to.equal(201);
            return res.result as Record<string, string>;
        };
        const sessionOf = async (id: string) => (await t.server.inject({ url: `/api/session/${id}`, headers: bearer(verifier) })).result as any;

        it('verifies the demo mDL over ISO 18013-7 Annex C', async () => {
            const answer = await offer({ response_type: 'iso-18013-7', expected_origins: [ORIGIN] });
            const transcript = annexCTranscript(answer.encryptionInfo!, ORIGIN);
            const data = await sealResponse(answer.encryptionInfo!, await deviceResponse(mdl.credentials[0]!, mdl.holderKeys[0]!, DOCTYPE, [[NS, 'given_name'], [NS, 'family_name']], transcript), transcript);
            const res = await t.server.inject({ method: 'POST', url: `/presentations/${answer.session}/iso-18013-7`, payload: { data } });
            expect(res.statusCode, res.payload).to.equal(200);
            const session = await sessionOf(answer.session!);
            expect(session.status).to.equal('completed');
            expect(session.credentials).to.equal([{ id: 'mdl', format: 'mso_mdoc', docType: DOCTYPE, claims: { [NS]: { given_name: 'Erika', family_name: 'Mustermann' } } }]);
            expect(session.outcome.credentials[0].trust).to.include({ matchedIssuer: 'Hallmark Demo Issuer', matchMode: 'ca' });
        });

        it('verifies the demo PID and the demo mDL over the Digital Credentials API', async () => {
            const submit = async (vpToken: (payload: Record<string, any>) => Promise<Record<string, string[]>>) => {
                const answer = await offer({ response_type: 'dc-api', expected_origins: [ORIGIN] });
                const { payload } = await Jose.jwtVerify(answer.request!, await Jose.importX509(`-----BEGIN CERTIFICATE-----\n${Jose.decodeProtectedHeader(answer.request!).x5c![0]}\n-----END CERTIFICATE-----`, 'ES256'));
                const key = (payload.client_metadata as any).jwks.keys[0];
                const response = await new Jose.CompactEncrypt(new TextEncoder().encode(JSON.stringify({ vp_token: await vpToken(payload) })))
                    .setProtectedHeader({ alg: 'ECDH-ES', enc: 'A256GCM', kid: key.kid }).encrypt(await Jose.importJWK(key, 'ECDH-ES'));
                const res = await t.server.inject({ method: 'POST', url: `/presentations/${answer.session}/oid4vp`, payload: { response, origin: ORIGIN } });
                expect(res.statusCode, res.payload).to.equal(200);
                return sessionOf(answer.session!);
            };
            const sdJwt = await submit(async (payload) => {
                const key = Crypto.createPrivateKey({ key: pid.holderKeys[0]!.privateJwk as Crypto.JsonWebKey, format: 'jwk' });
                const presentation = await new SDJwtVcInstance({
                    hasher, kbSignAlg: 'ES256',
                    kbSigner: (data: string) => Buffer.from(Crypto.sign('sha256', Buffer.from(data), { key, dsaEncoding: 'ieee-p1363' })).toString('base64url')
                }).present(pid.credentials[0]!, { given_name: true, family_name: true }, { kb: { payload: { aud: `origin:${ORIGIN}`, nonce: payload.nonce as string, iat: Math.floor(Date.now() / 1000) } } });
                return { pid: [presentation] };
            });
            expect(sdJwt.status).to.equal('completed');
            expect(sdJwt.credentials[0].values[0]).to.include({ given_name: 'Erika', family_name: 'Mustermann' });
            const mdoc = await submit(async (payload) => {
                const jkt = new Uint8Array(Buffer.from(await Jose.calculateJwkThumbprint((payload.client_metadata as any).jwks.keys[0], 'sha256'), 'base64url'));
                const transcript = dcApiTranscript(ORIGIN, payload.nonce as string, jkt);
                return { mdl: [Buffer.from(await deviceResponse(mdl.credentials[0]!, mdl.holderKeys[0]!, DOCTYPE, [[NS, 'given_name'], [NS, 'family_name']], transcript)).toString('base64url')] };
            });
            expect(mdoc.status).to.equal('completed');
            expect(mdoc.outcome.credentials[0].trust.matchedIssuer).to.equal('Hallmark Demo Issuer');
        });
    });
}
