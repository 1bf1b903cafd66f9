import Crypto from 'node:crypto';
import Http from 'node:http';
import type Hapi from '@hapi/hapi';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { clientAuthenticationClientAttestationJwt, createClientAttestationJwt, setGlobalConfig, type Jwk, type JwtSigner } from '@openid4vc/oauth2';
import * as Jose from 'jose';
import { OAuthError } from '../../lib/errors';
import { TrustAnchors } from '../../plugins/oid4vp/services/trust-anchors';
import { ClientAttestationVerifier, clientAttestationMetadata, hasClientAttestation, type ClientAttestationInput } from '../../plugins/oid4vci/services/client-attestation';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { DEMO_ROOT_PEM, party, type Party } from '../helpers/pki';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

// The test server's issuer identifiers are http URLs: the wallet library accepts them only when told so.
setGlobalConfig({ allowInsecureUrls: true });

const ISSUER = 'http://hallmark.test/issuers/acme';
const OTHER_ISSUER = 'http://hallmark.test/issuers/other';
const CLIENT_ID = 'https://wallet.example/client';

const b64 = (p: Party) => Buffer.from(p.cert.rawData).toString('base64');
const pem = (p: Party) => p.cert.toString('pem');
const seconds = () => Math.floor(Date.now() / 1000);
const b64url = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');

interface InstanceKey {
    privateKey: Crypto.KeyObject;
    publicJwk: Jose.JWK;
}

const instanceKey = async (): Promise<InstanceKey> => {
    const { privateKey, publicKey } = await Jose.generateKeyPair('ES256', { extractable: true });
    return { privateKey: Crypto.createPrivateKey({ key: await Jose.exportJWK(privateKey) as Crypto.JsonWebKey, format: 'jwk' }), publicJwk: await Jose.exportJWK(publicKey) };
};

/** A JWS over any header and payload (also ones jose's JWT builder would refuse), signed with ES256. */
const signRaw = (header: Record<string, unknown>, payload: unknown, key: Crypto.KeyObject): string => {
    const input = `${b64url(header)}.${b64url(payload)}`;
    const signature = Crypto.sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' });
    return `${input}.${signature.toString('base64url')}`;
};

/**
 * A wallet-facing route that authenticates its client by attestation, as PAR and token will: it shows what the
 * verifier's answers look like on the wire (the protocol error shape, the challenge header).
 */
const probe: Hapi.Plugin<void> = {
    name: 'client-attestation-probe',
    dependencies: ['hallmark-oid4vci'],
    register(server) {
        server.route({
            method: 'POST',
            path: '/probe/{tenant}/client-auth',
            options: { auth: false, app: { protocol: true }, description: 'Test probe' },
            handler: (request) => server.plugins['hallmark-oid4vci'].clientAttestation.authenticate({
                tenantId: request.params.tenant as string,
                headers: request.headers,
                issuer: `http://hallmark.test/issuers/${request.params.tenant as string}`
            })
        });
    }
};

/** A POST over a real socket, so a header can be sent twice. */
const post = (port: number, path: string, headers: Record<string, string | string[]>) => new Promise<{ status: number; body: any; headers: Http.IncomingHttpHeaders }>((resolve, reject) => {
    const req = Http.request({ host: '127.0.0.1', port, path, method: 'POST', headers }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk)).on('end', () => resolve({ status: res.statusCode!, body: body ? JSON.parse(body) : undefined, headers: res.headers }));
    });
    req.on('error', reject).end();
});

