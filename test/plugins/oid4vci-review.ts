import Crypto from 'node:crypto';
import Fs from 'node:fs';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { party, type Party } from '../helpers/pki';
import { startTestServer, type TestServer } from '../helpers/server';

/**
 * Defects found in review of the authorization code flow and wallet attestation (issue #13), each with the test
 * that showed it. Requests are made by hand, attestations and PoPs signed here with node:crypto.
 */

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const DEMO = Path.join(__dirname, '..', '..', 'examples', 'config', 'demo');
const demoFile = (...parts: string[]): Record<string, any> => {
    for (const root of [DEMO, Path.join(__dirname, '..', '..', '..', 'examples', 'config', 'demo')]) {
        const file = Path.join(root, ...parts);
        if (Fs.existsSync(file)) {
            return (JSON.parse(Fs.readFileSync(file, 'utf8')) as { spec: Record<string, unknown> }).spec;
        }
    }
    throw new Error(`No demo file ${parts.join('/')}`);
};
const PID = demoFile('issuance', 'credentials', 'pid.json');
const ISSUER_KEY_CHAIN = demoFile('key-chains', 'issuer.json');
const PUBLIC_URL = 'http://hallmark.test';
const CLIENT_ID = 'https://wallet.example/client';
const REDIRECT_URI = 'https://wallet.example/callback';

const b64url = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
const seconds = () => Math.floor(Date.now() / 1000);
const signRaw = (header: Record<string, unknown>, payload: unknown, key: Crypto.KeyObject): string => {
    const input = `${b64url(header)}.${b64url(payload)}`;
    return `${input}.${Crypto.sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`;
};

interface Res {
    statusCode: number;
    result: unknown;
    payload: string;
    headers: Record<string, unknown>;
}

const expectOAuthError = (res: Res, error: string) => {
    expect(res.statusCode, res.payload).to.equal(400);
    expect((res.result as { error: string }).error, res.payload).to.equal(error);
};

