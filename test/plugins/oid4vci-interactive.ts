import Crypto from 'node:crypto';
import Fs from 'node:fs';
import Http from 'node:http';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as Jose from 'jose';
import { bearer, clientWithToken, createTenant, jwtClaims, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { Holder, type HolderRequest } from '../helpers/holder';
import { freePort } from '../helpers/net';
import { party, type Party } from '../helpers/pki';
import { startTestServer, type TestServer } from '../helpers/server';
import { newHolderKey, verifyMdoc, verifySdJwtVc, Wallet, type Received } from '../helpers/wallet';

/**
 * The interactive authorization endpoint (spec 3.2, 4.5, 7.1): both step types end to end. The presentation step is
 * answered by the OpenID4VP test holder (on @openid4vc/openid4vp) with a PID the OpenID4VCI test wallet obtained in the
 * pre-authorized flow; the code is redeemed at the token endpoint and the credential's claims are checked with code
 * independent of the service. Then every error code of 7.1, expiry, another tenant, replays and 20 concurrent replies.
 */

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const CONFIG = Path.join(__dirname, '..', '..', 'examples', 'config');
const PID = (JSON.parse(Fs.readFileSync(Path.join(CONFIG, 'demo', 'issuance', 'credentials', 'pid.json'), 'utf8')) as { spec: Record<string, any> }).spec;
const MDL = (JSON.parse(Fs.readFileSync(Path.join(CONFIG, 'demo', 'issuance', 'credentials', 'mdl.json'), 'utf8')) as { spec: Record<string, any> }).spec;
const MDL_NS = 'org.iso.18013.5.1';
const MDL_DOCTYPE = 'org.iso.18013.5.1.mDL';
const ISSUER_KEY_CHAIN = (JSON.parse(Fs.readFileSync(Path.join(CONFIG, 'demo', 'key-chains', 'issuer.json'), 'utf8')) as { spec: Record<string, any> }).spec;
const CLIENT_ID = 'iae-wallet';
const CONCURRENT = 20;
const BOTH = 'openid4vp_presentation,redirect_to_web';

const newVerifier = () => Crypto.randomBytes(32).toString('base64url');
const challengeOf = (verifier: string) => Crypto.createHash('sha256').update(verifier, 'ascii').digest('base64url');
const details = (id: string) => JSON.stringify([{ type: 'openid_credential', credential_configuration_id: id }]);

interface Res {
    statusCode: number;
    result: any;
    payload: string;
    headers: Record<string, unknown>;
}

const expectError = (res: Res, error: string, statusCode = 400) => {
    expect(res.statusCode, res.payload).to.equal(statusCode);
    expect(res.result.error, res.payload).to.equal(error);
    expect(res.result.error_description, res.payload).to.be.a.string();
};

for (const dialect of DIALECTS) {
    describe(`OID4VCI interactive authorization endpoint (${dialect})`, () => {
        let t: TestServer;
        let publicUrl: string;
        let admin: string;
        let offerer: string;
        let otherOfferer: string;
        let otherAdmin: string;
        let attestedOfferer: string;
        let walletProviderRoot: Party;
        let walletAttestationSigner: Party;
        let verifierRole: string;
        let pid: Received;
        let mdl: Received;
        let provider: Http.Server;
        /** The bodies the attribute provider received. */
        const providerRequests: Array<Record<string, any>> = [];

        const api = async (token: string, method: string, url: string, payload?: object) => {
            const res = await t.server.inject({ method, url, headers: bearer(token), ...(payload ? { payload } : {}) });
            return { status: res.statusCode, body: res.result as any, payload: res.payload };
        };

        before(async () => {
            const port = await freePort();
            publicUrl = `http://127.0.0.1:${port}`;
            // An attribute provider that answers the credential's claims from the presented ones it is sent.
            provider = Http.createServer((req, res) => {
                let text = '';
                req.on('data', (chunk: Buffer) => {
                    text += chunk.toString('utf8');
                });
                req.on('end', () => {
                    const body = JSON.parse(text) as Record<string, any>;
                    providerRequests.push(body);
                    const values = body.presentations?.[0]?.credentials?.[0]?.values?.[0] ?? {};
                    res.setHeader('content-type', 'application/json');
                    res.end(JSON.stringify({ claims: { given_name: String(values.given_name).toUpperCase(), family_name: String(values.family_name).toUpperCase() } }));
                });
            });
            const providerPort = await freePort();
            await new Promise<void>((resolve) => provider.listen(providerPort, '127.0.0.1', resolve));
            t = await startTestServer(dialect, { listen: true, env: { PORT: String(port), PUBLIC_URL: publicUrl, CONFIG_FOLDER: CONFIG, OUTBOUND_URL_ALLOW_HTTP: 'true', OUTBOUND_URL_ALLOW_PRIVATE_NETWORK: 'true' } });
            const root = await rootToken(t.server);
            admin = (await clientWithToken(t.server, root, { clientId: 'iae-admin', roles: ['tenant:admin'], tenantId: 'demo' })).token;
            offerer = (await clientWithToken(t.server, root, { clientId: 'iae-offers', roles: ['issuance:offer'], tenantId: 'demo' })).token;
            verifierRole = (await clientWithToken(t.server, root, { clientId: 'iae-verifier', roles: ['presentation:request'], tenantId: 'demo' })).token;
            await createTenant(t.server, root, 'other');
            otherAdmin = (await clientWithToken(t.server, root, { clientId: 'other-admin', roles: ['tenant:admin'], tenantId: 'other' })).token;
            otherOfferer = (await clientWithToken(t.server, root, { clientId: 'other-offers', roles: ['issuance:offer'], tenantId: 'other' })).token;
            const chain = await api(otherAdmin, 'POST', '/api/key-chain', ISSUER_KEY_CHAIN);
            expect(chain.status, chain.payload).to.equal(201);
            const plain = await api(otherAdmin, 'POST', '/api/issuer/credentials', PID);
            expect(plain.status, plain.payload).to.equal(201);
            // A HAIP tenant: wallets must authenticate with a wallet attestation, at the interactive endpoint as at PAR.
            await createTenant(t.server, root, 'attested');
            const attestedAdmin = (await clientWithToken(t.server, root, { clientId: 'attested-admin', roles: ['tenant:admin'], tenantId: 'attested' })).token;
            expect((await api(attestedAdmin, 'POST', '/api/key-chain', ISSUER_KEY_CHAIN)).status).to.equal(201);
            expect((await api(attestedAdmin, 'POST', '/api/issuer/credentials', PID)).status).to.equal(201);
            expect((await api(attestedAdmin, 'PUT', '/api/issuer/config', { walletAttestationRequired: true })).status).to.equal(200);
            walletProviderRoot = await party('Wallet Provider Root', null, { ca: true });
            walletAttestationSigner = await party('Wallet Attestation Signer', walletProviderRoot);
            const trust = await api(attestedAdmin, 'POST', '/api/trust-lists', { id: 'wallets', entities: [{ name: 'Wallet provider', serviceType: 'wallet-provider', certificates: [walletProviderRoot.cert.toString('pem')] }] });
            expect(trust.status, trust.payload).to.equal(201);
            attestedOfferer = (await clientWithToken(t.server, root, { clientId: 'attested-offers', roles: ['issuance:offer'], tenantId: 'attested' })).token;
            const registered = await api(admin, 'POST', '/api/issuer/attribute-providers', { id: 'register', url: `http://127.0.0.1:${providerPort}/claims`, auth: { type: 'none' } });
            expect(registered.status, registered.payload).to.equal(201);
            const provided = await api(admin, 'POST', '/api/issuer/credentials', {
                ...PID, id: 'pid-provided', config: { ...PID.config, scope: 'pid-provided' }, attributeProviderId: 'register',
                iaeActions: [{ type: 'openid4vp_presentation', presentationConfigId: 'identify' }]
            });
            expect(provided.status, provided.payload).to.equal(201);
            const configs: Array<[string, unknown[]]> = [
                ['pid-vp', [{ type: 'openid4vp_presentation', presentationConfigId: 'identify', label: 'Show your PID' }]],
                ['pid-web', [{ type: 'redirect_to_web', url: 'https://issuer.example/login', label: 'Log in', description: 'internal', callbackUrl: 'https://issuer.example/cb' }]],
                ['pid-both', [{ type: 'openid4vp_presentation', presentationConfigId: 'identify' }, { type: 'redirect_to_web', url: 'https://issuer.example/login' }]],
                ['pid-missing-vp', [{ type: 'openid4vp_presentation', presentationConfigId: 'no-such-configuration' }]]
            ];
            for (const [id, iaeActions] of configs) {
                const res = await api(admin, 'POST', '/api/issuer/credentials', { ...PID, id, config: { ...PID.config, scope: id }, iaeActions });
                expect(res.status, res.payload).to.equal(201);
            }
            // The credential the holder presents: a demo PID from the pre-authorized flow.
            const offered = await api(offerer, 'POST', '/api/issuer/offer', { credentialConfigurationIds: ['pid'], credentialClaims: { pid: { type: 'inline', claims: { given_name: 'Erika', family_name: 'Mustermann' } } } });
            expect(offered.status, offered.payload).to.equal(201);
            pid = await new Wallet().receive(offered.body.uri, { configurationId: 'pid' });
            const mdlOffer = await api(offerer, 'POST', '/api/issuer/offer', { credentialConfigurationIds: ['mdl'], credentialClaims: { mdl: { type: 'inline', claims: { [MDL_NS]: { given_name: 'Erika', family_name: 'Mustermann', age_over_18: true } } } } });
            expect(mdlOffer.status, mdlOffer.payload).to.equal(201);
            mdl = await new Wallet().receive(mdlOffer.body.uri, { configurationId: 'mdl' });
            const mdlVp = await api(admin, 'POST', '/api/issuer/credentials', { ...MDL, id: 'mdl-vp', config: { ...MDL.config, scope: 'mdl-vp' }, iaeActions: [{ type: 'openid4vp_presentation', presentationConfigId: 'identify' }] });
            expect(mdlVp.status, mdlVp.payload).to.equal(201);
        });

        after(async () => {
            await t?.stop();
            await new Promise((resolve) => provider?.close(resolve));
        });

        const offer = async (id: string, claims?: Record<string, unknown>, tenant = 'demo') => {
            const res = await api(({ demo: offerer, other: otherOfferer, attested: attestedOfferer } as Record<string, string>)[tenant]!, 'POST', '/api/issuer/offer', {
                flow: 'authorization_code', credentialConfigurationIds: [id], byReference: false,
                ...(claims ? { credentialClaims: { [id]: { type: 'inline', claims } } } : {})
            });
            expect(res.status, res.payload).to.equal(201);
            const object = JSON.parse(new URL(res.body.uri.replace('openid-credential-offer://', 'https://wallet.invalid/')).searchParams.get('credential_offer')!);
            return { session: res.body.session as string, issuerState: object.grants.authorization_code.issuer_state as string };
        };
        const iae = (body: Record<string, string>, tenant = 'demo', json = false) => t.server.inject({
            method: 'POST',
            url: `/issuers/${tenant}/authorize/interactive`,
            payload: json ? body : new URLSearchParams(body).toString(),
            headers: { 'content-type': json ? 'application/json' : 'application/x-www-form-urlencoded' }
        }) as Promise<Res>;
        const firstBody = (issuerState: string, id: string, verifier: string, extra: Record<string, string> = {}) => ({
            client_id: CLIENT_ID, interaction_types_supported: BOTH, issuer_state: issuerState, authorization_details: details(id),
            code_challenge: challengeOf(verifier), code_challenge_method: 'S256', ...extra
        });
        const start = async (id: string, claims?: Record<string, unknown>, extra: Record<string, string> = {}) => {
            const created = await offer(id, claims);
            const verifier = newVerifier();
            const res = await iae(firstBody(created.issuerState, id, verifier, extra));
            expect(res.statusCode, res.payload).to.equal(200);
            expect(res.headers['cache-control']).to.equal('no-store');
            return { ...created, verifier, first: res.result as Record<string, any> };
        };
        const completeWeb = (authSession: string, token?: string, tenant = 'demo') => t.server.inject({
            method: 'POST', url: `/issuers/${tenant}/authorize/interactive/complete-web-auth/${authSession}`, ...(token ? { headers: bearer(token) } : {})
        }) as Promise<Res>;
        const token = (body: Record<string, string>, tenant = 'demo') => t.server.inject({
            method: 'POST', url: `/issuers/${tenant}/authorize/token`, payload: new URLSearchParams(body).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' }
        }) as Promise<Res>;
        const redeem = (code: string, verifier: string) => ({ grant_type: 'authorization_code', code, code_verifier: verifier, client_id: CLIENT_ID });

        /** The holder takes the step's request object (by value) through the OpenID4VP library and verifies its signature. */
        const resolveStep = async (holder: Holder, step: Record<string, any>): Promise<HolderRequest> => {
            expect(step).to.include({ status: 'require_interaction', type: 'openid4vp_presentation' });
            const request = step.openid4vp_request.request as string;
            expect(Jose.decodeProtectedHeader(request).typ).to.equal('oauth-authz-req+jwt');
            const clientId = jwtClaims(request).client_id as string;
            return holder.resolve(`openid4vp://?client_id=${encodeURIComponent(clientId)}&request=${request}`);
        };
        /** The encrypted direct_post.jwt response of the holder's PID presentation, as the JSON string the endpoint takes. */
        const presentation = async (holder: Holder, resolved: HolderRequest, options: { noKeyBinding?: boolean } = {}) => {
            const vpToken = await holder.vpToken(resolved, { pid: { format: 'dc+sd-jwt', credential: pid.credentials[0]!, key: pid.holderKeys[0]!, options } });
            return JSON.stringify({ response: await holder.encrypt(resolved, { vp_token: vpToken, state: resolved.state }) });
        };

        /** The credential of configuration `id` for a Bearer access token, as issued. */
        const issuedCredential = async (accessToken: string, id: string): Promise<string> => {
            const cNonce = ((await t.server.inject({ method: 'POST', url: '/issuers/demo/vci/nonce' })).result as { c_nonce: string }).c_nonce;
            const holderKey = await newHolderKey();
            const proof = await new Jose.SignJWT({ aud: `${publicUrl}/issuers/demo`, nonce: cNonce })
                .setProtectedHeader({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: holderKey.publicJwk }).setIssuedAt().sign(holderKey.privateKey);
            const res = await t.server.inject({ method: 'POST', url: '/issuers/demo/vci/credential', headers: bearer(accessToken), payload: { credential_configuration_id: id, proofs: { jwt: [proof] } } }) as Res;
            expect(res.statusCode, res.payload).to.equal(200);
            return res.result.credentials[0].credential as string;
        };
        /** An SD-JWT VC credential, verified independently of the service. */
        const credentialOf = async (accessToken: string, id: string) => verifySdJwtVc(await issuedCredential(accessToken, id));

        it('advertises the endpoint and sends wallet-initiated authorization requests there', async () => {
            const issuer = (await t.server.inject({ url: '/.well-known/openid-credential-issuer/issuers/demo' })).result as Record<string, unknown>;
            expect(issuer.interactive_authorization_endpoint).to.equal(`${publicUrl}/issuers/demo/authorize/interactive`);
            const as = (await t.server.inject({ url: '/.well-known/oauth-authorization-server/issuers/demo' })).result as Record<string, unknown>;
            expect(as.interactive_authorization_endpoint).to.equal(`${publicUrl}/issuers/demo/authorize/interactive`);
            const verifier = newVerifier();
            const pushed = await t.server.inject({
                method: 'POST', url: '/issuers/demo/authorize/par', headers: { 'content-type': 'application/x-www-form-urlencoded' },
                payload: new URLSearchParams({ response_type: 'code', client_id: CLIENT_ID, redirect_uri: 'https://wallet.example/cb', code_challenge: challengeOf(verifier), code_challenge_method: 'S256', scope: 'pid' }).toString()
            });
            expect(pushed.statusCode, pushed.payload).to.equal(201);
            const res = await t.server.inject({ url: `/issuers/demo/authorize?${new URLSearchParams({ client_id: CLIENT_ID, request_uri: (pushed.result as { request_uri: string }).request_uri }).toString()}` });
            expect(res.statusCode).to.equal(302);
            const location = new URL(res.headers.location as string);
            expect(location.searchParams.get('error')).to.equal('invalid_request');
            expect(location.searchParams.get('error_description')).to.contain(`${publicUrl}/issuers/demo/authorize/interactive`);
        });

        it('takes a presentation step with the OpenID4VP holder, issues a code the token endpoint redeems, and the credential carries the presented claims', async () => {
            // The offer gives birthdate; given_name and family_name (mandatory) come from the presentation.
            const flow = await start('pid-vp', { birthdate: '1964-08-12' });
            expect(flow.first).to.include({ status: 'require_interaction', type: 'openid4vp_presentation', label: 'Show your PID' });
            expect(flow.first.auth_session).to.match(/^[A-Za-z0-9_-]{43}$/);
            const stored = await t.server.sessions.get(flow.session);
            const expiresIn = Date.parse((stored!.data as any).interactive.expiresAt) - Date.now();
            expect(expiresIn).to.be.within(595_000, 600_000);

            const holder = new Holder();
            const resolved = await resolveStep(holder, flow.first);
            expect(resolved.payload.response_mode).to.equal('direct_post.jwt');
            expect(resolved.payload.dcql_query.credentials.map((c: { id: string }) => c.id)).to.include('pid');
            const response = await presentation(holder, resolved);
            const done = await iae({ auth_session: flow.first.auth_session, openid4vp_response: response });
            expect(done.statusCode, done.payload).to.equal(200);
            expect(Object.keys(done.result).sort()).to.equal(['code', 'status']);
            expect(done.result.status).to.equal('ok');

            // Replays: the same response, the finished auth_session.
            expectError(await iae({ auth_session: flow.first.auth_session, openid4vp_response: response }), 'invalid_request');
            const session = await t.server.sessions.get(flow.session);
            const data = session!.data as any;
            expect(data.interactive).to.not.exist();
            expect(data.presented[0].presentationConfigId).to.equal('identify');
            expect(data.presented[0].credentials[0].values[0]).to.include({ given_name: 'Erika', family_name: 'Mustermann' });
            expect(Date.parse(data.authorization.codeExpiresAt) - Date.now()).to.be.within(55_000, 60_000);
            // The presentation session the step used is completed like any other.
            const presentationSession = (await t.server.sessions.get(data.presented[0].presentationSessionId))!;
            expect(presentationSession.status).to.equal('completed');

            expectError(await token(redeem(done.result.code, newVerifier())), 'invalid_grant');
            expectError(await token({ ...redeem(done.result.code, flow.verifier), redirect_uri: 'https://wallet.example/cb' }), 'invalid_grant');
            const tokens = await token(redeem(done.result.code, flow.verifier));
            expect(tokens.statusCode, tokens.payload).to.equal(200);
            expect(tokens.result.authorization_details[0]).to.include({ credential_configuration_id: 'pid-vp' });
            expectError(await token(redeem(done.result.code, flow.verifier)), 'invalid_grant');
            const credential = await credentialOf(tokens.result.access_token, 'pid-vp');
            expect(credential.payload).to.include({ given_name: 'Erika', family_name: 'Mustermann', birthdate: '1964-08-12' });
        });

        it('takes a presentation of an mDL into an mso_mdoc credential, claims by namespace and element', async () => {
            const flow = await start('mdl-vp', { [MDL_NS]: { birth_date: '1964-08-12' } });
            const holder = new Holder();
            const resolved = await resolveStep(holder, flow.first);
            const vpToken = await holder.vpToken(resolved, { mdl: { format: 'mso_mdoc', issuerSigned: mdl.credentials[0]!, key: mdl.holderKeys[0]! } });
            const response = JSON.stringify({ response: await holder.encrypt(resolved, { vp_token: vpToken, state: resolved.state }) });
            const done = await iae({ auth_session: flow.first.auth_session, openid4vp_response: response, code_verifier: flow.verifier });
            expect(done.result.status, done.payload).to.equal('ok');
            const tokens = await token(redeem(done.result.code, flow.verifier));
            expect(tokens.statusCode, tokens.payload).to.equal(200);
            const credential = await verifyMdoc(await issuedCredential(tokens.result.access_token, 'mdl-vp'), MDL_DOCTYPE);
            expect(credential.namespaces[MDL_NS]).to.include({ given_name: 'Erika', family_name: 'Mustermann', birth_date: '1964-08-12' });
            // Only the configuration's elements that the query asked for were taken: age_over_18 was not presented.
            expect(credential.namespaces[MDL_NS]!.age_over_18).to.not.exist();
        });

        it('takes a web step completed by the issuer backend (issuance:offer of the same tenant only)', async () => {
            const flow = await start('pid-web', { given_name: 'Max', family_name: 'Muster' }, { redirect_uri: 'https://wallet.example/cb' });
            // Only the type, the auth_session and the label reach the wallet: url, description and callbackUrl stay stored.
            expect(flow.first).to.equal({ status: 'require_interaction', type: 'redirect_to_web', auth_session: flow.first.auth_session, label: 'Log in' });
            const authSession = flow.first.auth_session as string;
            expectError(await iae({ auth_session: authSession, code_verifier: flow.verifier }), 'access_denied');
            expectError(await iae({ auth_session: authSession }), 'invalid_request');
            expectError(await iae({ auth_session: authSession, code_verifier: newVerifier() }), 'invalid_grant');
            expectError(await iae({ auth_session: authSession, openid4vp_response: '{"response":"x"}', code_verifier: flow.verifier }), 'invalid_request');

            expect((await completeWeb(authSession)).statusCode).to.equal(401);
            expect((await completeWeb(authSession, verifierRole)).statusCode).to.equal(403);
            expect((await completeWeb(authSession, otherOfferer)).statusCode).to.equal(403);
            // Another tenant's backend on its own path does not find it.
            const foreign = await completeWeb(authSession, otherOfferer, 'other');
            expect(foreign.statusCode).to.equal(404);
            expect(foreign.result).to.equal({ error: 'not_found' });
            const unknown = await completeWeb('A'.repeat(43), offerer);
            expect(unknown.statusCode).to.equal(404);
            expect(unknown.result).to.equal({ error: 'not_found' });
            const completed = await completeWeb(authSession, offerer);
            expect(completed.statusCode, completed.payload).to.equal(200);
            expect(completed.result).to.equal({ success: true });
            expect((await completeWeb(authSession, offerer)).result).to.equal({ error: 'not_found' });

            // The auth_session of this tenant means nothing at another tenant's endpoint.
            expectError(await iae({ auth_session: authSession, code_verifier: flow.verifier }, 'other'), 'invalid_request');
            const done = await iae({ auth_session: authSession, code_verifier: flow.verifier }, 'demo', true);
            expect(done.statusCode, done.payload).to.equal(200);
            expect(done.result.status).to.equal('ok');
            expectError(await iae({ auth_session: authSession, code_verifier: flow.verifier }), 'invalid_request');
            expect((await completeWeb(authSession, offerer)).result).to.equal({ error: 'not_found' });
            // The redirect_uri of the first request must be repeated at the token endpoint.
            expectError(await token(redeem(done.result.code, flow.verifier)), 'invalid_request');
            const tokens = await token({ ...redeem(done.result.code, flow.verifier), redirect_uri: 'https://wallet.example/cb' });
            expect(tokens.statusCode, tokens.payload).to.equal(200);
            const credential = await credentialOf(tokens.result.access_token, 'pid-web');
            expect(credential.payload).to.include({ given_name: 'Max', family_name: 'Muster' });
        });

        it('runs the configured steps in order: a presentation, then a web step', async () => {
            const flow = await start('pid-both');
            const holder = new Holder();
            const next = await iae({ auth_session: flow.first.auth_session, openid4vp_response: await presentation(holder, await resolveStep(holder, flow.first)) });
            expect(next.statusCode, next.payload).to.equal(200);
            expect(next.result).to.equal({ status: 'require_interaction', type: 'redirect_to_web', auth_session: flow.first.auth_session });
            expect((await completeWeb(flow.first.auth_session, offerer)).result).to.equal({ success: true });
            const done = await iae({ auth_session: flow.first.auth_session, code_verifier: flow.verifier });
            expect(done.result.status, done.payload).to.equal('ok');
            const tokens = await token(redeem(done.result.code, flow.verifier));
            expect(tokens.statusCode, tokens.payload).to.equal(200);
            expect((await credentialOf(tokens.result.access_token, 'pid-both')).payload).to.include({ given_name: 'Erika', family_name: 'Mustermann' });
        });

        it('without iaeActions chooses one step from interaction_types_supported', async () => {
            const presented = await start('pid', undefined, { interaction_types_supported: 'openid4vp_presentation' });
            expect(presented.first.type).to.equal('openid4vp_presentation');
            const holder = new Holder();
            expect((await resolveStep(holder, presented.first)).payload.dcql_query.credentials[0].id).to.equal('pid');
            const web = await start('pid', undefined, { interaction_types_supported: 'redirect_to_web' });
            expect(web.first.type).to.equal('redirect_to_web');
            // A tenant without presentation configurations cannot make a presentation step.
            const other = await offer('pid', undefined, 'other');
            expectError(await iae(firstBody(other.issuerState, 'pid', newVerifier(), { interaction_types_supported: 'openid4vp_presentation' }), 'other'), 'server_error');
            // The offer was not spent by the failed request.
            const fine = await iae(firstBody(other.issuerState, 'pid', newVerifier(), { interaction_types_supported: BOTH }), 'other');
            expect(fine.result.type, fine.payload).to.equal('redirect_to_web');
        });

        it('sends the presented claims to the attribute provider of the configuration, which answers the credential\'s', async () => {
            const flow = await start('pid-provided');
            const holder = new Holder();
            const done = await iae({ auth_session: flow.first.auth_session, openid4vp_response: await presentation(holder, await resolveStep(holder, flow.first)) });
            expect(done.result.status, done.payload).to.equal('ok');
            // The offer's claims were left alone: the provider stays the source.
            expect((await t.server.sessions.get(flow.session))!.data).to.include({ claims: {} });
            const tokens = await token(redeem(done.result.code, flow.verifier));
            expect(tokens.statusCode, tokens.payload).to.equal(200);
            const credential = await credentialOf(tokens.result.access_token, 'pid-provided');
            expect(credential.payload).to.include({ given_name: 'ERIKA', family_name: 'MUSTERMANN' });
            const sent = providerRequests.find((r) => r.session === flow.session)!;
            expect(sent.credential_configuration_id).to.equal('pid-provided');
            expect(sent.presentations).to.have.length(1);
            expect(sent.presentations[0]).to.include({ presentationConfigId: 'identify' });
            expect(sent.presentations[0].credentials[0]).to.include({ id: 'pid', format: 'dc+sd-jwt' });
            expect(sent.presentations[0].credentials[0].values[0]).to.include({ given_name: 'Erika', family_name: 'Mustermann' });
            expect(sent.presentations[0].credentials[0].values[0].cnf).to.not.exist();
        });

        it('takes a JSON first request with authorization_details as an array, and a wallet that declines gets access_denied', async () => {
            const created = await offer('pid-vp');
            const verifier = newVerifier();
            const res = await t.server.inject({
                method: 'POST', url: '/issuers/demo/authorize/interactive',
                payload: { ...firstBody(created.issuerState, 'pid-vp', verifier), authorization_details: [{ type: 'openid_credential', credential_configuration_id: 'pid-vp' }] }
            }) as Res;
            expect(res.statusCode, res.payload).to.equal(200);
            const declined = await iae({ auth_session: res.result.auth_session, openid4vp_response: JSON.stringify({ error: 'access_denied', error_description: 'the user declined' }) });
            expectError(declined, 'access_denied');
            expect(declined.result.error_description).to.contain('the user declined');
            expectError(await iae({ auth_session: res.result.auth_session, code_verifier: verifier }), 'invalid_request');
        });

        it('authenticates the client as PAR does (walletAttestationRequired)', async () => {
            const created = await offer('pid', undefined, 'attested');
            const verifier = newVerifier();
            const body = firstBody(created.issuerState, 'pid', verifier, { interaction_types_supported: 'redirect_to_web' });
            expectError(await iae(body, 'attested'), 'invalid_client');
            // The refused request did not spend the offer.
            expect(((await t.server.sessions.get(created.session))!.data as any).interactive).to.not.exist();

            // A wallet attestation of a provider the tenant's trust list names, and a PoP of its instance key.
            const instance = await newHolderKey();
            const now = Math.floor(Date.now() / 1000);
            const attestation = await new Jose.SignJWT({ iss: 'https://wallet-provider.example', sub: CLIENT_ID, iat: now - 10, exp: now + 3600, cnf: { jwk: instance.publicJwk } })
                .setProtectedHeader({ alg: 'ES256', typ: 'oauth-client-attestation+jwt', x5c: [Buffer.from(walletAttestationSigner.cert.rawData).toString('base64')] })
                .sign(walletAttestationSigner.privateKey);
            const pop = (aud = `${publicUrl}/issuers/attested`) => new Jose.SignJWT({ iss: CLIENT_ID, aud, iat: now, exp: now + 60, jti: Crypto.randomUUID() })
                .setProtectedHeader({ alg: 'ES256', typ: 'oauth-client-attestation-pop+jwt' }).sign(instance.privateKey);
            const attested = async (form: Record<string, string>, popJwt: string) => t.server.inject({
                method: 'POST', url: '/issuers/attested/authorize/interactive', payload: new URLSearchParams(form).toString(),
                headers: { 'content-type': 'application/x-www-form-urlencoded', 'oauth-client-attestation': attestation, 'oauth-client-attestation-pop': popJwt }
            }) as Promise<Res>;
            expectError(await attested(body, await pop(`${publicUrl}/issuers/demo`)), 'invalid_client');
            expectError(await attested({ ...body, client_id: 'someone-else' }, await pop()), 'invalid_client');
            const usedPop = await pop();
            const first = await attested(body, usedPop);
            expect(first.statusCode, first.payload).to.equal(200);
            expect(first.result.type).to.equal('redirect_to_web');
            // A replayed PoP is refused before the issuer_state is looked at.
            expectError(await attested(body, usedPop), 'invalid_client');
            expect((await completeWeb(first.result.auth_session, attestedOfferer, 'attested')).result).to.equal({ success: true });
            const done = await iae({ auth_session: first.result.auth_session, code_verifier: verifier }, 'attested');
            expect(done.result.status, done.payload).to.equal('ok');
            // The token endpoint authenticates the same attested client.
            const redeemed = await t.server.inject({
                method: 'POST', url: '/issuers/attested/authorize/token', payload: new URLSearchParams(redeem(done.result.code, verifier)).toString(),
                headers: { 'content-type': 'application/x-www-form-urlencoded', 'oauth-client-attestation': attestation, 'oauth-client-attestation-pop': await pop() }
            }) as Res;
            expect(redeemed.statusCode, redeemed.payload).to.equal(200);
        });

        it('answers every error of spec 7.1', async () => {
            const created = await offer('pid-vp');
            const verifier = newVerifier();
            const good = firstBody(created.issuerState, 'pid-vp', verifier);
            const without = (name: string) => Object.fromEntries(Object.entries(good).filter(([key]) => key !== name));
            for (const name of ['client_id', 'interaction_types_supported', 'code_challenge', 'code_challenge_method', 'issuer_state']) {
                expectError(await iae(without(name)), 'invalid_request');
            }
            expectError(await iae({ ...good, code_challenge_method: 'plain', code_challenge: verifier }), 'invalid_request');
            expectError(await iae({ ...good, code_challenge: 'short' }), 'invalid_request');
            expectError(await iae({ ...good, issuer_state: 'not-an-issuer-state' }), 'invalid_request');
            expectError(await iae({ ...good, interaction_types_supported: 'something_else' }), 'invalid_request');
            expectError(await iae({ ...good, interaction_types_supported: 'redirect_to_web' }), 'invalid_request');
            expectError(await iae({ ...good, redirect_uri: 'javascript:alert(1)' }), 'invalid_request');
            expectError(await iae({ ...good, authorization_details: details('pid') }), 'invalid_authorization_details');
            // A pre-authorized code is not an issuer_state.
            const preAuthorized = await api(offerer, 'POST', '/api/issuer/offer', { credentialConfigurationIds: ['pid-vp'], byReference: false });
            const code = JSON.parse(new URL(preAuthorized.body.uri.replace('openid-credential-offer://', 'https://wallet.invalid/')).searchParams.get('credential_offer')!).grants['urn:ietf:params:oauth:grant-type:pre-authorized_code']['pre-authorized_code'];
            expectError(await iae({ ...good, issuer_state: code }), 'invalid_request');
            // Another tenant does not know the issuer_state.
            expectError(await iae(good, 'other'), 'invalid_request');
            // server_error: the configured presentation configuration does not exist.
            const missing = await offer('pid-missing-vp');
            expectError(await iae(firstBody(missing.issuerState, 'pid-missing-vp', newVerifier())), 'server_error');
            // The offer was given back: the same request fails the same way, not as a used issuer_state.
            expectError(await iae(firstBody(missing.issuerState, 'pid-missing-vp', newVerifier())), 'server_error');
            expect(((await t.server.sessions.get(missing.session))!.data as any).interactive).to.not.exist();

            // Without iaeActions, a wallet that supports none of the types gets no step.
            const plain = await offer('pid');
            expectError(await iae(firstBody(plain.issuerState, 'pid', newVerifier(), { interaction_types_supported: 'foo,bar' })), 'invalid_request');
            const { authorization_details: _details, ...byScope } = firstBody(plain.issuerState, 'pid', newVerifier(), { scope: 'pid-vp' });
            expectError(await iae(byScope), 'invalid_scope');

            const first = await iae(good);
            expect(first.statusCode, first.payload).to.equal(200);
            // A presentation step is not the issuer backend's to complete.
            expect((await completeWeb(first.result.auth_session, offerer)).result).to.equal({ error: 'not_found' });
            expectError(await iae({ auth_session: first.result.auth_session, openid4vp_response: JSON.stringify({ response: 'x'.repeat(600 * 1024) }) }), 'invalid_request');
            // The offer is authorized once: a second first request and the authorization endpoint's flow are refused.
            expectError(await iae(good), 'invalid_request');
            const pushed = await t.server.inject({
                method: 'POST', url: '/issuers/demo/authorize/par', headers: { 'content-type': 'application/x-www-form-urlencoded' },
                payload: new URLSearchParams({ response_type: 'code', client_id: CLIENT_ID, redirect_uri: 'https://wallet.example/cb', code_challenge: challengeOf(verifier), code_challenge_method: 'S256', scope: 'pid-vp', issuer_state: created.issuerState }).toString()
            });
            expect(pushed.statusCode, pushed.payload).to.equal(201);
            const authorized = await t.server.inject({ url: `/issuers/demo/authorize?${new URLSearchParams({ client_id: CLIENT_ID, request_uri: (pushed.result as { request_uri: string }).request_uri }).toString()}` });
            expect(new URL(authorized.headers.location as string).searchParams.get('error')).to.equal('invalid_request');
            expect(new URL(authorized.headers.location as string).searchParams.get('code')).to.be.null();
            const authSession = first.result.auth_session as string;
            expectError(await iae({ auth_session: 'A'.repeat(43), openid4vp_response: '{}' }), 'invalid_request');
            expectError(await iae({ auth_session: 'x\u0000', openid4vp_response: '{}' }), 'invalid_request');
            // Replies not matching the presentation step, and malformed responses.
            expectError(await iae({ auth_session: authSession }), 'invalid_request');
            expectError(await iae({ auth_session: authSession, code_verifier: verifier }), 'invalid_request');
            for (const bad of ['not json', '[]', '"string"', '{}', JSON.stringify({ vp_token: { pid: ['x'] } }), JSON.stringify({ response: 'not-a-jwe' })]) {
                expectError(await iae({ auth_session: authSession, openid4vp_response: bad }), 'invalid_request');
            }
            expectError(await iae({ auth_session: authSession, openid4vp_response: '{}', code_verifier: newVerifier() }), 'invalid_grant');
            // access_denied: a presentation that does not verify (no key binding) ends the auth_session.
            const holder = new Holder();
            const resolved = await resolveStep(holder, first.result);
            expectError(await iae({ auth_session: authSession, openid4vp_response: await presentation(holder, resolved, { noKeyBinding: true }) }), 'access_denied');
            expectError(await iae({ auth_session: authSession, openid4vp_response: await presentation(holder, resolved) }), 'invalid_request');
        });

        it('answers 400, never 500, to values of the wrong type, control characters and oversized values', async () => {
            const created = await offer('pid-web');
            const verifier = newVerifier();
            const good: Record<string, unknown> = firstBody(created.issuerState, 'pid-web', verifier);
            const json = (body: Record<string, unknown>) => t.server.inject({ method: 'POST', url: '/issuers/demo/authorize/interactive', payload: body }) as Promise<Res>;
            const variants: Array<Record<string, unknown>> = [
                { ...good, client_id: 42 }, { ...good, client_id: ['a'] }, { ...good, client_id: 'w\u0000' }, { ...good, client_id: 'c'.repeat(256) },
                { ...good, interaction_types_supported: 7 }, { ...good, interaction_types_supported: [1] }, { ...good, interaction_types_supported: 'x'.repeat(2000) },
                { ...good, code_challenge: { a: 1 } }, { ...good, code_challenge_method: ['S256'] },
                { ...good, issuer_state: 5 }, { ...good, issuer_state: `${created.issuerState}\u0000` }, { ...good, issuer_state: 's'.repeat(300) },
                { ...good, authorization_details: { type: 'openid_credential' } }, { ...good, authorization_details: 'not json' },
                { ...good, redirect_uri: 12 }, { ...good, code_verifier: verifier },
                { auth_session: 12, code_verifier: verifier }, { auth_session: ['x'], code_verifier: verifier }, { auth_session: 'a\u0000b', code_verifier: verifier },
                { auth_session: 'x'.repeat(10_000), openid4vp_response: '{}' }
            ];
            for (const body of variants) {
                const res = await json(body);
                expect(res.statusCode, `${JSON.stringify(body).slice(0, 200)}: ${res.payload}`).to.equal(400);
                expect(res.result.error).to.be.a.string();
            }
            // None of them spent the offer.
            const res = await json(good);
            expect(res.statusCode, res.payload).to.equal(200);
            const authSession = res.result.auth_session as string;
            for (const body of [{ auth_session: authSession, code_verifier: 1 }, { auth_session: authSession, openid4vp_response: { response: 'x' } }, { auth_session: authSession, code_verifier: 'v'.repeat(5000) }]) {
                const reply = await json(body);
                expect(reply.statusCode, reply.payload).to.equal(400);
            }
            expect((await completeWeb(`${'a'.repeat(42)}%00`, offerer)).statusCode).to.equal(400);
            expect((await completeWeb('a'.repeat(200), offerer)).statusCode).to.equal(400);
        });

        it('refuses an expired auth_session', async () => {
            const flow = await start('pid-web');
            await t.server.sessions.mutateData<'issuance'>(flow.session, (data) => ({ ...data, interactive: { ...data.interactive!, expiresAt: new Date(Date.now() - 1).toISOString() } }));
            expect((await completeWeb(flow.first.auth_session, offerer)).result).to.equal({ error: 'not_found' });
            expectError(await iae({ auth_session: flow.first.auth_session, code_verifier: flow.verifier }), 'invalid_request');
            // The offer's own expiry ends the auth_session as well.
            const lapsed = await start('pid-web');
            await t.server.db.knex('sessions').where({ id: lapsed.session }).update({ expiresAt: new Date(Date.now() - 1000).toISOString() });
            expect((await completeWeb(lapsed.first.auth_session, offerer)).result).to.equal({ error: 'not_found' });
            expectError(await iae({ auth_session: lapsed.first.auth_session, code_verifier: lapsed.verifier }), 'invalid_request');
            // An expired code from the endpoint is refused at the token endpoint.
            const late = await start('pid-web', { given_name: 'A', family_name: 'B' });
            await completeWeb(late.first.auth_session, offerer);
            const done = await iae({ auth_session: late.first.auth_session, code_verifier: late.verifier });
            await t.server.sessions.mutateData<'issuance'>(late.session, (data) => ({ ...data, authorization: { ...data.authorization!, codeExpiresAt: new Date(Date.now() - 1).toISOString() } }));
            expectError(await token(redeem(done.result.code, late.verifier)), 'invalid_grant');
        });

        it(`lets exactly one of ${CONCURRENT} concurrent first requests and replies to one step proceed`, async () => {
            const created = await offer('pid-vp');
            const verifier = newVerifier();
            const firsts = await Promise.all(Array.from({ length: CONCURRENT }, () => iae(firstBody(created.issuerState, 'pid-vp', verifier))));
            const winners = firsts.filter((r) => r.statusCode === 200);
            expect(winners.length).to.equal(1);
            firsts.filter((r) => r.statusCode !== 200).forEach((r) => expectError(r, 'invalid_request'));

            const holder = new Holder();
            const response = await presentation(holder, await resolveStep(holder, winners[0]!.result));
            const replies = await Promise.all(Array.from({ length: CONCURRENT }, () => iae({ auth_session: winners[0]!.result.auth_session, openid4vp_response: response })));
            expect(replies.filter((r) => r.statusCode === 200).length).to.equal(1);
            replies.filter((r) => r.statusCode !== 200).forEach((r) => expectError(r, 'invalid_request'));

            const web = await start('pid-web');
            const completions = await Promise.all(Array.from({ length: CONCURRENT }, () => completeWeb(web.first.auth_session, offerer)));
            expect(completions.filter((r) => r.statusCode === 200).length).to.equal(1);
            const webReplies = await Promise.all(Array.from({ length: CONCURRENT }, () => iae({ auth_session: web.first.auth_session, code_verifier: web.verifier })));
            const codes = webReplies.filter((r) => r.statusCode === 200);
            expect(codes.length).to.equal(1);
            expect(codes[0]!.result.status).to.equal('ok');
            webReplies.filter((r) => r.statusCode !== 200).forEach((r) => expectError(r, 'invalid_request'));
        });
    });
}