for (const dialect of DIALECTS) {
    describe(`OID4VCI wallet attestation, attestation-based client authentication (${dialect})`, () => {
        let t: TestServer;
        let verifier: ClientAttestationVerifier;
        let walletRoot: Party;
        let walletIntermediate: Party;
        let walletSigner: Party;
        let pidRoot: Party;
        let pidSigner: Party;
        let otherRoot: Party;
        let otherSigner: Party;
        let selfSigned: Party;
        let wallet: InstanceKey;

        /** A client attestation as a wallet provider makes it; `claims` and `header` override or (undefined) drop members. */
        const attestation = (options: { claims?: Record<string, unknown>; header?: Record<string, unknown>; signer?: Party; x5c?: Party[]; key?: InstanceKey } = {}) => {
            const signer = options.signer ?? walletSigner;
            const header = { alg: 'ES256', typ: 'oauth-client-attestation+jwt', x5c: (options.x5c ?? [walletSigner, walletIntermediate]).map(b64), ...options.header };
            const claims = { iss: 'https://wallet-provider.example', sub: CLIENT_ID, iat: seconds() - 10, exp: seconds() + 3600, cnf: { jwk: (options.key ?? wallet).publicJwk }, ...options.claims };
            return signRaw(dropUndefined(header), dropUndefined(claims), signer.privateKey);
        };

        /** A PoP of the instance key (or `key`). */
        const pop = (options: { claims?: Record<string, unknown>; header?: Record<string, unknown>; key?: InstanceKey } = {}) => {
            const header = { alg: 'ES256', typ: 'oauth-client-attestation-pop+jwt', ...options.header };
            const claims = { iss: CLIENT_ID, aud: ISSUER, iat: seconds(), exp: seconds() + 60, jti: Crypto.randomUUID(), ...options.claims };
            return signRaw(dropUndefined(header), dropUndefined(claims), (options.key ?? wallet).privateKey);
        };

        const input = (attestationJwt: unknown, popJwt: unknown, extra: Partial<ClientAttestationInput> = {}): ClientAttestationInput => ({
            tenantId: 'acme',
            issuer: ISSUER,
            headers: { 'oauth-client-attestation': attestationJwt as string, 'oauth-client-attestation-pop': popJwt as string },
            ...extra
        });

        const refused = async (promise: Promise<unknown>, description: RegExp, error = 'invalid_client'): Promise<OAuthError> => {
            const err = await expect(promise).to.reject(OAuthError);
            expect(err.oauthError, err.message).to.equal(error);
            expect(err.status).to.equal(400);
            expect(err.message).to.match(description);
            return err as OAuthError;
        };

        const challenge = async (tenant = 'acme'): Promise<string> => {
            const res = await t.server.inject({ method: 'POST', url: `/issuers/${tenant}/authorize/challenge` });
            expect(res.statusCode, res.payload).to.equal(200);
            return (res.result as { attestation_challenge: string }).attestation_challenge;
        };

        const popRows = async (tenantId: string) => (await t.server.db.knex('single_use_values').where({ tenantId }).where('key', 'like', 'client-attestation-pop:%')).length;

        before(async () => {
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-oid4vci', 'hallmark-oid4vp', 'hallmark-kms-db', 'hallmark-tenancy', { plugin: probe }), listen: true });
            verifier = t.server.plugins['hallmark-oid4vci'].clientAttestation;
            walletRoot = await party('Wallet Provider Root', null, { ca: true });
            walletIntermediate = await party('Wallet Provider Intermediate', walletRoot, { ca: true });
            walletSigner = await party('Wallet Attestation Signer', walletIntermediate);
            pidRoot = await party('PID Issuer Root', null, { ca: true });
            pidSigner = await party('PID Issuer Signer', pidRoot);
            otherRoot = await party('Other Wallet Provider Root', null, { ca: true });
            otherSigner = await party('Other Wallet Attestation Signer', otherRoot);
            selfSigned = await party('Self-signed Wallet Provider', null);
            wallet = await instanceKey();

            const root = await rootToken(t.server);
            for (const [tenant, entities] of [
                ['acme', [
                    { name: 'Wallet provider', serviceType: 'wallet-provider', certificates: [pem(walletRoot)] },
                    // A self-signed leaf listed as a wallet provider still may not sign attestations (HAIP).
                    { name: 'Self-signed wallet provider', serviceType: 'wallet-provider', certificates: [pem(selfSigned)] },
                    { name: 'PID issuer', serviceType: 'pid-issuance', certificates: [pem(pidRoot)] }
                ]],
                ['other', [{ name: 'Other wallet provider', serviceType: 'wallet-provider', certificates: [pem(otherRoot)] }]]
            ] as const) {
                await createTenant(t.server, root, tenant);
                const admin = (await clientWithToken(t.server, root, { clientId: `${tenant}-admin`, roles: ['tenant:admin'], tenantId: tenant })).token;
                const res = await t.server.inject({ method: 'POST', url: '/api/trust-lists', headers: bearer(admin), payload: { id: 'wallets', entities } });
                expect(res.statusCode, res.payload).to.equal(201);
            }
        });
        after(() => t.stop());

        it('authenticates a wallet: the client_id is the attestation sub, the key its cnf.jwk, and the PoP jti is kept', async () => {
            const before = await popRows('acme');
            const result = await verifier.authenticate(input(attestation(), pop(), { clientId: CLIENT_ID }));
            expect(result.clientId).to.equal(CLIENT_ID);
            expect(result.cnfJwk).to.equal(wallet.publicJwk);
            expect(result.cnfJkt).to.equal(await Jose.calculateJwkThumbprint(wallet.publicJwk));
            expect(await popRows('acme')).to.equal(before + 1);
            // Without a client_id in the request, the attestation names it.
            expect((await verifier.authenticate(input(attestation(), pop()))).clientId).to.equal(CLIENT_ID);
        });

        it('accepts an attestation and PoP made by @openid4vc/oauth2 the way a wallet makes them', async () => {
            const signJwt = async (signer: JwtSigner, jwt: { header: Record<string, unknown>; payload: Record<string, unknown> }) => {
                const key = signer.method === 'x5c' ? walletSigner.privateKey : wallet.privateKey;
                if (signer.method === 'jwk') {
                    expect(signer.publicJwk).to.equal(wallet.publicJwk as Jwk);
                }
                return { jwt: await new Jose.SignJWT(jwt.payload).setProtectedHeader(jwt.header as Jose.JWTHeaderParameters).sign(key), signerJwk: wallet.publicJwk as Jwk };
            };
            const clientAttestationJwt = await createClientAttestationJwt({
                issuer: 'https://wallet-provider.example',
                clientId: CLIENT_ID,
                expiresAt: new Date(Date.now() + 3600_000),
                confirmation: { jwk: wallet.publicJwk as Jwk },
                signer: { method: 'x5c', alg: 'ES256', x5c: [b64(walletSigner), b64(walletIntermediate)] },
                callbacks: { signJwt }
            });
            const headers = new Headers();
            await clientAuthenticationClientAttestationJwt({ clientAttestationJwt, callbacks: { signJwt, generateRandom: (n) => new Uint8Array(Crypto.randomBytes(n)) } })({
                authorizationServerMetadata: { issuer: ISSUER, token_endpoint: `${ISSUER}/authorize/token` },
                url: `${ISSUER}/authorize/token`,
                method: 'POST',
                headers,
                contentType: 'application/x-www-form-urlencoded' as never,
                body: {}
            });
            const requestHeaders = Object.fromEntries(headers.entries());
            expect(Object.keys(requestHeaders).sort()).to.equal(['oauth-client-attestation', 'oauth-client-attestation-pop']);
            const result = await verifier.authenticate({ tenantId: 'acme', issuer: ISSUER, headers: requestHeaders, clientId: CLIENT_ID });
            expect(result.clientId).to.equal(CLIENT_ID);
            expect(result.cnfJkt).to.equal(await Jose.calculateJwkThumbprint(wallet.publicJwk));
        });

        describe('on the wire', () => {
            it('answers a protocol error: 400 invalid_client, or use_attestation_challenge with a fresh challenge header', async () => {
                const port = t.server.info.port as number;
                const ok = await post(port, '/probe/acme/client-auth', { 'OAuth-Client-Attestation': attestation(), 'OAuth-Client-Attestation-PoP': pop() });
                expect(ok.status, JSON.stringify(ok.body)).to.equal(200);
                expect(ok.body.clientId).to.equal(CLIENT_ID);

                const missing = await post(port, '/probe/acme/client-auth', { 'OAuth-Client-Attestation-PoP': pop() });
                expect(missing.status).to.equal(400);
                expect(missing.body).to.equal({ error: 'invalid_client', error_description: 'The OAuth-Client-Attestation header is required' });

                // Sent twice, a header arrives joined: not one attestation.
                const twice = await post(port, '/probe/acme/client-auth', { 'OAuth-Client-Attestation': [attestation(), attestation()], 'OAuth-Client-Attestation-PoP': pop() });
                expect(twice.status).to.equal(400);
                expect(twice.body).to.equal({ error: 'invalid_client', error_description: 'Exactly one OAuth-Client-Attestation header is allowed' });
                const twicePop = await post(port, '/probe/acme/client-auth', { 'OAuth-Client-Attestation': attestation(), 'OAuth-Client-Attestation-PoP': [pop(), pop()] });
                expect(twicePop.body.error_description).to.equal('Exactly one OAuth-Client-Attestation-PoP header is allowed');

                const stale = await post(port, '/probe/acme/client-auth', { 'OAuth-Client-Attestation': attestation(), 'OAuth-Client-Attestation-PoP': pop({ claims: { challenge: Crypto.randomBytes(24).toString('base64url') } }) });
                expect(stale.status).to.equal(400);
                expect(stale.body.error).to.equal('use_attestation_challenge');
                const fresh = stale.headers['oauth-client-attestation-challenge'] as string;
                expect(fresh).to.match(/^[A-Za-z0-9_-]{32}$/);
                const retried = await post(port, '/probe/acme/client-auth', { 'OAuth-Client-Attestation': attestation(), 'OAuth-Client-Attestation-PoP': pop({ claims: { challenge: fresh } }) });
                expect(retried.status, JSON.stringify(retried.body)).to.equal(200);
            });
        });

        describe('the attestation', () => {
            it('is refused when expired (HAIP negative: exp in the past)', async () => {
                await refused(verifier.authenticate(input(attestation({ claims: { exp: seconds() - 120 } }), pop())), /has expired/);
                await refused(verifier.authenticate(input(attestation({ claims: { exp: undefined } }), pop())), /has no exp/);
                await refused(verifier.authenticate(input(attestation({ claims: { exp: '2099-01-01' } }), pop())), /has no exp/);
            });

            it('is refused without sub (HAIP negative: missing sub), and when sub is not the request\'s client_id', async () => {
                await refused(verifier.authenticate(input(attestation({ claims: { sub: undefined } }), pop())), /has no sub/);
                await refused(verifier.authenticate(input(attestation({ claims: { sub: '' } }), pop())), /has no sub/);
                await refused(verifier.authenticate(input(attestation({ claims: { sub: 42 } }), pop())), /has no sub/);
                await refused(verifier.authenticate(input(attestation(), pop(), { clientId: 'another-client' })), /client_id of the request is not the wallet attestation's sub/);
            });

            it('is refused with an iat in the future or an nbf not reached yet', async () => {
                await refused(verifier.authenticate(input(attestation({ claims: { iat: seconds() + 3600 } }), pop())), /iat is not a time in the past/);
                await refused(verifier.authenticate(input(attestation({ claims: { iat: 'yesterday' } }), pop())), /iat is not a time in the past/);
                await refused(verifier.authenticate(input(attestation({ claims: { nbf: seconds() + 3600 } }), pop())), /not valid yet/);
                await refused(verifier.authenticate(input(attestation({ claims: { nbf: null } }), pop())), /not valid yet/);
                // Within the clock skew both are fine, and so is an attestation without iat (older drafts).
                expect((await verifier.authenticate(input(attestation({ claims: { iat: seconds() + 10, nbf: seconds() + 10 } }), pop()))).clientId).to.equal(CLIENT_ID);
                expect((await verifier.authenticate(input(attestation({ claims: { iat: undefined } }), pop()))).clientId).to.equal(CLIENT_ID);
            });

            it('is refused with a sub that cannot be a client_id', async () => {
                await refused(verifier.authenticate(input(attestation({ claims: { sub: 'x'.repeat(256) } }), pop({ claims: { iss: undefined } }))), /sub is not a usable client_id/);
                await refused(verifier.authenticate(input(attestation({ claims: { sub: 'wallet\u0000' } }), pop({ claims: { iss: undefined } }))), /sub is not a usable client_id/);
            });

            it('is refused without a public cnf.jwk', async () => {
                await refused(verifier.authenticate(input(attestation({ claims: { cnf: undefined } }), pop())), /has no cnf\.jwk/);
                await refused(verifier.authenticate(input(attestation({ claims: { cnf: null } }), pop())), /has no cnf\.jwk/);
                await refused(verifier.authenticate(input(attestation({ claims: { cnf: { jkt: 'abc' } } }), pop())), /has no cnf\.jwk/);
                await refused(verifier.authenticate(input(attestation({ claims: { cnf: { jwk: [wallet.publicJwk] } } }), pop())), /has no cnf\.jwk/);
                await refused(verifier.authenticate(input(attestation({ claims: { cnf: { jwk: { crv: 'P-256' } } } }), pop())), /has no cnf\.jwk/);
                const { privateKey } = await Jose.generateKeyPair('ES256', { extractable: true });
                await refused(verifier.authenticate(input(attestation({ claims: { cnf: { jwk: await Jose.exportJWK(privateKey) } } }), pop())), /must be a public key/);
                await refused(verifier.authenticate(input(attestation({ claims: { cnf: { jwk: { kty: 'oct', k: 'c2VjcmV0' } } } }), pop())), /must be a public key/);
                await refused(verifier.authenticate(input(attestation({ claims: { cnf: { jwk: { kty: 'EC', crv: 'P-256', x: 'AAAA', y: 'AAAA' } } } }), pop())), /not a usable public key/);
            });

            it('is refused with another typ, alg none, a MAC or a signature by another key than its x5c leaf', async () => {
                await refused(verifier.authenticate(input(attestation({ header: { typ: 'JWT' } }), pop())), /typ must be oauth-client-attestation\+jwt/);
                await refused(verifier.authenticate(input(attestation({ header: { typ: undefined } }), pop())), /typ must be/);
                const unsigned = `${b64url({ alg: 'none', typ: 'oauth-client-attestation+jwt', x5c: [b64(walletSigner), b64(walletIntermediate)] })}.${b64url({ sub: CLIENT_ID, exp: seconds() + 60, cnf: { jwk: wallet.publicJwk } })}`;
                await refused(verifier.authenticate(input(`${unsigned}.`, pop())), /not a compact JWT/);
                await refused(verifier.authenticate(input(`${unsigned}.AAAA`, pop())), /alg must be one of ES256/);
                await refused(verifier.authenticate(input(attestation({ header: { alg: 'HS256' } }), pop())), /alg must be one of ES256/);
                // Signed by the intermediate's key while x5c names the leaf.
                await refused(verifier.authenticate(input(attestation({ signer: walletIntermediate }), pop())), /signature does not verify with its x5c leaf certificate/);
                // ES384 named, but the leaf key is P-256.
                await refused(verifier.authenticate(input(attestation({ header: { alg: 'ES384' } }), pop())), /cannot be verified with its x5c leaf certificate/);
                // A critical header parameter nobody here understands.
                await refused(verifier.authenticate(input(attestation(), pop({ header: { crit: ['x-unknown'], 'x-unknown': true } }))), /PoP cannot be verified with the attestation's cnf key: .*x-unknown/);
            });

            it('is refused when its x5c chains to a pid-issuance anchor only', async () => {
                await refused(verifier.authenticate(input(attestation({ signer: pidSigner, x5c: [pidSigner] }), pop())), /chains to a trust list entry that is not a wallet provider/);
            });

            it('is refused when its x5c includes the trust anchor, and accepted without it', async () => {
                await refused(verifier.authenticate(input(attestation({ x5c: [walletSigner, walletIntermediate, walletRoot] }), pop())), /x5c is not acceptable: the x5c includes its trust anchor/);
                expect((await verifier.authenticate(input(attestation({ x5c: [walletSigner, walletIntermediate] }), pop()))).clientId).to.equal(CLIENT_ID);
            });

            it('is refused when its leaf is self-signed, even when that certificate is a wallet-provider entry', async () => {
                await refused(verifier.authenticate(input(attestation({ signer: selfSigned, x5c: [selfSigned] }), pop())), /the x5c leaf is self-signed/);
            });

            it('is refused without x5c, with a broken or untrusted chain', async () => {
                await refused(verifier.authenticate(input(attestation({ header: { x5c: undefined } }), pop())), /has no x5c certificate chain/);
                await refused(verifier.authenticate(input(attestation({ header: { x5c: 'MIIB' } }), pop())), /has no x5c certificate chain/);
                await refused(verifier.authenticate(input(attestation({ header: { x5c: [42] } }), pop())), /x5c is not acceptable: x5c\[0\] is not base64/);
                await refused(verifier.authenticate(input(attestation({ header: { x5c: [Buffer.from('not a certificate').toString('base64')] } }), pop())), /is not an X\.509 certificate/);
                // The leaf alone: it is not issued by an anchor.
                await refused(verifier.authenticate(input(attestation({ x5c: [walletSigner] }), pop())), /does not chain to a wallet provider this issuer trusts/);
                await refused(verifier.authenticate(input(attestation({ x5c: [walletSigner, otherRoot] }), pop())), /does not chain to a wallet provider/);
            });

            it('counts only the tenant\'s own trust lists', async () => {
                const fromOther = attestation({ signer: otherSigner, x5c: [otherSigner] });
                await refused(verifier.authenticate(input(fromOther, pop())), /does not chain to a wallet provider this issuer trusts/);
                // The same attestation is good where its wallet provider is listed.
                expect((await verifier.authenticate({ tenantId: 'other', issuer: OTHER_ISSUER, headers: { 'oauth-client-attestation': fromOther, 'oauth-client-attestation-pop': pop({ claims: { aud: OTHER_ISSUER } }) } })).clientId).to.equal(CLIENT_ID);
                // And acme's wallet provider does not count at the other tenant.
                await refused(verifier.authenticate({ tenantId: 'other', issuer: OTHER_ISSUER, headers: { 'oauth-client-attestation': attestation(), 'oauth-client-attestation-pop': pop({ claims: { aud: OTHER_ISSUER } }) } }), /does not chain to a wallet provider/);
            });
        });

        describe('the PoP', () => {
            it('is refused with another aud than this issuer (HAIP negative: PoP with wrong aud)', async () => {
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { aud: OTHER_ISSUER } }))), /aud must be this issuer/);
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { aud: undefined } }))), /aud must be this issuer/);
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { aud: [ISSUER, OTHER_ISSUER] } }))), /aud must be this issuer/);
                expect((await verifier.authenticate(input(attestation(), pop({ claims: { aud: [ISSUER] } })))).clientId).to.equal(CLIENT_ID);
            });

            it('is refused when signed by another key than the attestation\'s cnf key (HAIP negative)', async () => {
                const other = await instanceKey();
                await refused(verifier.authenticate(input(attestation(), pop({ key: other }))), /PoP signature does not verify with the attestation's cnf key/);
                // A jwk in the PoP header changes nothing: only cnf.jwk counts.
                await refused(verifier.authenticate(input(attestation(), pop({ key: other, header: { jwk: other.publicJwk } }))), /does not verify with the attestation's cnf key/);
                // The attestation of the other key with that key's PoP is fine.
                expect((await verifier.authenticate(input(attestation({ key: other }), pop({ key: other })))).cnfJwk).to.equal(other.publicJwk);
            });

            it('is refused with another typ, an iss that is not the client_id, or bad times', async () => {
                await refused(verifier.authenticate(input(attestation(), pop({ header: { typ: 'dpop+jwt' } }))), /typ must be oauth-client-attestation-pop\+jwt/);
                await refused(verifier.authenticate(input(attestation(), pop({ header: { typ: undefined } }))), /typ must be oauth-client-attestation-pop\+jwt/);
                await refused(verifier.authenticate(input(attestation(), pop({ header: { alg: 'none' } }))), /alg must be one of/);
                await refused(verifier.authenticate(input(attestation(), pop({ header: { alg: undefined } }))), /alg must be one of/);
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { exp: 'soon' } }))), /PoP has expired/);
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { nbf: 'now' } }))), /not valid yet/);
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { iss: 'someone-else' } }))), /iss is not the attestation's sub/);
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { iat: undefined } }))), /has no iat/);
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { iat: seconds() + 600 } }))), /iat is in the future/);
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { iat: seconds() - 3600, exp: seconds() + 60 } }))), /too old/);
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { exp: seconds() - 120 } }))), /PoP has expired/);
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { nbf: seconds() + 600 } }))), /not valid yet/);
                expect((await verifier.authenticate(input(attestation(), pop({ claims: { nbf: seconds() } })))).clientId).to.equal(CLIENT_ID);
                // Newer drafts dropped iss and exp from the PoP: without them it is fine.
                expect((await verifier.authenticate(input(attestation(), pop({ claims: { iss: undefined, exp: undefined } })))).clientId).to.equal(CLIENT_ID);
            });

            it('is refused without a usable jti', async () => {
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { jti: undefined } }))), /has no jti/);
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { jti: 7 } }))), /has no jti/);
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { jti: '' } }))), /has no jti/);
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { jti: 'x'.repeat(161) } }))), /jti must be at most 160 characters/);
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { jti: 'a\u0000b' } }))), /without control characters/);
            });

            it('is single use (HAIP negative: replayed PoP), per instance key', async () => {
                const jwt = attestation();
                const proof = pop();
                await verifier.authenticate(input(jwt, proof));
                await refused(verifier.authenticate(input(jwt, proof)), /already been used/);
                // A new PoP with the same jti is a replay too.
                const jti = Crypto.randomUUID();
                await verifier.authenticate(input(jwt, pop({ claims: { jti } })));
                await refused(verifier.authenticate(input(jwt, pop({ claims: { jti } }))), /already been used/);
                // Another instance key may use the same jti: its ids are its own.
                const other = await instanceKey();
                await verifier.authenticate(input(attestation({ key: other }), pop({ key: other, claims: { jti } })));
            });

            it('accepts exactly one of 20 concurrent uses of one PoP', async () => {
                const jwt = attestation();
                const proof = pop();
                const results = await Promise.allSettled(Array.from({ length: 20 }, () => verifier.authenticate(input(jwt, proof))));
                expect(results.filter((r) => r.status === 'fulfilled')).to.have.length(1);
                for (const r of results.filter((x): x is PromiseRejectedResult => x.status === 'rejected')) {
                    expect(r.reason).to.be.an.instanceof(OAuthError);
                    expect(r.reason.oauthError).to.equal('invalid_client');
                    expect(r.reason.message).to.match(/already been used/);
                }
            });
        });

        describe('garbage headers', () => {
            it('answer invalid_client, never an exception of another kind', async () => {
                const good = attestation();
                const cases: Array<[unknown, unknown, RegExp]> = [
                    [undefined, pop(), /OAuth-Client-Attestation header is required/],
                    [good, undefined, /OAuth-Client-Attestation-PoP header is required/],
                    ['', '', /header is required/],
                    ['garbage', pop(), /not a compact JWT/],
                    [good, 'garbage', /not a compact JWT/],
                    [`${good}\u0000`, pop(), /not a compact JWT/],
                    [good, `${pop()}\u0000`, /not a compact JWT/],
                    ['a.b.c', pop(), /header is not a JSON object/],
                    [`${b64url([1])}.${b64url({})}.AAAA`, pop(), /header is not a JSON object/],
                    [good, `${b64url('null')}.e30.AAAA`, /header is not a JSON object/],
                    ['x'.repeat(40_000), pop(), /too large/],
                    [good, `${pop()}${'A'.repeat(5000)}`, /too large/],
                    [[good, good], pop(), /Exactly one OAuth-Client-Attestation header/],
                    [`${good}, ${good}`, pop(), /Exactly one OAuth-Client-Attestation header/],
                    [good, [pop()], /Exactly one OAuth-Client-Attestation-PoP header/],
                    [42, pop(), /Exactly one/],
                    [signRaw({ alg: 'ES256', typ: 'oauth-client-attestation+jwt', x5c: [b64(walletSigner), b64(walletIntermediate)] }, 'not json', walletSigner.privateKey), pop(), /payload is not JSON/],
                    [good, signRaw({ alg: 'ES256', typ: 'oauth-client-attestation-pop+jwt' }, [1, 2], wallet.privateKey), /payload is not a JSON object/]
                ];
                for (const [attestationJwt, popJwt, description] of cases) {
                    await refused(verifier.authenticate(input(attestationJwt, popJwt)), description);
                }
                // A PoP whose payload is not UTF-8.
                const rawPayload = `${b64url({ alg: 'ES256', typ: 'oauth-client-attestation-pop+jwt' })}.${Buffer.from([0xff, 0xfe]).toString('base64url')}`;
                const badUtf8 = `${rawPayload}.${Crypto.sign('sha256', Buffer.from(rawPayload), { key: wallet.privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`;
                await refused(verifier.authenticate(input(good, badUtf8)), /payload is not JSON/);
            });
        });

        describe('challenges', () => {
            it('come from POST /issuers/{tenant}/authorize/challenge, uncacheable, with a DPoP nonce', async () => {
                const res = await t.server.inject({ method: 'POST', url: '/issuers/acme/authorize/challenge', payload: 'anything', headers: { 'content-type': 'text/plain' } });
                expect(res.statusCode, res.payload).to.equal(200);
                expect(Object.keys(res.result as object)).to.equal(['attestation_challenge']);
                expect((res.result as any).attestation_challenge).to.match(/^[A-Za-z0-9_-]{32}$/);
                expect(res.headers['cache-control']).to.equal('no-store');
                expect(res.headers['dpop-nonce']).to.be.a.string();
                expect((await t.server.inject({ method: 'POST', url: '/issuers/nobody/authorize/challenge' })).statusCode).to.equal(404);
                expect((await t.server.inject({ method: 'POST', url: '/issuers/NOT%20A%20TENANT/authorize/challenge' })).statusCode).to.equal(400);
                expect((await t.server.inject({ method: 'GET', url: '/issuers/acme/authorize/challenge' })).statusCode).to.equal(404);
                const rows = await t.server.db.knex('single_use_values').where({ tenantId: 'acme', key: `client-attestation-challenge:${(res.result as any).attestation_challenge}` });
                expect(rows).to.have.length(1);
                expect(rows[0].usedAt).to.not.exist();
            });

            it('are single use: a reused, unknown, malformed or other tenant\'s challenge asks for a fresh one', async () => {
                const value = await challenge();
                expect((await verifier.authenticate(input(attestation(), pop({ claims: { challenge: value } })))).clientId).to.equal(CLIENT_ID);
                const [row] = await t.server.db.knex('single_use_values').where({ tenantId: 'acme', key: `client-attestation-challenge:${value}` });
                expect(row.usedAt).to.exist();
                const reused = await refused(verifier.authenticate(input(attestation(), pop({ claims: { challenge: value } }))), /challenge is unknown, expired or already used/, 'use_attestation_challenge');
                const fresh = reused.headers!['OAuth-Client-Attestation-Challenge']!;
                expect(fresh).to.match(/^[A-Za-z0-9_-]{32}$/);
                expect(fresh).to.not.equal(value);
                // The challenge of the error works once.
                await verifier.authenticate(input(attestation(), pop({ claims: { challenge: fresh } })));
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { challenge: Crypto.randomBytes(24).toString('base64url') } }))), /unknown, expired or already used/, 'use_attestation_challenge');
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { challenge: 'not-ours' } }))), /not issued by this issuer/, 'use_attestation_challenge');
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { challenge: 42 } }))), /not issued by this issuer/, 'use_attestation_challenge');
                await refused(verifier.authenticate(input(attestation(), pop({ claims: { challenge: await challenge('other') } }))), /unknown, expired or already used/, 'use_attestation_challenge');
            });

            it('accept exactly one of 20 concurrent PoPs with one challenge', async () => {
                const value = await challenge();
                const jwt = attestation();
                const results = await Promise.allSettled(Array.from({ length: 20 }, () => verifier.authenticate(input(jwt, pop({ claims: { challenge: value } })))));
                expect(results.filter((r) => r.status === 'fulfilled')).to.have.length(1);
                for (const r of results.filter((x): x is PromiseRejectedResult => x.status === 'rejected')) {
                    expect(r.reason.oauthError).to.equal('use_attestation_challenge');
                }
            });

            it('expire', async () => {
                const shortLived = new ClientAttestationVerifier({ trust: new TrustAnchors({ registry: t.server.registry }), singleUse: t.server.singleUse, challengeTtlSeconds: 0 });
                const value = await shortLived.challenge('acme');
                await refused(shortLived.authenticate(input(attestation(), pop({ claims: { challenge: value } }))), /unknown, expired or already used/, 'use_attestation_challenge');
            });

            it('are required in every PoP when the verifier says so', async () => {
                const strict = new ClientAttestationVerifier({ trust: new TrustAnchors({ registry: t.server.registry }), singleUse: t.server.singleUse, requireChallenge: true });
                const err = await refused(strict.authenticate(input(attestation(), pop())), /must carry a challenge/, 'use_attestation_challenge');
                const fresh = err.headers!['OAuth-Client-Attestation-Challenge']!;
                expect((await strict.authenticate(input(attestation(), pop({ claims: { challenge: fresh } })))).clientId).to.equal(CLIENT_ID);
            });
        });

        it('describes itself for the authorization server metadata, with a challenge endpoint that answers', async () => {
            const metadata = clientAttestationMetadata(ISSUER);
            expect(metadata).to.equal({
                token_endpoint_auth_methods_supported: ['attest_jwt_client_auth'],
                client_attestation_signing_alg_values_supported: ['ES256', 'ES384', 'ES512'],
                client_attestation_pop_signing_alg_values_supported: ['ES256', 'ES384', 'ES512'],
                challenge_endpoint: `${ISSUER}/authorize/challenge`
            });
            const res = await t.server.inject({ method: 'POST', url: metadata.challenge_endpoint.replace('http://hallmark.test', '') });
            expect(res.statusCode).to.equal(200);
        });

        it('tells callers whether a request carries attestation headers at all', () => {
            expect(hasClientAttestation({})).to.be.false();
            expect(hasClientAttestation({ authorization: 'Bearer x' })).to.be.false();
            expect(hasClientAttestation({ 'oauth-client-attestation': 'x' })).to.be.true();
            expect(hasClientAttestation({ 'oauth-client-attestation-pop': 'x' })).to.be.true();
        });

        it('lets a trust list read that fails (a database fault) through as it is: not the wallet\'s doing', async () => {
            const fault = new Error('database unreachable');
            const broken = new ClientAttestationVerifier({ trust: { forQuery: () => Promise.reject(fault) }, singleUse: t.server.singleUse });
            expect(await expect(broken.authenticate(input(attestation(), pop()))).to.reject()).to.shallow.equal(fault);
        });

        it('rejects bad construction options', () => {
            const deps = { trust: new TrustAnchors({ registry: t.server.registry }), singleUse: t.server.singleUse };
            expect(() => new ClientAttestationVerifier({ ...deps, skewSeconds: -1 })).to.throw(/skewSeconds/);
            expect(() => new ClientAttestationVerifier({ ...deps, popMaxAgeSeconds: Number.NaN })).to.throw(/popMaxAgeSeconds/);
        });

        // Last: it deletes the tenant's trust list (lab runs a describe's own tests before its nested ones).
        describe('trust list changes', () => {
            it('stops trusting a wallet provider once its trust list is gone', async () => {
                const root = await rootToken(t.server);
                const admin = (await clientWithToken(t.server, root, { clientId: 'acme-remover', roles: ['tenant:admin'], tenantId: 'acme' })).token;
                await verifier.authenticate(input(attestation(), pop()));
                const res = await t.server.inject({ method: 'DELETE', url: '/api/trust-lists/wallets', headers: bearer(admin) });
                expect(res.statusCode, res.payload).to.be.within(200, 204);
                await refused(verifier.authenticate(input(attestation(), pop())), /does not chain to a wallet provider this issuer trusts/);
            });

            it('fails closed while a remote trust list of the tenant cannot be loaded, for attestations no other list trusts', async () => {
                const root = await rootToken(t.server);
                const admin = (await clientWithToken(t.server, root, { clientId: 'other-remote', roles: ['tenant:admin'], tenantId: 'other' })).token;
                const fromOther = attestation({ signer: otherSigner, x5c: [otherSigner] });
                const headers = () => ({ 'oauth-client-attestation': fromOther, 'oauth-client-attestation-pop': pop({ claims: { aud: OTHER_ISSUER } }) });
                await verifier.authenticate({ tenantId: 'other', issuer: OTHER_ISSUER, headers: headers() });
                const res = await t.server.inject({ method: 'POST', url: '/api/trust-lists', headers: bearer(admin), payload: { id: 'remote', url: 'https://tl.example.eu/tsl.xml', signerCertificates: [DEMO_ROOT_PEM] } });
                expect(res.statusCode, res.payload).to.equal(201);
                // Trusted by the tenant's inline list: the list that cannot be loaded changes nothing (docs/trust.md).
                await verifier.authenticate({ tenantId: 'other', issuer: OTHER_ISSUER, headers: headers() });
                // Trusted by no list that loaded: it may depend on the missing one.
                const unknownProvider = { 'oauth-client-attestation': attestation(), 'oauth-client-attestation-pop': pop({ claims: { aud: OTHER_ISSUER } }) };
                await refused(verifier.authenticate({ tenantId: 'other', issuer: OTHER_ISSUER, headers: unknownProvider }), /trust lists of this issuer cannot be loaded/);
            });
        });
    });
}

const dropUndefined = (value: Record<string, unknown>): Record<string, unknown> =>
    Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined));