for (const dialect of DIALECTS) {
    describe(`OID4VCI authorization code flow and wallet attestation, review (${dialect})`, () => {
        let t: TestServer;
        const admins: Record<string, string> = {};
        let providerRoot: Party;
        let providerSigner: Party;

        const api = async (token: string, method: string, url: string, payload?: object) => {
            const res = await t.server.inject({ method, url, headers: bearer(token), ...(payload ? { payload } : {}) });
            return { status: res.statusCode, body: res.result as any, payload: res.payload };
        };

        before(async () => {
            t = await startTestServer(dialect, { env: { PUBLIC_URL } });
            const root = await rootToken(t.server);
            providerRoot = await party('Wallet Provider Root', null, { ca: true });
            providerSigner = await party('Wallet Attestation Signer', providerRoot);
            for (const [tenant, config] of [['optional', { refreshTokenEnabled: true }], ['required', { refreshTokenEnabled: true, walletAttestationRequired: true }]] as const) {
                await createTenant(t.server, root, tenant);
                admins[tenant] = (await clientWithToken(t.server, root, { clientId: `${tenant}-admin`, roles: ['tenant:admin'], tenantId: tenant })).token;
                expect((await api(admins[tenant]!, 'POST', '/api/key-chain', ISSUER_KEY_CHAIN)).status).to.equal(201);
                expect((await api(admins[tenant]!, 'POST', '/api/issuer/credentials', JSON.parse(JSON.stringify(PID)))).status).to.equal(201);
                const trust = await api(admins[tenant]!, 'POST', '/api/trust-lists', { id: 'wallets', entities: [{ name: 'Wallet provider', serviceType: 'wallet-provider', certificates: [providerRoot.cert.toString('pem')] }] });
                expect(trust.status, trust.payload).to.equal(201);
                const res = await api(admins[tenant]!, 'PUT', '/api/issuer/config', config);
                expect(res.status, res.payload).to.equal(200);
            }
        });

        after(() => t?.stop());

        /** A wallet instance: its key, and the attestation its provider signed for it (sub = CLIENT_ID). */
        const instance = () => {
            const { privateKey, publicKey } = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
            const attestation = signRaw(
                { alg: 'ES256', typ: 'oauth-client-attestation+jwt', x5c: [Buffer.from(providerSigner.cert.rawData).toString('base64')] },
                { iss: 'https://wallet-provider.example', sub: CLIENT_ID, iat: seconds() - 10, exp: seconds() + 3600, cnf: { jwk: publicKey.export({ format: 'jwk' }) } },
                providerSigner.privateKey
            );
            /** The attestation headers of one request to `tenant` (a fresh PoP each time). */
            return (tenant: string) => ({
                'oauth-client-attestation': attestation,
                'oauth-client-attestation-pop': signRaw({ alg: 'ES256', typ: 'oauth-client-attestation-pop+jwt' }, { aud: `${PUBLIC_URL}/issuers/${tenant}`, iat: seconds(), jti: Crypto.randomUUID() }, privateKey)
            });
        };

        const form = (url: string, body: Record<string, string>, headers: Record<string, string> = {}) =>
            t.server.inject({ method: 'POST', url, payload: new URLSearchParams(body).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers } }) as Promise<Res>;

        /** PAR and authorization by the attested instance `headers`: the token request that redeems the code. */
        const authorized = async (tenant: string, headers: (tenant: string) => Record<string, string>) => {
            const offer = await api(admins[tenant]!, 'POST', '/api/issuer/offer', { flow: 'authorization_code', credentialConfigurationIds: ['pid'], credentialClaims: { pid: { type: 'inline', claims: { given_name: 'Erika', family_name: 'Mustermann' } } }, byReference: false });
            expect(offer.status, offer.payload).to.equal(201);
            const object = JSON.parse(new URL((offer.body.uri as string).replace('openid-credential-offer://', 'https://wallet.invalid/')).searchParams.get('credential_offer')!);
            const verifier = Crypto.randomBytes(32).toString('base64url');
            const pushed = await form(`/issuers/${tenant}/authorize/par`, {
                response_type: 'code', client_id: CLIENT_ID, redirect_uri: REDIRECT_URI, code_challenge: Crypto.createHash('sha256').update(verifier).digest('base64url'),
                code_challenge_method: 'S256', scope: 'pid', issuer_state: object.grants.authorization_code.issuer_state
            }, headers(tenant));
            expect(pushed.statusCode, pushed.payload).to.equal(201);
            const redirect = await t.server.inject({ method: 'GET', url: `/issuers/${tenant}/authorize?${new URLSearchParams({ client_id: CLIENT_ID, request_uri: (pushed.result as { request_uri: string }).request_uri })}` });
            expect(redirect.statusCode, redirect.payload).to.equal(302);
            const code = new URL(redirect.headers.location as string).searchParams.get('code')!;
            return { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: REDIRECT_URI, client_id: CLIENT_ID };
        };

        /** A refresh token issued to the attested instance `headers`. */
        const refreshTokenOf = async (tenant: string, headers: (tenant: string) => Record<string, string>) => {
            const res = await form(`/issuers/${tenant}/authorize/token`, await authorized(tenant, headers), headers(tenant));
            expect(res.statusCode, res.payload).to.equal(200);
            return (res.result as { refresh_token: string }).refresh_token;
        };
        const refresh = (tenant: string, refreshToken: string, headers: Record<string, string> = {}) =>
            form(`/issuers/${tenant}/authorize/token`, { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: CLIENT_ID }, headers);

        it('redeems a code pushed by an attested wallet only with an attestation of the same instance, never as a public client', async () => {
            const wallet = instance();
            const redeem = await authorized('optional', wallet);
            // Same client_id, PKCE verifier and redirect URI, but no attestation: the client would be downgraded to public.
            expectOAuthError(await form('/issuers/optional/authorize/token', redeem), 'invalid_grant');
            expectOAuthError(await form('/issuers/optional/authorize/token', redeem, instance()('optional')), 'invalid_grant');
            const res = await form('/issuers/optional/authorize/token', redeem, wallet('optional'));
            expect(res.statusCode, res.payload).to.equal(200);
        });

        it('binds a refresh token issued to an attested wallet to its instance: no refresh without its attestation', async () => {
            const wallet = instance();
            const refreshToken = await refreshTokenOf('optional', wallet);
            // The issuer does not require attestation, but this family was issued to an attested instance.
            expectOAuthError(await refresh('optional', refreshToken), 'invalid_grant');
            // The family is untouched: its instance still refreshes.
            const res = await refresh('optional', refreshToken, wallet('optional'));
            expect(res.statusCode, res.payload).to.equal(200);
        });

        it('binds a refresh token to the wallet instance\'s key, not just to the client_id every instance of the wallet shares', async () => {
            const wallet = instance();
            const refreshToken = await refreshTokenOf('required', wallet);
            // Another instance of the same wallet (same provider, same sub) with a key of its own.
            expectOAuthError(await refresh('required', refreshToken, instance()('required')), 'invalid_grant');
            const res = await refresh('required', refreshToken, wallet('required'));
            expect(res.statusCode, res.payload).to.equal(200);
        });
    });
}
