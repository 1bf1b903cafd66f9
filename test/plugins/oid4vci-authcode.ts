import Crypto from 'node:crypto';
import Fs from 'node:fs';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { clientAuthenticationClientAttestationJwt, clientAuthenticationNone, createClientAttestationJwt, Oauth2Client, type Jwk, type JwtSigner } from '@openid4vc/oauth2';
import type { CredentialOfferObject, IssuerMetadataResult } from '@openid4vc/openid4vci';
import * as Jose from 'jose';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { freePort } from '../helpers/net';
import { party, type Party } from '../helpers/pki';
import { startTestServer, type TestServer } from '../helpers/server';
import { newHolderKey, sameKey, verifyMdoc, verifySdJwtVc, Wallet, type HolderKey } from '../helpers/wallet';

/**
 * The authorization code flow of the built-in authorization server under HAIP: authorization code offers, PAR,
 * PKCE S256, the authorization redirect with iss, the authorization code and refresh token grants, DPoP with server
 * nonces. First end to end with @openid4vc/openid4vci + @openid4vc/oauth2 as the wallet (over real HTTP), then the
 * negative cases by hand, each request exactly what the case needs, and the single-use values under 20 concurrent
 * attempts. Credentials are verified independently of the service's code.
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
const MDL = demoFile('issuance', 'credentials', 'mdl.json');
const ISSUER_KEY_CHAIN = demoFile('key-chains', 'issuer.json');
const MDL_NS = 'org.iso.18013.5.1';
const MDL_DOCTYPE = 'org.iso.18013.5.1.mDL';
const pidClaims = { given_name: 'Erika', family_name: 'Mustermann', birthdate: '1964-08-12', address: { locality: 'Berlin', country: 'DE' }, nationalities: ['DE'] };
const mdlClaims = { [MDL_NS]: { family_name: 'Mustermann', given_name: 'Erika', birth_date: '1964-08-12', age_over_18: true } };
const claimsFor = (id: string) => ({ [id]: { type: 'inline', claims: id === 'mdl' ? mdlClaims : pidClaims } });

const CLIENT_ID = 'wallet-client-1';
const REDIRECT_URI = 'https://wallet.example/callback';
const CONCURRENT = 20;

const b64urlSha256 = (value: string) => Crypto.createHash('sha256').update(value, 'ascii').digest('base64url');
const newVerifier = () => Crypto.randomBytes(32).toString('base64url');

interface Res {
    statusCode: number;
    result: unknown;
    payload: string;
    headers: Record<string, unknown>;
}

const expectOAuthError = (res: Res, statusCode: number, error: string) => {
    expect(res.statusCode, res.payload).to.equal(statusCode);
    expect((res.result as { error: string }).error, res.payload).to.equal(error);
};

for (const dialect of DIALECTS) {
    describe(`OID4VCI authorization code flow (${dialect})`, () => {
        let t: TestServer;
        let publicUrl: string;
        const admins: Record<string, string> = {};
        const issuerOf = (tenant: string) => `${publicUrl}/issuers/${tenant}`;
        let walletProviderRoot: Party;
        let walletAttestationSigner: Party;

        const api = async (token: string, method: string, url: string, payload?: object) => {
            const res = await t.server.inject({ method, url, headers: bearer(token), ...(payload ? { payload } : {}) });
            return { status: res.statusCode, body: res.result as any, payload: res.payload };
        };

        before(async () => {
            const port = await freePort();
            publicUrl = `http://127.0.0.1:${port}`;
            t = await startTestServer(dialect, { listen: true, env: { PORT: String(port), PUBLIC_URL: publicUrl } });
            const root = await rootToken(t.server);
            for (const tenant of ['acme', 'other', 'norefresh', 'attested']) {
                await createTenant(t.server, root, tenant);
                admins[tenant] = (await clientWithToken(t.server, root, { clientId: `${tenant}-admin`, roles: ['tenant:admin'], tenantId: tenant })).token;
                const chain = await api(admins[tenant]!, 'POST', '/api/key-chain', ISSUER_KEY_CHAIN);
                expect(chain.status, chain.payload).to.equal(201);
                for (const credential of [PID, MDL, { ...PID, id: 'pid-unscoped', config: { ...PID.config, scope: undefined } }]) {
                    const res = await api(admins[tenant]!, 'POST', '/api/issuer/credentials', JSON.parse(JSON.stringify(credential)));
                    expect(res.status, res.payload).to.equal(201);
                }
            }
            for (const tenant of ['acme', 'other']) {
                const config = await api(admins[tenant]!, 'PUT', '/api/issuer/config', { refreshTokenEnabled: true });
                expect(config.status, config.payload).to.equal(200);
            }
            // A HAIP issuer: wallets authenticate by a wallet attestation of a provider its trust list names.
            walletProviderRoot = await party('Wallet Provider Root', null, { ca: true });
            walletAttestationSigner = await party('Wallet Attestation Signer', walletProviderRoot);
            const trust = await api(admins.attested!, 'POST', '/api/trust-lists', { id: 'wallets', entities: [{ name: 'Wallet provider', serviceType: 'wallet-provider', certificates: [walletProviderRoot.cert.toString('pem')] }] });
            expect(trust.status, trust.payload).to.equal(201);
            const attested = await api(admins.attested!, 'PUT', '/api/issuer/config', { walletAttestationRequired: true, refreshTokenEnabled: true });
            expect(attested.status, attested.payload).to.equal(200);
        });

        after(async () => {
            await t?.stop();
        });

        // --- helpers -------------------------------------------------------------------------------------------------

        const offer = async (body: Record<string, unknown>, tenant = 'acme') => {
            const res = await api(admins[tenant]!, 'POST', '/api/issuer/offer', body);
            expect(res.status, res.payload).to.equal(201);
            return res.body as { session: string; uri: string };
        };
        const authCodeOffer = async (ids: string[] = ['pid'], tenant = 'acme') => {
            const created = await offer({ flow: 'authorization_code', credentialConfigurationIds: ids, credentialClaims: Object.assign({}, ...ids.map(claimsFor)), byReference: false }, tenant);
            const object = JSON.parse(new URL(created.uri.replace('openid-credential-offer://', 'https://wallet.invalid/')).searchParams.get('credential_offer')!);
            return { ...created, object, issuerState: object.grants.authorization_code.issuer_state as string };
        };

        const form = (url: string, body: Record<string, string>, headers: Record<string, string> = {}) =>
            t.server.inject({ method: 'POST', url, payload: new URLSearchParams(body).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers } }) as Promise<Res>;
        const par = (body: Record<string, string>, tenant = 'acme', headers: Record<string, string> = {}) => form(`/issuers/${tenant}/authorize/par`, body, headers);
        const token = (body: Record<string, string>, tenant = 'acme', headers: Record<string, string> = {}) => form(`/issuers/${tenant}/authorize/token`, body, headers);
        const authorize = (query: Record<string, string>, tenant = 'acme') =>
            t.server.inject({ method: 'GET', url: `/issuers/${tenant}/authorize?${new URLSearchParams(query).toString()}` }) as Promise<Res>;
        const redirectOf = (res: Res) => {
            expect(res.statusCode, res.payload).to.equal(302);
            return new URL(res.headers.location as string);
        };

        const parBody = (verifier: string, extra: Record<string, string> = {}): Record<string, string> => ({
            response_type: 'code', client_id: CLIENT_ID, redirect_uri: REDIRECT_URI, code_challenge: b64urlSha256(verifier), code_challenge_method: 'S256', scope: 'pid', state: 'wallet-state-1', ...extra
        });

        /** A DPoP nonce from the nonce endpoint's DPoP-Nonce header. */
        const dpopNonce = async (tenant = 'acme') => {
            const res = await t.server.inject({ method: 'POST', url: `/issuers/${tenant}/vci/nonce` });
            expect(res.statusCode).to.equal(200);
            return res.headers['dpop-nonce'] as string;
        };
        const dpopProof = (key: HolderKey, method: string, url: string, options: { accessToken?: string; nonce?: string } = {}) =>
            new Jose.SignJWT({ htm: method, htu: url, jti: Crypto.randomUUID(), ...(options.accessToken ? { ath: b64urlSha256(options.accessToken) } : {}), ...(options.nonce ? { nonce: options.nonce } : {}) })
                .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: key.publicJwk })
                .setIssuedAt()
                .sign(key.privateKey);
        const tokenDpop = async (key: HolderKey, tenant = 'acme') => ({ dpop: await dpopProof(key, 'POST', `${issuerOf(tenant)}/authorize/token`, { nonce: await dpopNonce(tenant) }) });

        /** An authorization code offer taken through PAR and authorization by hand: the code and what redeems it. */
        const authorized = async (options: { ids?: string[]; tenant?: string; par?: Record<string, string> } = {}) => {
            const tenant = options.tenant ?? 'acme';
            const created = await authCodeOffer(options.ids, tenant);
            const verifier = newVerifier();
            const pushed = await par(parBody(verifier, { issuer_state: created.issuerState, ...options.par }), tenant);
            expect(pushed.statusCode, pushed.payload).to.equal(201);
            const location = redirectOf(await authorize({ client_id: CLIENT_ID, request_uri: (pushed.result as { request_uri: string }).request_uri }, tenant));
            const code = location.searchParams.get('code');
            expect(code, location.toString()).to.be.a.string();
            return { ...created, verifier, code: code!, redeem: { grant_type: 'authorization_code', code: code!, code_verifier: verifier, redirect_uri: REDIRECT_URI, client_id: CLIENT_ID } };
        };

        /** Tokens for a DPoP key by hand: the access token and (refreshTokenEnabled) the refresh token. */
        const tokensFor = async (key: HolderKey, tenant = 'acme') => {
            const flow = await authorized({ tenant });
            const res = await token(flow.redeem, tenant, await tokenDpop(key, tenant));
            expect(res.statusCode, res.payload).to.equal(200);
            return { ...flow, tokens: res.result as { access_token: string; token_type: string; refresh_token?: string } };
        };
        const refresh = async (refreshToken: string, key: HolderKey | undefined, tenant = 'acme') =>
            token({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: CLIENT_ID }, tenant, key ? await tokenDpop(key, tenant) : {});

        const credentialRequest = async (key: HolderKey, accessToken: string, configurationId = 'pid', options: { nonce?: string | false; byIdentifier?: boolean; holder?: HolderKey } = {}) => {
            const url = `${issuerOf('acme')}/vci/credential`;
            const nonce = options.nonce === false ? undefined : options.nonce ?? await dpopNonce();
            const cNonce = ((await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/nonce' })).result as { c_nonce: string }).c_nonce;
            const holder = options.holder ?? await newHolderKey();
            const proof = await new Jose.SignJWT({ aud: issuerOf('acme'), nonce: cNonce })
                .setProtectedHeader({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: holder.publicJwk }).setIssuedAt().sign(holder.privateKey);
            return t.server.inject({
                method: 'POST',
                url: '/issuers/acme/vci/credential',
                headers: { authorization: `DPoP ${accessToken}`, dpop: await dpopProof(key, 'POST', url, { accessToken, ...(nonce ? { nonce } : {}) }) },
                payload: { ...(options.byIdentifier ? { credential_identifier: configurationId } : { credential_configuration_id: configurationId }), proofs: { jwt: [proof] } }
            }) as Promise<Res>;
        };

        // --- the wallet libraries end to end -------------------------------------------------------------------------

        /** The whole flow as a HAIP wallet does it: offer, metadata, PAR, authorization, token, nonce, credential. */
        const walletFlow = async (wallet: Wallet, configurationId: string, how: 'scope' | 'authorization_details', tenant = 'acme') => {
            const created = await authCodeOffer([configurationId], tenant);
            const credentialOffer: CredentialOfferObject = await wallet.client.resolveCredentialOffer(created.uri);
            const issuerMetadata: IssuerMetadataResult = await wallet.client.resolveIssuerMetadata(credentialOffer.credential_issuer);
            const dpopKey = await wallet.key();
            const authorization = await wallet.client.createAuthorizationRequestUrlFromOffer({
                clientId: CLIENT_ID,
                issuerMetadata,
                credentialOffer,
                redirectUri: REDIRECT_URI,
                ...(how === 'scope'
                    ? { scope: issuerMetadata.credentialIssuer.credential_configurations_supported[configurationId]!.scope! }
                    : { additionalRequestPayload: { authorization_details: [{ type: 'openid_credential', credential_configuration_id: configurationId }] } }),
                dpop: { signer: wallet.jwkSigner(dpopKey) }
            });
            const redirect = await fetch(authorization.authorizationRequestUrl, { redirect: 'manual' });
            expect(redirect.status).to.equal(302);
            const authorizationServerMetadata = issuerMetadata.authorizationServers[0]!;
            const response = wallet.client.parseAndVerifyAuthorizationResponseRedirectUrl({ url: redirect.headers.get('location')!, authorizationServerMetadata });
            if (!('code' in response)) {
                throw new Error(`authorization failed: ${JSON.stringify(response)}`);
            }
            const tokens = await wallet.client.retrieveAuthorizationCodeAccessTokenFromOffer({
                issuerMetadata, credentialOffer, authorizationCode: response.code as string, pkceCodeVerifier: authorization.pkce!.codeVerifier, redirectUri: REDIRECT_URI, dpop: authorization.dpop!
            });
            const { c_nonce: nonce } = await wallet.client.requestNonce({ issuerMetadata });
            const holder = await wallet.key();
            const jwts = await wallet.proofs(issuerMetadata, configurationId, nonce, [holder]);
            const { credentialResponse, dpop } = await wallet.client.retrieveCredentials({
                issuerMetadata, credentialConfigurationId: configurationId, accessToken: tokens.accessTokenResponse.access_token, proofs: { jwt: jwts }, dpop: tokens.dpop!
            });
            const credential = (credentialResponse.credentials![0] as { credential: string }).credential;
            return { created, response, tokens, credential, holder, dpopKey, issuerMetadata, authorizationServerMetadata, credentialDpop: dpop, authorization };
        };

        it('publishes the authorization server metadata HAIP asks for', async () => {
            const res = await fetch(`${publicUrl}/.well-known/oauth-authorization-server/issuers/acme`);
            const metadata = await res.json() as Record<string, unknown>;
            expect(metadata).to.include({
                issuer: issuerOf('acme'),
                authorization_endpoint: `${issuerOf('acme')}/authorize`,
                pushed_authorization_request_endpoint: `${issuerOf('acme')}/authorize/par`,
                require_pushed_authorization_requests: true,
                token_endpoint: `${issuerOf('acme')}/authorize/token`,
                authorization_response_iss_parameter_supported: true
            });
            expect(metadata.code_challenge_methods_supported).to.equal(['S256']);
            expect(metadata.response_types_supported).to.equal(['code']);
            expect(metadata.grant_types_supported).to.equal(['urn:ietf:params:oauth:grant-type:pre-authorized_code', 'authorization_code', 'refresh_token']);
            expect(metadata.dpop_signing_alg_values_supported).to.equal(['ES256']);
            // Wallet attestation is accepted beside public clients, with the challenge endpoint of the draft.
            expect(metadata.token_endpoint_auth_methods_supported).to.equal(['none', 'attest_jwt_client_auth']);
            expect(metadata.challenge_endpoint).to.equal(`${issuerOf('acme')}/authorize/challenge`);
            expect(metadata['pre-authorized_grant_anonymous_access_supported']).to.equal(true);
            expect((metadata.scopes_supported as string[]).sort()).to.equal(['mdl', 'pid']);
            // Without refreshTokenEnabled the refresh_token grant is not advertised.
            const plain = await (await fetch(`${publicUrl}/.well-known/oauth-authorization-server/issuers/norefresh`)).json() as Record<string, unknown>;
            expect(plain.grant_types_supported).to.equal(['urn:ietf:params:oauth:grant-type:pre-authorized_code', 'authorization_code']);
        });

        it('makes authorization code offers with issuer_state and an expiry, refusing configurations without scope and tx_code', async () => {
            const created = await offer({ flow: 'authorization_code', credentialConfigurationIds: ['pid', 'mdl'], offerLifetimeSeconds: 120 });
            const object = await (await fetch(new URL(created.uri.replace('openid-credential-offer://', 'https://wallet.invalid/')).searchParams.get('credential_offer_uri')!)).json() as any;
            expect(Object.keys(object.grants)).to.equal(['authorization_code']);
            expect(object.grants.authorization_code.issuer_state).to.match(/^[A-Za-z0-9_-]{43}$/);
            expect(object.credential_configuration_ids).to.equal(['pid', 'mdl']);
            const session = await api(admins.acme!, 'GET', `/api/session/${created.session}`);
            expect(Date.parse(session.body.expiresAt) - Date.parse(session.body.createdAt)).to.be.within(119_000, 121_000);

            const unscoped = await api(admins.acme!, 'POST', '/api/issuer/offer', { flow: 'authorization_code', credentialConfigurationIds: ['pid', 'pid-unscoped'] });
            expect(unscoped.status, unscoped.payload).to.equal(400);
            expect(unscoped.body.details).to.equal([{ path: 'credentialConfigurationIds', message: 'pid-unscoped needs config.scope to be offered with the authorization_code flow' }]);
            const txCode = await api(admins.acme!, 'POST', '/api/issuer/offer', { flow: 'authorization_code', credentialConfigurationIds: ['pid'], tx_code: true });
            expect(txCode.status, txCode.payload).to.equal(400);
            expect(txCode.body.details).to.equal([{ path: 'tx_code', message: 'is not allowed with flow authorization_code' }]);
            // The pre-authorized flow still takes an unscoped configuration.
            await offer({ credentialConfigurationIds: ['pid-unscoped'] });
        });

        it('issues dc+sd-jwt through PAR (scope), PKCE, DPoP with nonce retries, the code and the token, then refreshes', async () => {
            const wallet = new Wallet(clientAuthenticationNone({ clientId: CLIENT_ID }));
            const flow = await walletFlow(wallet, 'pid', 'scope');
            // PAR: the first proof had no nonce; the library retried with the one the 400 use_dpop_nonce carried.
            const pars = wallet.exchanges.filter((e) => e.url.endsWith('/authorize/par'));
            expect(pars.map((e) => e.status)).to.equal([400, 201]);
            expect(pars[0]!.responseHeaders['dpop-nonce']).to.match(/^[A-Za-z0-9_-]{32}$/);
            const parForm = new URLSearchParams(pars[1]!.requestBody);
            expect(parForm.get('code_challenge_method')).to.equal('S256');
            expect(parForm.get('issuer_state')).to.equal(flow.created.issuerState);
            expect(Jose.decodeJwt(pars[1]!.requestHeaders.dpop!).nonce).to.equal(pars[0]!.responseHeaders['dpop-nonce']);
            // The redirect carries iss (RFC 9207); the token is DPoP-bound to the key of the PAR.
            expect(flow.response).to.include({ iss: issuerOf('acme') });
            expect(flow.tokens.accessTokenResponse.token_type).to.equal('DPoP');
            expect(wallet.exchanges.filter((e) => e.url.endsWith('/authorize/token')).map((e) => e.status)).to.equal([200]);
            expect(wallet.exchanges.filter((e) => e.url.endsWith('/vci/credential')).map((e) => e.status)).to.equal([200]);
            expect(flow.tokens.accessTokenResponse.authorization_details).to.not.exist();

            const verified = await verifySdJwtVc(flow.credential);
            expect(verified.payload.iss).to.equal(issuerOf('acme'));
            expect(verified.payload).to.include({ given_name: 'Erika', family_name: 'Mustermann' });
            expect(sameKey((verified.payload.cnf as { jwk: Jose.JWK }).jwk, flow.holder.publicJwk)).to.be.true();

            // Refresh with the library: a new access token and a new refresh token, the same DPoP key.
            const oauth2 = new Oauth2Client({ callbacks: (wallet.client as unknown as { options: { callbacks: any } }).options.callbacks });
            const refreshed = await oauth2.retrieveRefreshTokenAccessToken({
                authorizationServerMetadata: flow.authorizationServerMetadata, refreshToken: flow.tokens.accessTokenResponse.refresh_token!, dpop: flow.tokens.dpop!
            });
            expect(refreshed.accessTokenResponse.token_type).to.equal('DPoP');
            expect(refreshed.accessTokenResponse.refresh_token).to.not.equal(flow.tokens.accessTokenResponse.refresh_token);
            expect(refreshed.accessTokenResponse.access_token).to.not.equal(flow.tokens.accessTokenResponse.access_token);
            // The refreshed token gets credentials; the replaced one no longer does.
            const again = await credentialRequest(flow.dpopKey, refreshed.accessTokenResponse.access_token);
            expect(again.statusCode, again.payload).to.equal(200);
            expectOAuthError(await credentialRequest(flow.dpopKey, flow.tokens.accessTokenResponse.access_token), 401, 'invalid_token');
        });

        it('issues mso_mdoc through PAR with authorization_details, answering credential identifiers', async () => {
            const wallet = new Wallet(clientAuthenticationNone({ clientId: CLIENT_ID }));
            const flow = await walletFlow(wallet, 'mdl', 'authorization_details');
            expect(flow.tokens.accessTokenResponse.authorization_details).to.equal([{ type: 'openid_credential', credential_configuration_id: 'mdl', credential_identifiers: ['mdl'] }]);
            const mdoc = await verifyMdoc(flow.credential, MDL_DOCTYPE);
            expect(mdoc.namespaces[MDL_NS]).to.include({ family_name: 'Mustermann', given_name: 'Erika' });
            expect(sameKey(mdoc.deviceJwk, flow.holder.publicJwk)).to.be.true();
            // The credential identifier of the token response works in place of the configuration id (by hand: this
            // version of the library sends configuration ids only).
            const holder = await newHolderKey();
            const byIdentifier = await credentialRequest(flow.dpopKey, flow.tokens.accessTokenResponse.access_token, 'mdl', { byIdentifier: true, holder });
            expect(byIdentifier.statusCode, byIdentifier.payload).to.equal(200);
            const credential = (byIdentifier.result as { credentials: Array<{ credential: string }> }).credentials[0]!.credential;
            expect(sameKey((await verifyMdoc(credential, MDL_DOCTYPE)).deviceJwk, holder.publicJwk)).to.be.true();
            // Both an identifier and a configuration id, or an identifier of a scope-authorized session: not mapped.
            const both = await t.server.inject({
                method: 'POST', url: '/issuers/acme/vci/credential',
                headers: { authorization: `DPoP ${flow.tokens.accessTokenResponse.access_token}`, dpop: await dpopProof(flow.dpopKey, 'POST', `${issuerOf('acme')}/vci/credential`, { accessToken: flow.tokens.accessTokenResponse.access_token, nonce: await dpopNonce() }) },
                payload: { credential_identifier: 'mdl', credential_configuration_id: 'mdl' }
            });
            expectOAuthError(both as Res, 400, 'unknown_credential_identifier');
            // An identifier that was not listed is not one.
            expectOAuthError(await credentialRequest(flow.dpopKey, flow.tokens.accessTokenResponse.access_token, 'pid', { byIdentifier: true }), 400, 'unknown_credential_identifier');
        });

        /** A wallet authenticating by a wallet attestation its provider signed for a fresh instance key, as @openid4vc/oauth2 sends it. */
        const attestedWallet = async (clientId = CLIENT_ID, signer: Party = walletAttestationSigner) => {
            const { privateKey, publicKey } = await Jose.generateKeyPair('ES256', { extractable: true });
            const instanceJwk = await Jose.exportJWK(publicKey) as Jwk;
            const signJwt = async (jwtSigner: JwtSigner, jwt: { header: Record<string, unknown>; payload: Record<string, unknown> }) => ({
                jwt: await new Jose.SignJWT(jwt.payload).setProtectedHeader(jwt.header as Jose.JWTHeaderParameters).sign(jwtSigner.method === 'x5c' ? signer.privateKey : privateKey),
                signerJwk: instanceJwk
            });
            const clientAttestationJwt = await createClientAttestationJwt({
                issuer: 'https://wallet-provider.example',
                clientId,
                expiresAt: new Date(Date.now() + 3600_000),
                confirmation: { jwk: instanceJwk },
                signer: { method: 'x5c', alg: 'ES256', x5c: [Buffer.from(signer.cert.rawData).toString('base64')] },
                callbacks: { signJwt }
            });
            return new Wallet(clientAuthenticationClientAttestationJwt({ clientAttestationJwt, callbacks: { signJwt, generateRandom: (n) => new Uint8Array(Crypto.randomBytes(n)) } }));
        };

        it('issues both formats to a wallet authenticated by its wallet attestation where the issuer requires one (HAIP)', async () => {
            const metadata = await (await fetch(`${publicUrl}/.well-known/oauth-authorization-server/issuers/attested`)).json() as Record<string, unknown>;
            expect(metadata.token_endpoint_auth_methods_supported).to.equal(['attest_jwt_client_auth']);
            expect(metadata['pre-authorized_grant_anonymous_access_supported']).to.equal(false);

            const sdJwtWallet = await attestedWallet();
            const sdJwt = await walletFlow(sdJwtWallet, 'pid', 'scope', 'attested');
            expect((await verifySdJwtVc(sdJwt.credential)).payload).to.include({ iss: issuerOf('attested'), family_name: 'Mustermann' });
            // PAR and token each carried the attestation and a PoP of their own.
            const authenticated = sdJwtWallet.exchanges.filter((e) => e.url.endsWith('/authorize/par') || e.url.endsWith('/authorize/token'));
            expect(authenticated.map((e) => e.status)).to.equal([400, 201, 200]);
            const pops = authenticated.map((e) => Jose.decodeJwt(e.requestHeaders['oauth-client-attestation-pop']!));
            expect(pops.every((pop) => pop.aud === issuerOf('attested'))).to.be.true();
            expect(new Set(pops.map((pop) => pop.jti)).size).to.equal(pops.length);

            const mdoc = await walletFlow(await attestedWallet(), 'mdl', 'authorization_details', 'attested');
            expect((await verifyMdoc(mdoc.credential, MDL_DOCTYPE)).namespaces[MDL_NS]).to.include({ family_name: 'Mustermann' });
        });

        it('refuses wallets without a valid attestation at PAR and at every grant of the token endpoint when it is required', async () => {
            const created = await authCodeOffer(['pid'], 'attested');
            const refusedPar = await par(parBody(newVerifier(), { issuer_state: created.issuerState }), 'attested');
            expectOAuthError(refusedPar, 400, 'invalid_client');
            expect((refusedPar.result as { error_description: string }).error_description).to.contain('wallet attestation');
            // The pre-authorized grant needs the attestation too; the code stays unspent.
            const preAuthorized = await offer({ credentialConfigurationIds: ['pid'], credentialClaims: claimsFor('pid'), byReference: false }, 'attested');
            const code = JSON.parse(new URL(preAuthorized.uri.replace('openid-credential-offer://', 'https://wallet.invalid/')).searchParams.get('credential_offer')!)
                .grants['urn:ietf:params:oauth:grant-type:pre-authorized_code']['pre-authorized_code'] as string;
            expectOAuthError(await token({ grant_type: 'urn:ietf:params:oauth:grant-type:pre-authorized_code', 'pre-authorized_code': code }, 'attested'), 400, 'invalid_client');
            const session = await api(admins.attested!, 'GET', `/api/session/${preAuthorized.session}`);
            expect(session.body.status).to.equal('active');
            expectOAuthError(await token({ grant_type: 'refresh_token', refresh_token: 'x.y', client_id: CLIENT_ID }, 'attested'), 400, 'invalid_client');

            // An attestation its provider did not sign under a trusted root fails, and never falls back to a public client.
            const untrustedRoot = await party('Unknown Wallet Provider Root', null, { ca: true });
            const untrusted = await attestedWallet(CLIENT_ID, await party('Unknown Wallet Attestation Signer', untrustedRoot));
            await expect(walletFlow(untrusted, 'pid', 'scope', 'attested')).to.reject();
            const pars = untrusted.exchanges.filter((e) => e.url.endsWith('/authorize/par'));
            expect(pars.at(-1)!.status).to.equal(400);
            expect(JSON.parse(pars.at(-1)!.responseBody).error).to.equal('invalid_client');
            // Where attestation is optional, a wallet that sends a bad one is refused as well.
            const optional = await attestedWallet();
            await expect(walletFlow(optional, 'pid', 'scope', 'acme')).to.reject();
            expect(JSON.parse(optional.exchanges.filter((e) => e.url.endsWith('/authorize/par')).at(-1)!.responseBody).error).to.equal('invalid_client');
        });

        it('retries a resource request whose proof lacks the nonce (401 use_dpop_nonce, then 200)', async () => {
            const wallet = new Wallet(clientAuthenticationNone({ clientId: CLIENT_ID }));
            const flow = await walletFlow(wallet, 'pid', 'scope');
            const before = wallet.exchanges.length;
            const { c_nonce: nonce } = await wallet.client.requestNonce({ issuerMetadata: flow.issuerMetadata });
            const [jwt] = await wallet.proofs(flow.issuerMetadata, 'pid', nonce, [await wallet.key()]);
            await wallet.client.retrieveCredentials({
                issuerMetadata: flow.issuerMetadata, credentialConfigurationId: 'pid', accessToken: flow.tokens.accessTokenResponse.access_token, proofs: { jwt: [jwt!] }, dpop: { signer: wallet.jwkSigner(flow.dpopKey) }
            });
            const attempts = wallet.exchanges.slice(before).filter((e) => e.url.endsWith('/vci/credential'));
            expect(attempts.map((e) => e.status)).to.equal([401, 200]);
            expect(attempts[0]!.responseHeaders['www-authenticate']).to.contain('error="use_dpop_nonce"');
        });

        // --- negative cases by hand ----------------------------------------------------------------------------------

        it('refuses authorization requests that were not pushed, and unknown or foreign request_uris', async () => {
            expectOAuthError(await authorize({ client_id: CLIENT_ID, response_type: 'code', redirect_uri: REDIRECT_URI }), 400, 'invalid_request');
            expectOAuthError(await authorize({ client_id: CLIENT_ID, request_uri: 'urn:ietf:params:oauth:request_uri:nothing' }), 400, 'invalid_request_uri');
            expectOAuthError(await authorize({ client_id: CLIENT_ID, request_uri: 'https://attacker.example/request' }), 400, 'invalid_request_uri');
            const twice = await t.server.inject({ method: 'GET', url: `/issuers/acme/authorize?client_id=${CLIENT_ID}&request_uri=a&request_uri=b` });
            expectOAuthError(twice as Res, 400, 'invalid_request_uri');
            expect((await authorize({ client_id: CLIENT_ID, request_uri: 'x' }, 'nobody')).statusCode).to.equal(404);
            const created = await authCodeOffer();
            const pushed = await par(parBody(newVerifier(), { issuer_state: created.issuerState }));
            const requestUri = (pushed.result as { request_uri: string }).request_uri;
            expect(requestUri).to.startWith('urn:ietf:params:oauth:request_uri:');
            expect(pushed.result).to.include({ expires_in: 60 });
            expect(pushed.headers['cache-control']).to.equal('no-store');
            // Another tenant's authorization endpoint does not know it; a tampered one is unknown.
            expectOAuthError(await authorize({ client_id: CLIENT_ID, request_uri: requestUri }, 'other'), 400, 'invalid_request_uri');
            const tampered = requestUri.slice(0, -4) + (requestUri.endsWith('AAAA') ? 'BBBB' : 'AAAA');
            expectOAuthError(await authorize({ client_id: CLIENT_ID, request_uri: tampered }), 400, 'invalid_request_uri');
            // Another client, or none, is answered without redirect; the request_uri is still good afterwards.
            expectOAuthError(await authorize({ client_id: 'someone-else', request_uri: requestUri }), 400, 'invalid_request');
            expectOAuthError(await authorize({ request_uri: requestUri }), 400, 'invalid_request');
            const location = redirectOf(await authorize({ client_id: CLIENT_ID, request_uri: requestUri }));
            expect(`${location.origin}${location.pathname}`).to.equal(REDIRECT_URI);
            expect(location.searchParams.get('state')).to.equal('wallet-state-1');
            expect(location.searchParams.get('iss')).to.equal(issuerOf('acme'));
            expect(location.searchParams.get('code')).to.match(/^[A-Za-z0-9_-]{43}$/);
            // Used once: the second use is redirected with invalid_request_uri and no code.
            const reused = redirectOf(await authorize({ client_id: CLIENT_ID, request_uri: requestUri }));
            expect(reused.searchParams.get('error')).to.equal('invalid_request_uri');
            expect(reused.searchParams.get('code')).to.be.null();
            expect(reused.searchParams.get('iss')).to.equal(issuerOf('acme'));
        });

        it('validates pushed requests: PKCE S256 only, redirect_uri forms, credentials, sizes', async () => {
            const verifier = newVerifier();
            const refusedWith = async (body: Record<string, string>, error: string, tenant = 'acme') => expectOAuthError(await par(body, tenant), 400, error);
            await refusedWith(parBody(verifier, { code_challenge_method: 'plain', code_challenge: verifier }), 'invalid_request');
            const { code_challenge_method: _method, ...withoutMethod } = parBody(verifier);
            await refusedWith(withoutMethod, 'invalid_request');
            const { code_challenge: _challenge, ...withoutChallenge } = parBody(verifier);
            await refusedWith(withoutChallenge, 'invalid_request');
            await refusedWith(parBody(verifier, { code_challenge: 'short' }), 'invalid_request');
            await refusedWith(parBody(verifier, { response_type: 'token' }), 'unsupported_response_type');
            const { client_id: _client, ...withoutClient } = parBody(verifier);
            await refusedWith(withoutClient, 'invalid_request');
            for (const redirectUri of ['http://wallet.example/cb', 'javascript:alert(1)', 'data:text/html,x', 'https://wallet.example/cb#frag', 'https://user:pw@wallet.example/cb', 'relative/path', `https://wallet.example/${'a'.repeat(2100)}`]) {
                await refusedWith(parBody(verifier, { redirect_uri: redirectUri }), 'invalid_request');
            }
            const { redirect_uri: _redirect, ...withoutRedirect } = parBody(verifier);
            await refusedWith(withoutRedirect, 'invalid_request');
            for (const redirectUri of ['http://127.0.0.1:8123/cb', 'eu.europa.ec.euidi://authorization', 'https://wallet.example/cb?session=1']) {
                const res = await par(parBody(verifier, { redirect_uri: redirectUri }));
                expect(res.statusCode, res.payload).to.equal(201);
            }
            await refusedWith(parBody(verifier, { scope: 'openid' }), 'invalid_scope');
            const { scope: _scope, ...withoutScope } = parBody(verifier);
            await refusedWith(withoutScope, 'invalid_request');
            for (const details of ['not json', '{}', '[]', JSON.stringify([{ type: 'other', credential_configuration_id: 'pid' }]), JSON.stringify([{ type: 'openid_credential', credential_configuration_id: 'nope' }]),
                JSON.stringify([{ type: 'openid_credential', credential_configuration_id: 'pid', locations: ['https://elsewhere.example'] }]), JSON.stringify(['pid'])]) {
                await refusedWith({ ...withoutScope, authorization_details: details }, 'invalid_authorization_details');
            }
            const many = JSON.stringify(Array.from({ length: 21 }, () => ({ type: 'openid_credential', credential_configuration_id: 'pid' })));
            for (const details of [many, '[null]', '[[]]', JSON.stringify([{ type: 'openid_credential', credential_configuration_id: 7 }]), JSON.stringify([{ type: 'openid_credential', credential_configuration_id: 'pid', locations: issuerOf('acme') }])]) {
                await refusedWith({ ...withoutScope, authorization_details: details }, 'invalid_authorization_details');
            }
            await refusedWith(parBody(verifier, { redirect_uri: 'https://wallet.example/a b' }), 'invalid_request');
            await refusedWith(parBody(verifier, { redirect_uri: 'https://:pw@wallet.example/cb' }), 'invalid_request');
            // A repeated parameter is no string.
            const repeated = await t.server.inject({ method: 'POST', url: '/issuers/acme/authorize/par', payload: `${new URLSearchParams(parBody(verifier)).toString()}&state=second`, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
            expectOAuthError(repeated as Res, 400, 'invalid_request');
            await refusedWith(parBody(verifier, { state: 'x'.repeat(1025) }), 'invalid_request');
            await refusedWith(parBody(verifier, { state: 'a\u0000b' }), 'invalid_request');
            await refusedWith(parBody(verifier, { request_uri: 'urn:ietf:params:oauth:request_uri:x' }), 'invalid_request');
            await refusedWith(parBody(verifier, { request: 'eyJ.eyJ.sig' }), 'invalid_request');
            await refusedWith(parBody(verifier, { dpop_jkt: 'not a thumbprint' }), 'invalid_request');
            await refusedWith(parBody(verifier, { resource: 'https://elsewhere.example' }), 'invalid_target');
            await refusedWith(parBody(verifier, { resource: issuerOf('other') }), 'invalid_target');
            expect((await par(parBody(verifier, { resource: issuerOf('acme') }))).statusCode).to.equal(201);
            // Unknown parameters are ignored; an unknown tenant is 404; JSON bodies are not a pushed request.
            expect((await par(parBody(verifier, { unknown_parameter: 'x' }))).statusCode).to.equal(201);
            expect((await par(parBody(verifier), 'nobody')).statusCode).to.equal(404);
            const json = await t.server.inject({ method: 'POST', url: '/issuers/acme/authorize/par', payload: parBody(verifier) });
            expectOAuthError(json as Res, 400, 'invalid_request');
            const empty = await t.server.inject({ method: 'POST', url: '/issuers/acme/authorize/par' });
            expectOAuthError(empty as Res, 400, 'invalid_request');
            const text = await t.server.inject({ method: 'POST', url: '/issuers/acme/authorize/par', payload: 'x', headers: { 'content-type': 'text/plain' } });
            expect(text.statusCode).to.equal(415);
        });

        it('redirects errors when the pushed request is known: no issuer_state, an unusable issuer_state, credentials outside the offer', async () => {
            const errorOf = async (extra: Record<string, string>, tenant = 'acme') => {
                const pushed = await par(parBody(newVerifier(), extra), tenant);
                expect(pushed.statusCode, pushed.payload).to.equal(201);
                const location = redirectOf(await authorize({ client_id: CLIENT_ID, request_uri: (pushed.result as { request_uri: string }).request_uri }, tenant));
                expect(location.searchParams.get('code')).to.be.null();
                expect(location.searchParams.get('state')).to.equal('wallet-state-1');
                expect(location.searchParams.get('iss')).to.equal(issuerOf(tenant));
                return { error: location.searchParams.get('error'), description: location.searchParams.get('error_description') };
            };
            const walletInitiated = await errorOf({});
            expect(walletInitiated.error).to.equal('invalid_request');
            expect(walletInitiated.description).to.contain('interactive authorization endpoint');
            expect((await errorOf({ issuer_state: 'unknown-state' })).error).to.equal('invalid_request');
            // Another tenant's issuer_state, a pre-authorized offer's code, an expired offer.
            const foreign = await authCodeOffer(['pid'], 'other');
            expect((await errorOf({ issuer_state: foreign.issuerState })).error).to.equal('invalid_request');
            const preAuthorized = await offer({ credentialConfigurationIds: ['pid'], byReference: false });
            const preCode = JSON.parse(new URL(preAuthorized.uri.replace('openid-credential-offer://', 'https://wallet.invalid/')).searchParams.get('credential_offer')!).grants['urn:ietf:params:oauth:grant-type:pre-authorized_code']['pre-authorized_code'];
            expect((await errorOf({ issuer_state: preCode })).error).to.equal('invalid_request');
            const expired = await authCodeOffer();
            await t.server.db.knex('sessions').where({ id: expired.session }).update({ expiresAt: new Date(Date.now() - 1000).toISOString() });
            expect((await errorOf({ issuer_state: expired.issuerState })).error).to.equal('invalid_request');
            const markedExpired = await authCodeOffer();
            await t.server.db.knex('sessions').where({ id: markedExpired.session }).update({ status: 'expired' });
            expect((await errorOf({ issuer_state: markedExpired.issuerState })).error).to.equal('invalid_request');
            const beyondRetention = await authCodeOffer();
            await t.server.db.knex('sessions').where({ id: beyondRetention.session }).update({ createdAt: new Date(Date.now() - 2 * 86_400_000).toISOString() });
            expect((await errorOf({ issuer_state: beyondRetention.issuerState })).error).to.equal('invalid_request');
            // Credentials the offer does not include.
            const pidOnly = await authCodeOffer(['pid']);
            expect((await errorOf({ issuer_state: pidOnly.issuerState, scope: 'mdl' })).error).to.equal('invalid_scope');
            const { scope: _scope, ...byDetails } = parBody(newVerifier());
            const details = await par({ ...byDetails, authorization_details: JSON.stringify([{ type: 'openid_credential', credential_configuration_id: 'mdl' }]), issuer_state: pidOnly.issuerState });
            const location = redirectOf(await authorize({ client_id: CLIENT_ID, request_uri: (details.result as { request_uri: string }).request_uri }));
            expect(location.searchParams.get('error')).to.equal('invalid_authorization_details');
            // An offer authorizes once: its issuer_state is spent by the first authorization.
            const once = await authorized();
            expect((await errorOf({ issuer_state: once.issuerState })).error).to.equal('invalid_request');
            // The issuer_state is no pre-authorized code.
            const fresh = await authCodeOffer();
            expectOAuthError(await token({ grant_type: 'urn:ietf:params:oauth:grant-type:pre-authorized_code', 'pre-authorized_code': fresh.issuerState }), 400, 'invalid_grant');
        });

        it('expires a request_uri after 60 s (its single-use row)', async () => {
            const created = await authCodeOffer();
            const pushed = await par(parBody(newVerifier(), { issuer_state: created.issuerState }));
            const row = () => t.server.db.knex('single_use_values').where({ tenantId: 'acme' }).where('key', 'like', 'par:%').whereNull('usedAt');
            const [pending] = await row().select('expiresAt');
            expect(Date.parse(new Date(pending.expiresAt).toISOString()) - Date.now()).to.be.within(55_000, 60_000);
            await row().update({ expiresAt: new Date(Date.now() - 1000).toISOString() });
            const location = redirectOf(await authorize({ client_id: CLIENT_ID, request_uri: (pushed.result as { request_uri: string }).request_uri }));
            expect(location.searchParams.get('error')).to.equal('invalid_request_uri');
        });

        it('redeems a code once, with the right verifier, client and redirect_uri, within 60 s', async () => {
            const flow = await authorized();
            expectOAuthError(await token({ ...flow.redeem, code_verifier: newVerifier() }), 400, 'invalid_grant');
            expectOAuthError(await token({ ...flow.redeem, code_verifier: 'short' }), 400, 'invalid_grant');
            expectOAuthError(await token({ ...flow.redeem, client_id: 'someone-else' }), 400, 'invalid_grant');
            expectOAuthError(await token({ ...flow.redeem, redirect_uri: 'https://wallet.example/other' }), 400, 'invalid_grant');
            expectOAuthError(await token({ ...flow.redeem, code: 'x'.repeat(43) }), 400, 'invalid_grant');
            const { code_verifier: _verifier, ...withoutVerifier } = flow.redeem;
            expectOAuthError(await token(withoutVerifier), 400, 'invalid_request');
            const { client_id: _client, ...withoutClient } = flow.redeem;
            expectOAuthError(await token(withoutClient), 400, 'invalid_request');
            const { code: _code, ...withoutCode } = flow.redeem;
            expectOAuthError(await token(withoutCode), 400, 'invalid_request');
            expectOAuthError(await token({ ...flow.redeem, client_id: 'c'.repeat(256) }), 400, 'invalid_request');
            expectOAuthError(await token({ ...flow.redeem, client_id: 'wallet\u0000' }), 400, 'invalid_request');
            expectOAuthError(await token({ ...flow.redeem, grant_type: 'password' }), 400, 'unsupported_grant_type');
            // Another tenant's token endpoint does not know the code.
            expectOAuthError(await token(flow.redeem, 'other'), 400, 'invalid_grant');
            // The failed attempts did not spend it: the right request gets a Bearer token (no DPoP used).
            const redeemed = await token(flow.redeem);
            expect(redeemed.statusCode, redeemed.payload).to.equal(200);
            expect(redeemed.result).to.include({ token_type: 'Bearer', expires_in: 300 });
            expect(redeemed.headers['cache-control']).to.equal('no-store');
            expectOAuthError(await token(flow.redeem), 400, 'invalid_grant');

            const late = await authorized();
            await t.server.sessions.mutateData<'issuance'>(late.session, (data) => ({ ...data, authorization: { ...data.authorization!, codeExpiresAt: new Date(Date.now() - 1).toISOString() } }));
            expectOAuthError(await token(late.redeem), 400, 'invalid_grant');
            const ended = await authorized();
            await t.server.db.knex('sessions').where({ id: ended.session }).update({ status: 'expired' });
            expectOAuthError(await token(ended.redeem), 400, 'invalid_grant');
            const within = await authorized();
            const row = await t.server.sessions.get(within.session);
            const expiresIn = Date.parse((row!.data as { authorization: { codeExpiresAt: string } }).authorization.codeExpiresAt) - Date.now();
            expect(expiresIn).to.be.within(55_000, 60_000);
        });

        it('binds the code to the DPoP key of the pushed request and requires server nonces', async () => {
            const key = await newHolderKey();
            const parUrl = `${issuerOf('acme')}/authorize/par`;
            const created = await authCodeOffer();
            const verifier = newVerifier();
            // Without a nonce: 400 use_dpop_nonce with a DPoP-Nonce header to retry with.
            const first = await par(parBody(verifier, { issuer_state: created.issuerState }), 'acme', { dpop: await dpopProof(key, 'POST', parUrl) });
            expectOAuthError(first, 400, 'use_dpop_nonce');
            const nonce = first.headers['dpop-nonce'] as string;
            expect(nonce).to.match(/^[A-Za-z0-9_-]{32}$/);
            const pushed = await par(parBody(verifier, { issuer_state: created.issuerState }), 'acme', { dpop: await dpopProof(key, 'POST', parUrl, { nonce }) });
            expect(pushed.statusCode, pushed.payload).to.equal(201);
            expect(pushed.headers['dpop-nonce']).to.match(/^[A-Za-z0-9_-]{32}$/);
            const code = redirectOf(await authorize({ client_id: CLIENT_ID, request_uri: (pushed.result as { request_uri: string }).request_uri })).searchParams.get('code')!;
            const redeem = { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: REDIRECT_URI, client_id: CLIENT_ID };
            const tokenUrl = `${issuerOf('acme')}/authorize/token`;
            // The token request: no nonce → use_dpop_nonce; a forged nonce too; no proof or another key → refused.
            const noNonce = await token(redeem, 'acme', { dpop: await dpopProof(key, 'POST', tokenUrl) });
            expectOAuthError(noNonce, 400, 'use_dpop_nonce');
            expect(noNonce.headers['dpop-nonce']).to.match(/^[A-Za-z0-9_-]{32}$/);
            expectOAuthError(await token(redeem, 'acme', { dpop: await dpopProof(key, 'POST', tokenUrl, { nonce: 'A'.repeat(32) }) }), 400, 'use_dpop_nonce');
            expectOAuthError(await token(redeem), 400, 'invalid_grant');
            expectOAuthError(await token(redeem, 'acme', await tokenDpop(await newHolderKey())), 400, 'invalid_grant');
            const res = await token(redeem, 'acme', await tokenDpop(key));
            expect(res.statusCode, res.payload).to.equal(200);
            expect(res.result).to.include({ token_type: 'DPoP' });
            const accessToken = (res.result as { access_token: string }).access_token;
            // The credential endpoint: a proof without nonce is answered 401 with a DPoP use_dpop_nonce challenge.
            const challenged = await credentialRequest(key, accessToken, 'pid', { nonce: false });
            expectOAuthError(challenged, 401, 'use_dpop_nonce');
            expect(challenged.headers['www-authenticate']).to.equal('DPoP error="use_dpop_nonce"');
            const retry = await credentialRequest(key, accessToken, 'pid', { nonce: challenged.headers['dpop-nonce'] as string });
            expect(retry.statusCode, retry.payload).to.equal(200);
            // Another configuration of the tenant than the authorized ones is refused.
            expectOAuthError(await credentialRequest(key, accessToken, 'mdl'), 400, 'unknown_credential_configuration');
            // dpop_jkt alone binds the code to that key as well.
            const boundByJkt = await authorized({ par: { dpop_jkt: key.thumbprint } });
            expectOAuthError(await token(boundByJkt.redeem, 'acme', await tokenDpop(await newHolderKey())), 400, 'invalid_grant');
            expect((await token(boundByJkt.redeem, 'acme', await tokenDpop(key))).statusCode).to.equal(200);
            // dpop_jkt of another key than the proof's is refused.
            const mismatch = await par(parBody(newVerifier(), { dpop_jkt: (await newHolderKey()).thumbprint }), 'acme', { dpop: await dpopProof(key, 'POST', parUrl, { nonce: await dpopNonce() }) });
            expectOAuthError(mismatch, 400, 'invalid_dpop_proof');
        });

        it('rotates refresh tokens: single use, same client and DPoP key, a replay revokes the family', async () => {
            const key = await newHolderKey();
            const { tokens } = await tokensFor(key);
            expect(tokens.refresh_token).to.be.a.string();
            // Another DPoP key, no proof, another client: refused, and the token stays usable.
            expectOAuthError(await refresh(tokens.refresh_token!, await newHolderKey()), 400, 'invalid_grant');
            expectOAuthError(await refresh(tokens.refresh_token!, undefined), 400, 'invalid_grant');
            expectOAuthError(await token({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token!, client_id: 'someone-else' }, 'acme', await tokenDpop(key)), 400, 'invalid_grant');
            expectOAuthError(await refresh(tokens.refresh_token!, key, 'other'), 400, 'invalid_grant');
            expectOAuthError(await refresh('not-a-refresh-token', key), 400, 'invalid_grant');
            expectOAuthError(await token({ grant_type: 'refresh_token', client_id: CLIENT_ID }, 'acme', await tokenDpop(key)), 400, 'invalid_request');
            const second = await refresh(tokens.refresh_token!, key);
            expect(second.statusCode, second.payload).to.equal(200);
            const next = second.result as { access_token: string; refresh_token: string; token_type: string };
            expect(next.token_type).to.equal('DPoP');
            expect((await credentialRequest(key, next.access_token)).statusCode).to.equal(200);
            // The first refresh token again: refused, and the whole family is revoked.
            expectOAuthError(await refresh(tokens.refresh_token!, key), 400, 'invalid_grant');
            expectOAuthError(await refresh(next.refresh_token, key), 400, 'invalid_grant');
            expectOAuthError(await credentialRequest(key, next.access_token), 401, 'invalid_token');
        });

        it('keeps a Bearer family Bearer and ends refreshing with the session', async () => {
            const flow = await authorized();
            const res = await token(flow.redeem);
            expect(res.statusCode, res.payload).to.equal(200);
            const bearerTokens = res.result as { refresh_token: string; token_type: string };
            expect(bearerTokens.token_type).to.equal('Bearer');
            expectOAuthError(await refresh(bearerTokens.refresh_token, await newHolderKey()), 400, 'invalid_grant');
            const next = await refresh(bearerTokens.refresh_token, undefined);
            expect(next.statusCode, next.payload).to.equal(200);
            expect(next.result).to.include({ token_type: 'Bearer' });
            await t.server.db.knex('sessions').where({ id: flow.session }).update({ status: 'completed' });
            expectOAuthError(await refresh((next.result as { refresh_token: string }).refresh_token, undefined), 400, 'invalid_grant');
        });

        it('issues no refresh token without refreshTokenEnabled and refuses the grant', async () => {
            const key = await newHolderKey();
            const { tokens } = await tokensFor(key, 'norefresh');
            expect(tokens.refresh_token).to.not.exist();
            expectOAuthError(await refresh(`${Crypto.randomUUID()}.${'a'.repeat(43)}`, key, 'norefresh'), 400, 'invalid_grant');
            // Switched off after issuance, the family's tokens are refused.
            const { tokens: acmeTokens } = await tokensFor(key);
            await api(admins.acme!, 'PUT', '/api/issuer/config', { refreshTokenEnabled: false });
            try {
                expectOAuthError(await refresh(acmeTokens.refresh_token!, key), 400, 'invalid_grant');
            }
            finally {
                await api(admins.acme!, 'PUT', '/api/issuer/config', { refreshTokenEnabled: true });
            }
            expect((await refresh(acmeTokens.refresh_token!, key)).statusCode).to.equal(200);
        });

        // --- single use under concurrency ----------------------------------------------------------------------------

        it(`lets exactly one of ${CONCURRENT} concurrent uses of a request_uri, a code and a refresh token win`, async () => {
            const created = await authCodeOffer();
            const verifier = newVerifier();
            const pushed = await par(parBody(verifier, { issuer_state: created.issuerState }));
            const requestUri = (pushed.result as { request_uri: string }).request_uri;
            const authorizations = await Promise.all(Array.from({ length: CONCURRENT }, () => authorize({ client_id: CLIENT_ID, request_uri: requestUri })));
            const codes = authorizations.map((res) => redirectOf(res).searchParams.get('code')).filter(Boolean);
            expect(codes.length).to.equal(1);

            // Twenty pushed requests for one issuer_state, authorized at once: one code per offer.
            const shared = await authCodeOffer();
            const pushes = await Promise.all(Array.from({ length: CONCURRENT }, () => par(parBody(newVerifier(), { issuer_state: shared.issuerState }))));
            const sharedAuthorizations = await Promise.all(pushes.map((p) => authorize({ client_id: CLIENT_ID, request_uri: (p.result as { request_uri: string }).request_uri })));
            const sharedCodes = sharedAuthorizations.map((res) => redirectOf(res).searchParams.get('code')).filter(Boolean);
            expect(sharedCodes.length).to.equal(1);

            const key = await newHolderKey();
            const redeem = { grant_type: 'authorization_code', code: codes[0]!, code_verifier: verifier, redirect_uri: REDIRECT_URI, client_id: CLIENT_ID };
            const nonce = await dpopNonce();
            const proofs = await Promise.all(Array.from({ length: CONCURRENT }, () => dpopProof(key, 'POST', `${issuerOf('acme')}/authorize/token`, { nonce })));
            const redemptions = await Promise.all(proofs.map((dpop) => token(redeem, 'acme', { dpop })));
            expect(redemptions.filter((r) => r.statusCode === 200).length).to.equal(1);
            redemptions.filter((r) => r.statusCode !== 200).forEach((r) => expectOAuthError(r, 400, 'invalid_grant'));

            const refreshToken = (redemptions.find((r) => r.statusCode === 200)!.result as { refresh_token: string }).refresh_token;
            const refreshProofs = await Promise.all(Array.from({ length: CONCURRENT }, () => dpopProof(key, 'POST', `${issuerOf('acme')}/authorize/token`, { nonce })));
            const refreshes = await Promise.all(refreshProofs.map((dpop) => token({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: CLIENT_ID }, 'acme', { dpop })));
            expect(refreshes.filter((r) => r.statusCode === 200).length).to.equal(1);
            refreshes.filter((r) => r.statusCode !== 200).forEach((r) => expectOAuthError(r, 400, 'invalid_grant'));
            // The losers presented a used token: the family, the winner's new refresh token included, is revoked.
            const winner = refreshes.find((r) => r.statusCode === 200)!.result as { refresh_token: string };
            expectOAuthError(await refresh(winner.refresh_token, key), 400, 'invalid_grant');
        });
    });
}
