import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as Jose from 'jose';
import { issueMdoc } from '../../plugins/oid4vci/formats/mdoc';
import { issueSdJwtVc } from '../../plugins/oid4vci/formats/sd-jwt';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { Holder, newHolderKey, x509Hash, type HeldCredential, type HolderKey, type HolderRequest, type WalletAnswer } from '../helpers/holder';
import { startTestServer, type TestServer } from '../helpers/server';
import { freePort, startReceiver as startReceiverOn } from '../helpers/net';
import { DAY, party } from '../helpers/pki';

/**
 * OpenID4VP verification end to end, over real HTTP, with a holder built on @openid4vc/openid4vp: signed request
 * objects (x509_hash), encrypted direct_post.jwt responses with SD-JWT VCs and mdocs (OpenID4VP 1.0 SessionTranscript),
 * transaction data, redirects, wallet error responses, webhooks, single use and expiry; then every failure code of
 * spec 7.2 produced through the real response endpoint, and the negatives of the OIDF verifier test plan.
 */

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const DOCTYPE = 'org.iso.18013.5.1.mDL';
const NS = 'org.iso.18013.5.1';
const PID_VCT = 'urn:eudi:pid:1';

/** Spec 7.2, verbatim. */
const MESSAGES = {
    signature_invalid: 'The credential signature is invalid.',
    no_trust_chain_to_root: 'The credential issuer does not chain to a trusted root.',
    trust_chain_not_trusted: 'The credential issuer is not in the trusted list.',
    certificate_expired: 'The credential issuer certificate is expired or not yet valid.',
    x5c_missing: 'The credential is missing its issuer certificate chain.',
    verification_error: 'The credential could not be verified.'
} as const;
type Code = keyof typeof MESSAGES | 'claim_value_mismatch';
const MISMATCH_PREFIX = "Disclosed claim values do not match the requested values for credential 'pid': ";

const PID_QUERY = {
    credentials: [{
        id: 'pid',
        format: 'dc+sd-jwt',
        meta: { vct_values: [PID_VCT] },
        claims: [{ path: ['given_name'] }, { path: ['age_over_18'], values: [true] }]
    }]
};
const MDL_QUERY = {
    credentials: [{
        id: 'mdl',
        format: 'mso_mdoc',
        meta: { doctype_value: DOCTYPE },
        claims: [{ path: [NS, 'family_name'] }, { path: [NS, 'age_over_18'], values: [true] }]
    }]
};
const BOTH_QUERY = { credentials: [...PID_QUERY.credentials, ...MDL_QUERY.credentials] };
const PAYMENT = { type: 'org.example.payment', credential_ids: ['pid'], payload: { amount: '42.00', currency: 'EUR', payee: 'Acme Shop' } };
const REDIRECT = 'https://rp.example/done/{sessionId}?step=1';
const OVERRIDE = 'https://override.example/after?from=hook';

const PID_FIELDS = ['given_name', 'family_name', 'birthdate', 'age_over_18'].map((name) => ({ path: [name], disclosable: true }));

/** A port nothing listens on (bound, read, closed). */
/** /redirect/* answers {redirectUri}, /fail/* 503, everything else 200 {}. */
const startReceiver = () => startReceiverOn((path) => path.startsWith('/redirect/')
    ? { status: 200, body: { redirectUri: OVERRIDE, other: 'ignored' } }
    : path.startsWith('/fail/') ? { status: 503, body: { redirectUri: 'https://never.example/' } } : { status: 200, body: {} });

/** An issuer chain made outside the service: a valid root CA and an issuer certificate that expired yesterday. */
const expiredIssuerChain = async () => {
    const root = await party('Expired Test Root CA', null, { ca: true, from: -400 * DAY, to: 3650 * DAY });
    const leaf = await party('Expired Test Issuer', root, { from: -30 * DAY, to: -DAY });
    const { kty, crv, x, y, d } = leaf.privateJwk;
    return { rootPem: root.cert.toString('pem'), leafPem: leaf.cert.toString('pem'), privateJwk: { kty, crv, x, y, d } };
};

const b64url = (value: string | Uint8Array) => Buffer.from(value).toString('base64url');
const decodeTransactionData = (entries: unknown[]): unknown[] =>
    entries.map((e) => (typeof e === 'string' ? JSON.parse(Buffer.from(e, 'base64url').toString('utf8')) : e));

for (const dialect of DIALECTS) {
    describe(`OpenID4VP presentation end to end (${dialect})`, () => {
        let t: TestServer;
        let publicUrl: string;
        let receiver: Awaited<ReturnType<typeof startReceiver>>;
        let downUrl: string;
        const admins: Record<string, string> = {};
        let restricted: string;
        const holder = new Holder();
        let holderKey: HolderKey;
        let deviceKey: HolderKey;
        const credentials: Record<string, string> = {};
        let mdl: string;
        let tags = 0;

        const api = async (token: string, method: string, url: string, payload?: object) => {
            const res = await t.server.inject({ method, url, headers: bearer(token), ...(payload ? { payload } : {}) });
            return { status: res.statusCode, body: res.result as any, payload: res.payload };
        };
        const create = async (tenant: string, url: string, payload: object) => {
            const res = await api(admins[tenant]!, 'POST', url, payload);
            expect(res.status, res.payload).to.equal(201);
            return res.body;
        };

        const sdJwt = (tenant: string, keyChainId: string, claims: Record<string, unknown>, key: HolderKey = holderKey) => issueSdJwtVc(t.server.signing, {
            tenantId: tenant, keyChainId, issuer: `${publicUrl}/issuers/${tenant}`, vct: PID_VCT, claims, fields: PID_FIELDS, holderJwk: key.publicJwk
        });

        /** The issuer-signed JWT of an SD-JWT VC signed again after `change` edited its header. */
        const resign = async (credential: string, tenant: string, keyChainId: string, change: (header: Record<string, unknown>) => Record<string, unknown>) => {
            const [jwt, ...rest] = credential.split('~');
            const [header, payload] = jwt!.split('.');
            const input = `${b64url(JSON.stringify(change(JSON.parse(Buffer.from(header!, 'base64url').toString('utf8')))))}.${payload}`;
            const signature = await t.server.signing.sign(tenant, keyChainId, Buffer.from(input, 'ascii'));
            return [`${input}.${b64url(signature)}`, ...rest].join('~');
        };

        before(async () => {
            const port = await freePort();
            publicUrl = `http://127.0.0.1:${port}`;
            receiver = await startReceiver();
            downUrl = `http://127.0.0.1:${await freePort()}/down`;
            t = await startTestServer(dialect, {
                listen: true,
                env: { PORT: String(port), PUBLIC_URL: publicUrl, OUTBOUND_URL_ALLOW_HTTP: 'true', OUTBOUND_URL_ALLOW_PRIVATE_NETWORK: 'true' }
            });
            const root = await rootToken(t.server);
            const roots: Record<string, string> = {};
            for (const tenant of ['acme', 'bare', 'other']) {
                await createTenant(t.server, root, tenant);
                admins[tenant] = (await clientWithToken(t.server, root, { clientId: `${tenant}-admin`, roles: ['tenant:admin'], tenantId: tenant })).token;
                const issuer = await create(tenant, '/api/key-chain', { id: 'issuer', usageType: 'attestation', subject: { commonName: `${tenant} PID issuer`, organization: tenant, country: 'DE' } });
                roots[tenant] = issuer.rootCertificate;
                await create(tenant, '/api/key-chain', { id: 'verifier', usageType: 'access', subject: { commonName: `${tenant} verifier` } });
                await create(tenant, '/api/verifier/config', { id: 'pid', dcql_query: PID_QUERY });
            }
            // acme trusts its own issuer root and the root of an imported issuer whose certificate has expired.
            const expired = await expiredIssuerChain();
            await create('acme', '/api/key-chain/import', { id: 'expired-issuer', usageType: 'attestation', privateJwk: expired.privateJwk, certificateChain: [expired.leafPem, expired.rootPem] });
            await create('acme', '/api/trust-lists', { id: 'acme', entities: [{ name: 'Acme PID', serviceType: 'pid-issuance', certificates: [roots.acme, expired.rootPem] }] });
            // other knows its root only as a wallet provider; bare has no trust list at all.
            await create('other', '/api/trust-lists', { id: 'wallets', entities: [{ name: 'Wallet provider', serviceType: 'wallet-provider', certificates: [roots.other] }] });
            await create('acme', '/api/issuer/webhook-endpoints', { id: 'hook', name: 'Results', url: `${receiver.url}/endpoint/pid-hooked`, auth: { type: 'apiKey', config: { headerName: 'x-endpoint-key', value: 'endpoint-secret-1' } } });
            // Lists a query names by trusted_authorities replace the tenant's lists.
            await create('acme', '/api/trust-lists', { id: 'wallets-only', entities: [{ serviceType: 'wallet-provider', certificates: [roots.acme] }] });
            const trustedBy = (value: Record<string, unknown>) => ({ credentials: [{ ...PID_QUERY.credentials[0], trusted_authorities: [{ type: 'etsi_tl', values: [value] }] }] });
            const rootDer = roots.acme!.replace(/-----[^-]+-----|\s/g, '');
            for (const config of [
                { id: 'pid-wp', dcql_query: trustedBy({ trustListId: 'wallets-only' }) },
                { id: 'pid-direct', dcql_query: trustedBy({ verifierX509Der: rootDer }) },
                { id: 'pid-redirect', dcql_query: PID_QUERY, redirectUri: REDIRECT },
                { id: 'pid-short', dcql_query: PID_QUERY, lifeTime: 1 },
                // No status list server here: the status list check has its own tests (test/plugins/oid4vp-status.ts).
                { id: 'pid-no-status-check', dcql_query: PID_QUERY, statusCheckMode: 'disabled' },
                { id: 'pid-hooked', dcql_query: PID_QUERY, webhookEndpointId: 'hook' },
                { id: 'pid-tx', dcql_query: PID_QUERY, transaction_data: [PAYMENT] },
                { id: 'mdl', dcql_query: MDL_QUERY },
                { id: 'both', dcql_query: BOTH_QUERY },
                { id: 'pid-federation', dcql_query: { credentials: [{ ...PID_QUERY.credentials[0], trusted_authorities: [{ type: 'openid_federation', values: ['https://federation.example'] }] }] } },
                { id: 'pid-aki', dcql_query: { credentials: [{ ...PID_QUERY.credentials[0], trusted_authorities: [{ type: 'aki', values: ['s9tIpPmhxdiuNkHMEWNpYim8S8Y'] }] }] } },
                { id: 'pid-federation-or-list', dcql_query: { credentials: [{ ...PID_QUERY.credentials[0], trusted_authorities: [{ type: 'openid_federation', values: ['https://federation.example'] }, { type: 'etsi_tl', values: [{ trustListId: 'acme' }] }] }] } }
            ]) {
                await create('acme', '/api/verifier/config', config);
            }
            restricted = (await clientWithToken(t.server, root, { clientId: 'acme-pid-only', roles: ['presentation:request'], tenantId: 'acme', allowedPresentationConfigs: ['pid'] })).token;

            holderKey = await newHolderKey();
            deviceKey = await newHolderKey();
            const claims = { given_name: 'Erika', family_name: 'Mustermann', birthdate: '1964-08-12', age_over_18: true };
            credentials.pid = await sdJwt('acme', 'issuer', claims);
            credentials.minor = await sdJwt('acme', 'issuer', { ...claims, age_over_18: false });
            credentials.foreign = await sdJwt('other', 'issuer', claims);
            credentials.expired = await sdJwt('acme', 'expired-issuer', claims);
            credentials.noX5c = await resign(credentials.pid, 'acme', 'issuer', ({ x5c: _x5c, ...header }) => header);
            const [jwt, ...rest] = credentials.pid.split('~');
            const [h, p, s] = jwt!.split('.');
            const signature = Buffer.from(s!, 'base64url');
            signature[10] ^= 0xff;
            credentials.badSignature = [`${h}.${p}.${b64url(signature)}`, ...rest].join('~');
            mdl = await issueMdoc(t.server.signing, {
                tenantId: 'acme', keyChainId: 'issuer', docType: DOCTYPE,
                namespaces: { [NS]: { family_name: 'Mustermann', given_name: 'Erika', age_over_18: true } },
                deviceJwk: deviceKey.publicJwk
            });
        });

        after(async () => {
            await t?.stop();
            await receiver?.close();
        });

        // --- helpers -------------------------------------------------------------------------------------------------

        const offer = async (body: Record<string, unknown>, tenant = 'acme', token = admins[tenant]!) => {
            const res = await api(token, 'POST', '/api/verifier/offer', body);
            expect(res.status, res.payload).to.equal(201);
            return res.body as { session: string; uri: string; crossDeviceUri: string };
        };
        const sessionOf = async (id: string, tenant = 'acme') => {
            const res = await api(admins[tenant]!, 'GET', `/api/session/${id}`);
            expect(res.status, res.payload).to.equal(200);
            return res.body;
        };
        const newTag = () => `case-${++tags}`;
        const hook = (tag: string, base = 'hook', includeRawTokensFor?: string[]) => ({
            url: `${receiver.url}/${base}/${tag}`,
            auth: { type: 'apiKey', config: { headerName: 'x-hook-key', value: 'hook-secret-123' } },
            ...(includeRawTokensFor ? { includeRawTokensFor } : {})
        });
        const deliveries = (tag: string) => receiver.deliveries.filter((d) => d.path.endsWith(`/${tag}`));

        /** An offer (with an inline webhook for a fresh tag unless `body.webhook` is given) and its resolved request. */
        const start = async (requestId: string, body: Record<string, unknown> = {}, tenant = 'acme') => {
            const tag = newTag();
            const created = await offer({ requestId, webhook: hook(tag), ...body }, tenant);
            const request = await holder.resolve(created.uri);
            return { ...created, tag, request };
        };
        const pid = (options?: HeldCredential['options'], credential = credentials.pid!): Record<string, HeldCredential> =>
            ({ pid: { format: 'dc+sd-jwt', credential, key: holderKey, ...(options ? { options } : {}) } });
        const mdoc = (options?: HeldCredential['options']): Record<string, HeldCredential> =>
            ({ mdl: { format: 'mso_mdoc', issuerSigned: mdl, key: deviceKey, ...(options ? { options } : {}) } });
        const present = async (request: HolderRequest, held: Record<string, HeldCredential>) => holder.respond(request, await holder.vpToken(request, held));

        /**
         * A failed presentation as spec 7.2/7.3 and the contract describe it: HTTP 400 {error: invalid_request,
         * error_description}, the session failed with failureCode/errorReason/outcome, no credentials, and one webhook
         * with status failed, the same outcome and no credentials or raw tokens.
         */
        const expectFailure = async (answer: WalletAnswer, started: { session: string; tag: string }, expected: { code?: Code; message: string; credential?: Record<string, unknown> }) => {
            expect(answer.status, JSON.stringify(answer.body)).to.equal(400);
            expect(answer.body).to.equal({ error: 'invalid_request', error_description: expected.message });
            const session = await sessionOf(started.session);
            expect(session.status).to.equal('failed');
            expect(session.errorReason).to.equal(expected.message);
            expect(session.credentials).to.not.exist();
            expect(session.responseCode).to.not.exist();
            expect(session.outcome.result).to.equal('failed');
            expect(session.outcome.message).to.equal(expected.message);
            if (expected.code) {
                expect(session.failureCode).to.equal(expected.code);
                expect(session.outcome.error).to.equal(expected.code);
            }
            else {
                expect(session.failureCode).to.not.exist();
                expect(session.outcome.error).to.not.exist();
            }
            if (expected.credential) {
                expect(session.outcome.credentials).to.equal([expected.credential]);
            }
            for (const credential of session.outcome.credentials ?? []) {
                expect(credential.verified).to.be.false();
            }
            const sent = deliveries(started.tag);
            expect(sent).to.have.length(1);
            const { transaction_data: transactionData, ...body } = sent[0]!.body;
            expect(body).to.equal({ status: 'failed', outcome: session.outcome, session: started.session });
            expect(transactionData === undefined || decodeTransactionData(transactionData).length > 0).to.be.true();
            expect(JSON.stringify(sent[0]!.body)).to.not.contain('rawToken');
            return session;
        };
        const coded = (code: keyof typeof MESSAGES, queryId = 'pid') => ({
            code,
            message: MESSAGES[code],
            credential: { id: queryId, format: queryId === 'mdl' ? 'mso_mdoc' : 'dc+sd-jwt', ...(queryId === 'mdl' ? { docType: DOCTYPE } : {}), verified: false, error: code, message: MESSAGES[code] }
        });

        // --- the request object ----------------------------------------------------------------------------------

        it('POST /api/verifier/offer answers 201 {session, uri, crossDeviceUri} with an openid4vp:// link', async () => {
            const created = await offer({ requestId: 'pid', reference: 'order-1' });
            expect(Object.keys(created).sort()).to.equal(['crossDeviceUri', 'session', 'uri']);
            const link = new URL(created.uri);
            expect(link.protocol).to.equal('openid4vp:');
            expect(link.searchParams.get('client_id')!).to.startWith('x509_hash:');
            const requestUri = link.searchParams.get('request_uri')!;
            expect(requestUri).to.match(new RegExp(`^${publicUrl}/presentations/[^/]+/oid4vp/request$`));
            expect(new URL(created.crossDeviceUri).searchParams.get('request_uri_method')).to.equal('post');
            expect(new URL(created.crossDeviceUri).searchParams.get('request_uri')).to.equal(requestUri);
            // Before the wallet fetches the request object the session is active.
            const session = await sessionOf(created.session);
            expect(session).to.include({ id: created.session, type: 'presentation', status: 'active', requestId: 'pid', reference: 'order-1' });
            expect(Date.parse(session.expiresAt) - Date.parse(session.createdAt)).to.be.within(299_000, 301_000);
        });

        it('the library resolves and verifies the signed request object (x509_hash, direct_post.jwt, DCQL, fresh encryption key)', async () => {
            const created = await offer({ requestId: 'pid' });
            const request = await holder.resolve(created.uri);
            const fetched = holder.exchanges.filter((e) => e.url === request.requestUri).at(-1)!;
            expect(fetched.status).to.equal(200);
            expect(fetched.headers['content-type']).to.contain('application/oauth-authz-req+jwt');
            expect(fetched.headers['cache-control']).to.contain('no-store');
            expect(request.resolved.client.prefix).to.equal('x509_hash');
            expect(request.header.typ).to.equal('oauth-authz-req+jwt');
            expect(request.header.alg).to.equal('ES256');
            const x5c = request.header.x5c as string[];
            expect(request.clientId).to.equal(`x509_hash:${x509Hash(x5c[0]!)}`);
            expect(request.clientId).to.equal(new URL(created.uri).searchParams.get('client_id')!);
            const walletNonce = new URL(request.requestUri).pathname.split('/')[2]!;
            const { payload } = request;
            expect(payload.response_type).to.equal('vp_token');
            expect(payload.response_mode).to.equal('direct_post.jwt');
            expect(payload.response_uri).to.equal(`${publicUrl}/presentations/${walletNonce}/oid4vp`);
            expect(payload.nonce).to.be.a.string();
            expect((payload.nonce as string).length).to.be.at.least(16);
            expect(payload.state).to.equal(walletNonce);
            expect(payload.state).to.not.equal(created.session);
            expect(payload.dcql_query).to.equal(PID_QUERY);
            expect(payload.transaction_data).to.not.exist();
            expect(payload.client_metadata.encrypted_response_enc_values_supported).to.only.include(['A128GCM', 'A256GCM']);
            expect(request.encryptionJwk).to.include({ kty: 'EC', crv: 'P-256' });
            expect(request.encryptionJwk.d).to.not.exist();
            // The holder refuses a link whose client_id is not the signed request's.
            const forged = new URL(created.uri);
            forged.searchParams.set('client_id', `x509_hash:${b64url(Crypto.randomBytes(32))}`);
            await expect(holder.resolve(forged.toString())).to.reject();
            // Fetching the request object moved the session from active to fetched.
            expect((await sessionOf(created.session)).status).to.equal('fetched');
            // Another request: another session, nonce and ephemeral encryption key.
            const second = await holder.resolve((await offer({ requestId: 'pid' })).uri);
            expect(second.nonce).to.not.equal(request.nonce);
            expect(second.state).to.not.equal(request.state);
            expect([second.encryptionJwk.x, second.encryptionJwk.y]).to.not.equal([request.encryptionJwk.x, request.encryptionJwk.y]);
        });

        // --- happy paths -----------------------------------------------------------------------------------------

        it('completes an SD-JWT VC presentation: 200 {}, session result fields, webhook with apiKey and raw token', async () => {
            const tag = newTag();
            const created = await offer({ requestId: 'pid', reference: 'order-42', webhook: hook(tag, 'hook', ['pid']) });
            const request = await holder.resolve(created.uri);
            const vpToken = await holder.vpToken(request, pid());
            const answer = await holder.respond(request, vpToken, { enc: 'A256GCM' });
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            expect(answer.body).to.equal({});
            expect(answer.headers['cache-control']).to.contain('no-store');

            const session = await sessionOf(created.session);
            expect(session.status).to.equal('completed');
            expect(session.responseCode).to.be.a.string();
            expect(session.consumedAt).to.be.a.string();
            expect(session.failureCode).to.not.exist();
            expect(session.errorReason).to.not.exist();
            expect(session.reference).to.equal('order-42');
            expect(session.credentials).to.have.length(1);
            expect(session.credentials[0].id).to.equal('pid');
            expect(session.credentials[0].values).to.have.length(1);
            expect(session.credentials[0].values[0]).to.include({ given_name: 'Erika', age_over_18: true });
            expect(session.credentials[0].values[0].family_name).to.not.exist();
            expect(session.credentials[0].values[0].birthdate).to.not.exist();
            expect(session.outcome).to.equal({ result: 'success', credentials: [{ id: 'pid', format: 'dc+sd-jwt', verified: true }] });

            const sent = deliveries(tag);
            expect(sent).to.have.length(1);
            expect(sent[0]!.headers['x-hook-key']).to.equal('hook-secret-123');
            const body = sent[0]!.body;
            expect(Object.keys(body).sort()).to.equal(['credentials', 'outcome', 'reference', 'session', 'status']);
            expect(body).to.include({ status: 'completed', session: created.session, reference: 'order-42' });
            expect(body.outcome).to.equal(session.outcome);
            expect(body.credentials).to.have.length(1);
            expect(body.credentials[0].id).to.equal('pid');
            expect(body.credentials[0].rawToken).to.equal(vpToken.pid![0]);
            expect(body.credentials[0].values).to.have.length(1);
            expect(body.credentials[0].values[0]).to.include({ given_name: 'Erika', age_over_18: true });
            expect(body.credentials[0].values[0].cnf).to.not.exist();
            expect(body.credentials[0].values[0].status).to.not.exist();
            expect(body.credentials[0].values[0].family_name).to.not.exist();
        });

        it('accepts A128GCM, and a request_uri fetched twice', async () => {
            const created = await offer({ requestId: 'pid' });
            const requestUri = new URL(created.uri).searchParams.get('request_uri')!;
            const first = await fetch(requestUri);
            expect(first.status).to.equal(200);
            const firstJar = await first.text();
            const request = await holder.resolve(created.uri);
            expect(Jose.decodeJwt(firstJar).nonce).to.equal(request.nonce);
            const answer = await holder.respond(request, await holder.vpToken(request, pid()), { enc: 'A128GCM' });
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            expect((await sessionOf(created.session)).status).to.equal('completed');
        });

        it('serves the request object by POST (request_uri_method=post, wallet_nonce echoed)', async () => {
            const created = await offer({ requestId: 'pid' });
            const request = await holder.resolve(created.crossDeviceUri);
            expect(holder.exchanges.filter((e) => e.url === request.requestUri).at(-1)!.method).to.equal('POST');
            // By hand, with wallet_nonce: the request object carries it back.
            const byHand = await fetch(request.requestUri, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'wallet_nonce=wn-123&wallet_metadata=%7B%7D' });
            expect(byHand.status).to.equal(200);
            expect(Jose.decodeJwt(await byHand.text()).wallet_nonce).to.equal('wn-123');
            const answer = await present(request, pid());
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            expect((await sessionOf(created.session)).status).to.equal('completed');
        });

        it('answers {redirect_uri} with response_code when a redirect is configured ({sessionId} replaced), or given by the request', async () => {
            const { session, request } = await start('pid-redirect');
            const answer = await present(request, pid());
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            expect(Object.keys(answer.body)).to.equal(['redirect_uri']);
            const target = new URL(answer.body.redirect_uri);
            expect(`${target.origin}${target.pathname}`).to.equal(`https://rp.example/done/${session}`);
            expect(target.searchParams.get('step')).to.equal('1');
            const stored = await sessionOf(session);
            expect(target.searchParams.get('response_code')).to.equal(stored.responseCode);
            expect(stored.status).to.equal('completed');

            // A request's redirectUri overrides the configuration's.
            const overridden = await start('pid-redirect', { redirectUri: 'https://rp.example/request?order=7' });
            const second = await present(overridden.request, pid());
            expect(second.status).to.equal(200);
            const url = new URL(second.body.redirect_uri);
            expect(`${url.origin}${url.pathname}`).to.equal('https://rp.example/request');
            expect(url.searchParams.get('order')).to.equal('7');
            expect(url.searchParams.get('response_code')).to.equal((await sessionOf(overridden.session)).responseCode);
        });

        it('a request\'s redirectUri may carry {sessionId} too (spec 2.1: replaced by the session ID; a request can override it)', async () => {
            const res = await api(admins.acme!, 'POST', '/api/verifier/offer', { requestId: 'pid', redirectUri: 'https://rp.example/request/{sessionId}' });
            expect(res.status, res.payload).to.equal(201);
            const request = await holder.resolve(res.body.uri);
            const answer = await present(request, pid());
            expect(answer.status).to.equal(200);
            const url = new URL(answer.body.redirect_uri);
            expect(url.pathname).to.equal(`/request/${res.body.session}`);
            expect(url.searchParams.get('response_code')).to.equal((await sessionOf(res.body.session)).responseCode);
        });

        it('completes an mdoc (mDL) presentation over the OpenID4VP 1.0 SessionTranscript', async () => {
            const { session, request, tag } = await start('mdl');
            expect(request.payload.dcql_query).to.equal(MDL_QUERY);
            const answer = await present(request, mdoc());
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            const stored = await sessionOf(session);
            expect(stored.status).to.equal('completed');
            expect(stored.credentials).to.equal([{ id: 'mdl', values: [{ [NS]: { family_name: 'Mustermann', age_over_18: true } }] }]);
            expect(stored.outcome).to.equal({ result: 'success', credentials: [{ id: 'mdl', format: 'mso_mdoc', docType: DOCTYPE, verified: true }] });
            const sent = deliveries(tag);
            expect(sent).to.have.length(1);
            expect(sent[0]!.body.credentials).to.equal([{ id: 'mdl', values: [{ [NS]: { family_name: 'Mustermann', age_over_18: true } }] }]);
            expect(sent[0]!.body.credentials[0].rawToken).to.not.exist();
        });

        it('completes a presentation of an SD-JWT VC and an mdoc for one query', async () => {
            const { session, request } = await start('both');
            const answer = await present(request, { ...pid(), ...mdoc() });
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            const stored = await sessionOf(session);
            expect(stored.status).to.equal('completed');
            expect(stored.credentials.map((c: { id: string }) => c.id).sort()).to.equal(['mdl', 'pid']);
            expect(stored.outcome.credentials).to.have.length(2);
        });

        it('binds transaction_data: hashes in the KB-JWT complete the presentation, the webhook carries transaction_data', async () => {
            const { session, request, tag } = await start('pid-tx');
            expect(request.payload.transaction_data).to.have.length(1);
            expect(decodeTransactionData(request.payload.transaction_data)).to.equal([PAYMENT]);
            expect(request.resolved.transactionData).to.have.length(1);
            const vpToken = await holder.vpToken(request, pid());
            const kb = Jose.decodeJwt(vpToken.pid![0]!.split('~').at(-1)!);
            expect(kb.transaction_data_hashes).to.equal([b64url(Crypto.createHash('sha256').update(request.payload.transaction_data[0]).digest())]);
            const answer = await holder.respond(request, vpToken);
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            expect((await sessionOf(session)).status).to.equal('completed');
            const sent = deliveries(tag);
            expect(sent).to.have.length(1);
            expect(decodeTransactionData(sent[0]!.body.transaction_data)).to.equal([PAYMENT]);

            // transaction_data given with the request replaces the configuration's.
            const own = { type: 'org.example.consent', credential_ids: ['pid'], payload: { text: 'I agree' } };
            const overridden = await start('pid-tx', { transaction_data: [own] });
            expect(decodeTransactionData(overridden.request.payload.transaction_data)).to.equal([own]);
            expect((await present(overridden.request, pid())).status).to.equal(200);
        });

        it('GET /api/session/{id} shows transaction_data of a presentation request (spec 2.7)', async () => {
            const { session, request } = await start('pid-tx');
            expect((await present(request, pid())).status).to.equal(200);
            const stored = await sessionOf(session);
            expect(stored.status).to.equal('completed');
            expect(stored.transaction_data, 'transaction_data missing from the session').to.exist();
            expect(decodeTransactionData(stored.transaction_data)).to.equal([PAYMENT]);
        });

        // --- failure codes of spec 7.2 through the response endpoint ---------------------------------------------

        it('signature_invalid: a tampered credential signature', async () => {
            const started = await start('pid');
            await expectFailure(await present(started.request, pid(undefined, credentials.badSignature)), started, coded('signature_invalid'));
        });

        it('signature_invalid: a KB-JWT signed by another key than cnf.jwk', async () => {
            const started = await start('pid');
            const other = await newHolderKey();
            await expectFailure(await present(started.request, pid({ kbKey: other.privateKey })), started, coded('signature_invalid'));
        });

        it('signature_invalid: an mdoc device signature over another SessionTranscript (other nonce)', async () => {
            const started = await start('mdl');
            await expectFailure(await present(started.request, mdoc({ nonce: 'nonce-of-another-request' })), started, coded('signature_invalid', 'mdl'));
        });

        it('signature_invalid: an mdoc device signature over a transcript without the encryption key thumbprint', async () => {
            const started = await start('mdl');
            await expectFailure(await present(started.request, mdoc({ jwkThumbprint: null })), started, coded('signature_invalid', 'mdl'));
        });

        it('no_trust_chain_to_root: an issuer whose root is in no trust list of the tenant', async () => {
            const started = await start('pid');
            await expectFailure(await present(started.request, pid(undefined, credentials.foreign)), started, coded('no_trust_chain_to_root'));
        });

        it('no_trust_chain_to_root: a tenant without any trust list fails closed', async () => {
            const started = await start('pid', {}, 'bare');
            const answer = await present(started.request, pid());
            expect(answer.status).to.equal(400);
            const session = await sessionOf(started.session, 'bare');
            expect(session.status).to.equal('failed');
            expect(session.failureCode).to.equal('no_trust_chain_to_root');
            expect(session.errorReason).to.equal(MESSAGES.no_trust_chain_to_root);
            expect(session.outcome).to.equal({ result: 'failed', error: 'no_trust_chain_to_root', message: MESSAGES.no_trust_chain_to_root, credentials: [coded('no_trust_chain_to_root').credential] });
            expect(answer.body).to.equal({ error: 'invalid_request', error_description: MESSAGES.no_trust_chain_to_root });
        });

        it('trust_chain_not_trusted: the issuer root is only in a wallet-provider entry', async () => {
            const started = await start('pid', {}, 'other');
            const answer = await present(started.request, pid(undefined, credentials.foreign));
            expect(answer.status).to.equal(400);
            expect(answer.body).to.equal({ error: 'invalid_request', error_description: MESSAGES.trust_chain_not_trusted });
            const session = await sessionOf(started.session, 'other');
            expect(session.failureCode).to.equal('trust_chain_not_trusted');
            expect(session.errorReason).to.equal(MESSAGES.trust_chain_not_trusted);
            expect(session.outcome).to.equal({ result: 'failed', error: 'trust_chain_not_trusted', message: MESSAGES.trust_chain_not_trusted, credentials: [coded('trust_chain_not_trusted').credential] });
        });

        it('trusted_authorities: a named trust list replaces the tenant\'s lists (trust_chain_not_trusted), a direct verifierX509Der anchor verifies', async () => {
            const started = await start('pid-wp');
            await expectFailure(await present(started.request, pid()), started, coded('trust_chain_not_trusted'));
            const direct = await start('pid-direct');
            const answer = await present(direct.request, pid());
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            expect((await sessionOf(direct.session)).status).to.equal('completed');
        });

        it('certificate_expired: an issuer certificate (imported key chain) that has expired', async () => {
            const started = await start('pid');
            await expectFailure(await present(started.request, pid(undefined, credentials.expired)), started, coded('certificate_expired'));
        });

        it('x5c_missing: a credential without x5c header', async () => {
            const started = await start('pid');
            await expectFailure(await present(started.request, pid(undefined, credentials.noX5c)), started, coded('x5c_missing'));
        });

        it('verification_error: a malformed presentation', async () => {
            const started = await start('pid');
            await expectFailure(await holder.respond(started.request, { pid: ['this is not an SD-JWT'] }), started, coded('verification_error'));
        });

        it('claim_value_mismatch: names the query and path, never the value; no credentials in outcome, session or webhook', async () => {
            const started = await start('pid');
            const answer = await present(started.request, pid(undefined, credentials.minor));
            expect(answer.status).to.equal(400);
            const message = answer.body.error_description as string;
            expect(message).to.startWith(MISMATCH_PREFIX);
            expect(message.slice(MISMATCH_PREFIX.length)).to.contain('age_over_18');
            expect(message.slice(MISMATCH_PREFIX.length)).to.not.contain('given_name');
            expect(message).to.not.contain('false');
            const session = await expectFailure(answer, started, { code: 'claim_value_mismatch', message });
            expect(session.outcome).to.equal({ result: 'failed', error: 'claim_value_mismatch', message });
            expect(JSON.stringify(session)).to.not.contain('Erika');
            expect(JSON.stringify(deliveries(started.tag)[0]!.body)).to.not.contain('Erika');
        });

        it('claim_value_mismatch is reported before missing claims of the same credential', async () => {
            const started = await start('pid');
            const answer = await present(started.request, pid({ disclose: [['age_over_18']] }, credentials.minor));
            expect(answer.body.error_description as string).to.startWith(MISMATCH_PREFIX);
            expect((await sessionOf(started.session)).failureCode).to.equal('claim_value_mismatch');
        });

        it('failure without a code: missing required credentials', async () => {
            const started = await start('both');
            await expectFailure(await present(started.request, pid()), started, { message: 'Missing required credentials' });
        });

        it('failure without a code: missing required claims', async () => {
            const started = await start('pid');
            const answer = await present(started.request, pid({ disclose: [['given_name']] }));
            expect(answer.body.error_description as string).to.startWith('Missing required claims for credential');
            await expectFailure(answer, started, { message: answer.body.error_description });
        });

        it('failure without a code: several presentations for a query without multiple', async () => {
            const started = await start('pid');
            const [one] = (await holder.vpToken(started.request, pid())).pid!;
            const [two] = (await holder.vpToken(started.request, pid())).pid!;
            const answer = await holder.respond(started.request, { pid: [one!, two!] });
            expect(answer.status).to.equal(400);
            expect(answer.body.error_description as string).to.startWith('Presentation validation failed');
            await expectFailure(answer, started, { message: answer.body.error_description });
        });

        const keyBindingCases: Array<[string, (request: HolderRequest) => HeldCredential['options']]> = [
            ['a wrong KB-JWT nonce', () => ({ nonce: 'not-the-request-nonce' })],
            ['a wrong KB-JWT aud', () => ({ aud: 'x509_hash:c29tZW9uZS1lbHNl' })],
            ['a KB-JWT iat too far in the past', () => ({ iat: Math.floor(Date.now() / 1000) - 3600 })],
            ['a KB-JWT iat in the future', () => ({ iat: Math.floor(Date.now() / 1000) + 3600 })],
            ['a bad sd_hash', () => ({ sdHash: b64url(Crypto.createHash('sha256').update('another presentation~').digest()) })],
            ['a missing KB-JWT although the credential has cnf', () => ({ noKeyBinding: true })]
        ];
        for (const [name, options] of keyBindingCases) {
            it(`failure without a code: invalid key binding with ${name}`, async () => {
                const started = await start('pid');
                const answer = await present(started.request, pid(options(started.request)));
                expect(answer.status).to.equal(400);
                const message = answer.body.error_description as string;
                expect(message).to.startWith('Presentation validation failed');
                expect(message).to.contain('key binding');
                await expectFailure(answer, started, { message });
            });
        }

        it('failure without a code: transaction data hash mismatch', async () => {
            const started = await start('pid-tx');
            const answer = await present(started.request, pid({ transactionDataHashes: [b64url(Crypto.createHash('sha256').update('other transaction').digest())] }));
            expect(answer.status).to.equal(400);
            expect(answer.body.error_description as string).to.startWith('Presentation validation failed');
            expect(answer.body.error_description).to.contain('transaction data hash mismatch');
            await expectFailure(answer, started, { message: answer.body.error_description });
            // The failure webhook still says which transaction data the request had.
            expect(decodeTransactionData(deliveries(started.tag)[0]!.body.transaction_data)).to.equal([PAYMENT]);
        });

        it('a failed presentation with a redirect: 400 with redirect_uri carrying error and error_description', async () => {
            const started = await start('pid-redirect');
            const answer = await present(started.request, pid(undefined, credentials.badSignature));
            expect(answer.status).to.equal(400);
            expect(answer.body.error).to.equal('invalid_request');
            expect(answer.body.error_description).to.equal(MESSAGES.signature_invalid);
            const target = new URL(answer.body.redirect_uri);
            expect(target.pathname).to.equal(`/done/${started.session}`);
            expect(target.searchParams.get('error')).to.equal('invalid_request');
            expect(target.searchParams.get('error_description')).to.equal(MESSAGES.signature_invalid);
            expect(target.searchParams.get('response_code')).to.be.null();
        });

        // --- wallet error responses ------------------------------------------------------------------------------

        it('a wallet decline as form parameters: 200 {}, session failed with the wallet\'s code, webhook failed', async () => {
            const { session, request, tag } = await start('pid', { reference: 'declined-1' });
            const answer = await holder.decline(request, 'access_denied', 'User declined');
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            expect(answer.body).to.equal({});
            const stored = await sessionOf(session);
            const message = 'Wallet error: access_denied: User declined';
            expect(stored.status).to.equal('failed');
            expect(stored.failureCode).to.equal('access_denied');
            expect(stored.errorReason).to.equal(message);
            expect(stored.outcome).to.include({ result: 'failed', error: 'access_denied', message });
            expect(stored.credentials).to.not.exist();
            const sent = deliveries(tag);
            expect(sent).to.have.length(1);
            expect(sent[0]!.body).to.equal({ status: 'failed', outcome: stored.outcome, session, reference: 'declined-1' });
        });

        it('a wallet decline inside a JWE with a redirect: 200 {redirect_uri} with error and error_description', async () => {
            const { session, request, tag } = await start('pid-redirect');
            const answer = await holder.decline(request, 'access_denied', 'User declined', { encrypted: true });
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            const target = new URL(answer.body.redirect_uri);
            expect(target.pathname).to.equal(`/done/${session}`);
            expect(target.searchParams.get('error')).to.equal('access_denied');
            expect(target.searchParams.get('error_description')).to.equal('User declined');
            const stored = await sessionOf(session);
            expect(stored.failureCode).to.equal('access_denied');
            expect(stored.errorReason).to.equal('Wallet error: access_denied: User declined');
            expect(deliveries(tag)[0]!.body.outcome.error).to.equal('access_denied');
            // The answer was the one response: later ones are refused.
            const replay = await holder.decline(request, 'access_denied', 'again');
            expect(replay.status).to.equal(400);
            expect(replay.body.error_description).to.contain('already been used');
        });

        it('a wallet decline of a request with transaction_data: the webhook carries transaction_data (spec 6.2)', async () => {
            const { session, request, tag } = await start('pid-tx');
            const answer = await holder.decline(request, 'access_denied', 'Not now');
            expect(answer.status).to.equal(200);
            expect((await sessionOf(session)).failureCode).to.equal('access_denied');
            const sent = deliveries(tag);
            expect(sent).to.have.length(1);
            expect(sent[0]!.body.transaction_data, 'transaction_data missing from the decline webhook').to.exist();
            expect(decodeTransactionData(sent[0]!.body.transaction_data)).to.equal([PAYMENT]);
        });

        // --- single use, expiry, malformed answers ---------------------------------------------------------------

        it('an expired request: request object and response answer 400 with the expiry message, no webhook', async () => {
            const { session, request, tag } = await start('pid-short');
            const vpToken = await holder.vpToken(request, pid());
            const jwe = await holder.encrypt(request, { vp_token: vpToken, state: request.state });
            await new Promise((resolve) => setTimeout(resolve, 1500));
            const fetched = await fetch(request.requestUri);
            expect(fetched.status).to.equal(400);
            const fetchedBody = await fetched.json() as { error: string; error_description: string };
            expect(fetchedBody.error).to.equal('invalid_request');
            expect(fetchedBody.error_description).to.contain('expired');
            const answer = await holder.post(request, { response: jwe });
            expect(answer.status).to.equal(400);
            expect(answer.body.error).to.equal('invalid_request');
            expect(answer.body.error_description).to.contain('expired');
            const declined = await holder.decline(request, 'access_denied', 'late');
            expect(declined.status).to.equal(400);
            const stored = await sessionOf(session);
            expect(stored.status).to.not.equal('completed');
            expect(stored.status).to.not.equal('failed');
            expect(stored.responseCode).to.not.exist();
            expect(deliveries(tag)).to.have.length(0);
        });

        it('a replayed response and a request object of a finished session answer 400', async () => {
            const { session, request, tag } = await start('pid');
            const first = await present(request, pid());
            expect(first.status).to.equal(200);
            const replay = await holder.post(request, { response: first.jwe });
            expect(replay.status).to.equal(400);
            expect(replay.body.error).to.equal('invalid_request');
            expect(replay.body.error_description).to.contain('already been used');
            const again = await fetch(request.requestUri);
            expect(again.status).to.equal(400);
            const stored = await sessionOf(session);
            expect(stored.status).to.equal('completed');
            expect(deliveries(tag)).to.have.length(1);
        });

        it('two concurrent responses: exactly one 200 and one 400, one webhook', async () => {
            for (let round = 0; round < 3; round++) {
                const { session, request, tag } = await start('pid');
                const vpToken = await holder.vpToken(request, pid());
                const [a, b] = await Promise.all([holder.postEncrypted(request, vpToken), holder.postEncrypted(request, vpToken)]);
                expect([a.status, b.status].sort(), JSON.stringify([a.body, b.body])).to.equal([200, 400]);
                const loser = a.status === 400 ? a : b;
                expect(loser.body.error_description).to.contain('already been used');
                expect((await sessionOf(session)).status).to.equal('completed');
                expect(deliveries(tag)).to.have.length(1);
            }
        });

        it('a response before the request object was fetched answers 400 and the session stays active (contract)', async () => {
            const tag = newTag();
            const created = await offer({ requestId: 'pid', webhook: hook(tag) });
            const walletNonce = new URL(new URL(created.uri).searchParams.get('request_uri')!).pathname.split('/')[2]!;
            const early = await holder.post({ responseUri: `${publicUrl}/presentations/${walletNonce}/oid4vp` }, { error: 'access_denied', error_description: 'too early', state: walletNonce });
            expect(early.status).to.equal(400);
            expect(early.body.error).to.equal('invalid_request');
            expect(early.body.error_description).to.contain('not been fetched');
            const stored = await sessionOf(created.session);
            expect(stored.status).to.equal('active');
            expect(stored.failureCode).to.not.exist();
            expect(deliveries(tag)).to.have.length(0);
            // Once fetched, the presentation completes.
            const answer = await present(await holder.resolve(created.uri), pid());
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            expect((await sessionOf(created.session)).status).to.equal('completed');
        });

        it('an encrypted response that is not a JSON object (null, number, string, array) answers 400; the session can still complete', async () => {
            const { session, request, tag } = await start('pid');
            for (const plaintext of ['null', '42', '"text"', '[1,2]', 'true']) {
                const jwe = await new Jose.CompactEncrypt(new TextEncoder().encode(plaintext))
                    .setProtectedHeader({ alg: 'ECDH-ES', enc: 'A128GCM', kid: request.encryptionJwk.kid! })
                    .encrypt(await Jose.importJWK({ ...request.encryptionJwk, alg: 'ECDH-ES' }, 'ECDH-ES'));
                const answer = await holder.post(request, { response: jwe });
                expect(answer.status, `${plaintext}: ${JSON.stringify(answer.body)}`).to.equal(400);
                expect(answer.body.error).to.equal('invalid_request');
            }
            expect((await sessionOf(session)).status).to.equal('fetched');
            const answer = await present(request, pid());
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            expect((await sessionOf(session)).status).to.equal('completed');
            expect(deliveries(tag)).to.have.length(1);
        });

        it('a wallet error with a NUL in error inside the JWE answers 400 and leaves the session open to complete (no stuck claim)', async () => {
            const { session, request, tag } = await start('pid');
            for (const error of ['access\u0000denied', 'access_denied\n', 'ä']) {
                const answer = await holder.decline(request, error, 'x', { encrypted: true });
                expect(answer.status, JSON.stringify(answer.body)).to.equal(400);
                expect(answer.body.error).to.equal('invalid_request');
            }
            const open = await sessionOf(session);
            expect(open.status).to.equal('fetched');
            expect(open.consumedAt).to.not.exist();
            expect(open.failureCode).to.not.exist();
            expect(deliveries(tag)).to.have.length(0);
            const answer = await present(request, pid());
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            expect((await sessionOf(session)).status).to.equal('completed');
            expect(deliveries(tag)).to.have.length(1);
        });

        it('a wallet error_description with a NUL is recorded display-safe', async () => {
            const { session, request, tag } = await start('pid');
            const answer = await holder.decline(request, 'access_denied', 'bad\u0000reason', { encrypted: true });
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            const stored = await sessionOf(session);
            expect(stored.status).to.equal('failed');
            expect(stored.failureCode).to.equal('access_denied');
            expect(stored.errorReason).to.equal('Wallet error: access_denied: bad\uFFFDreason');
            expect(deliveries(tag)).to.have.length(1);
        });

        it('a failure whose reason quotes a NUL the wallet sent is recorded display-safe (the verifier gets a result)', async () => {
            const started = await start('pid');
            const [token] = (await holder.vpToken(started.request, pid())).pid!;
            const answer = await holder.postEncrypted(started.request, { 'p\u0000id': [token!] });
            expect(answer.status, JSON.stringify(answer.body)).to.equal(400);
            await expectFailure(answer, started, { message: 'Presentation validation failed: vp_token names unknown credential query p\uFFFDid' });
        });

        it('when recording the outcome fails, the session is not left claimed: a later response completes it', async () => {
            const knex = t.server.db.knex;
            const trigger = 'hallmark_test_fault';
            if (dialect === 'postgres') {
                await knex.raw(`create function ${trigger}() returns trigger as $$ begin raise exception 'injected write failure'; end $$ language plpgsql`);
                await knex.raw(`create trigger ${trigger} before update on sessions for each row when (new.error_reason like '%fault-injection%') execute function ${trigger}()`);
            }
            else {
                await knex.raw(`create trigger ${trigger} before update on sessions when new.error_reason like '%fault-injection%' begin select raise(abort, 'injected write failure'); end`);
            }
            try {
                const { session, request, tag } = await start('pid');
                const refused = await holder.decline(request, 'access_denied', 'fault-injection', { encrypted: true });
                expect(refused.status).to.equal(500);
                const open = await sessionOf(session);
                expect(open.status).to.equal('fetched');
                expect(open.consumedAt).to.not.exist();
                expect(deliveries(tag)).to.have.length(0);
                const answer = await present(request, pid());
                expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
                expect((await sessionOf(session)).status).to.equal('completed');
                expect(deliveries(tag)).to.have.length(1);
            }
            finally {
                await knex.raw(`drop trigger ${trigger}${dialect === 'postgres' ? ' on sessions' : ''}`);
                if (dialect === 'postgres') {
                    await knex.raw(`drop function ${trigger}()`);
                }
            }
        });

        it('a tampered JWE or one for another key answers 400 and leaves the session open', async () => {
            const { session, request, tag } = await start('pid');
            const vpToken = await holder.vpToken(request, pid());
            const jwe = await holder.encrypt(request, { vp_token: vpToken, state: request.state });
            const parts = jwe.split('.');
            const ciphertext = Buffer.from(parts[3]!, 'base64url');
            ciphertext[0] ^= 0x01;
            parts[3] = b64url(ciphertext);
            const tampered = await holder.post(request, { response: parts.join('.') });
            expect(tampered.status).to.equal(400);
            expect(tampered.body.error).to.equal('invalid_request');
            const otherKey = await Jose.exportJWK((await Jose.generateKeyPair('ECDH-ES', { crv: 'P-256', extractable: true })).publicKey);
            const wrongKey = await holder.post(request, { response: await holder.encrypt(request, { vp_token: vpToken, state: request.state }, { jwk: otherKey }) });
            expect(wrongKey.status).to.equal(400);
            expect(wrongKey.body.error).to.equal('invalid_request');
            expect((await sessionOf(session)).status).to.equal('fetched');
            expect(deliveries(tag)).to.have.length(0);
        });

        it('an unknown walletNonce answers 404 at the request and response endpoints', async () => {
            const unknown = `${publicUrl}/presentations/${Crypto.randomBytes(24).toString('base64url')}`;
            const fetched = await fetch(`${unknown}/oid4vp/request`);
            expect(fetched.status).to.equal(404);
            const answer = await holder.post({ responseUri: `${unknown}/oid4vp` }, { response: 'a.b.c.d.e' });
            expect(answer.status).to.equal(404);
        });

        // --- webhooks --------------------------------------------------------------------------------------------

        it('a receiver answering {redirectUri} overrides the redirect, on success and on failure', async () => {
            const tag = newTag();
            const created = await offer({ requestId: 'pid-redirect', webhook: hook(tag, 'redirect') });
            const answer = await present(await holder.resolve(created.uri), pid());
            expect(answer.status).to.equal(200);
            const target = new URL(answer.body.redirect_uri);
            expect(`${target.origin}${target.pathname}`).to.equal('https://override.example/after');
            expect(target.searchParams.get('from')).to.equal('hook');
            expect(target.searchParams.get('response_code')).to.equal((await sessionOf(created.session)).responseCode);

            const failTag = newTag();
            const failing = await offer({ requestId: 'pid', webhook: hook(failTag, 'redirect') });
            const failed = await present(await holder.resolve(failing.uri), pid(undefined, credentials.badSignature));
            expect(failed.status).to.equal(400);
            const failTarget = new URL(failed.body.redirect_uri);
            expect(`${failTarget.origin}${failTarget.pathname}`).to.equal('https://override.example/after');
            expect(failTarget.searchParams.get('error')).to.equal('invalid_request');
            expect(failTarget.searchParams.get('error_description')).to.equal(MESSAGES.signature_invalid);

            const declineTag = newTag();
            const declining = await offer({ requestId: 'pid-redirect', webhook: hook(declineTag, 'redirect') });
            const declined = await holder.decline(await holder.resolve(declining.uri), 'access_denied', 'User declined');
            expect(declined.status).to.equal(200);
            const declineTarget = new URL(declined.body.redirect_uri);
            expect(`${declineTarget.origin}${declineTarget.pathname}`).to.equal('https://override.example/after');
            expect(declineTarget.searchParams.get('error')).to.equal('access_denied');
            expect(declineTarget.searchParams.get('error_description')).to.equal('User declined');
        });

        it('a receiver that is down or answers 503 changes nothing', async () => {
            const down = await offer({ requestId: 'pid-redirect', webhook: { url: downUrl } });
            const answer = await present(await holder.resolve(down.uri), pid());
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            expect(new URL(answer.body.redirect_uri).pathname).to.equal(`/done/${down.session}`);
            expect((await sessionOf(down.session)).status).to.equal('completed');

            const tag = newTag();
            const failing = await offer({ requestId: 'pid', webhook: hook(tag, 'fail') });
            const second = await present(await holder.resolve(failing.uri), pid());
            expect(second.status).to.equal(200);
            expect(second.body).to.equal({});
            expect(deliveries(tag)).to.have.length(1);
            expect((await sessionOf(failing.session)).status).to.equal('completed');

            const declined = await offer({ requestId: 'pid', webhook: { url: downUrl } });
            const decline = await holder.decline(await holder.resolve(declined.uri), 'access_denied', 'no');
            expect(decline.status).to.equal(200);
            expect((await sessionOf(declined.session)).failureCode).to.equal('access_denied');
        });

        it('uses the configuration\'s webhookEndpointId when the request has no inline webhook, without raw tokens', async () => {
            const created = await offer({ requestId: 'pid-hooked', reference: 'via-endpoint' });
            const before = deliveries('pid-hooked').length;
            const answer = await present(await holder.resolve(created.uri), pid());
            expect(answer.status).to.equal(200);
            const sent = deliveries('pid-hooked');
            expect(sent).to.have.length(before + 1);
            const delivery = sent.at(-1)!;
            expect(delivery.path).to.equal('/endpoint/pid-hooked');
            expect(delivery.headers['x-endpoint-key']).to.equal('endpoint-secret-1');
            expect(delivery.body).to.include({ status: 'completed', session: created.session, reference: 'via-endpoint' });
            expect(delivery.body.credentials[0].rawToken).to.not.exist();

            // An inline webhook replaces the configured endpoint.
            const tag = newTag();
            const inline = await offer({ requestId: 'pid-hooked', webhook: hook(tag) });
            expect((await present(await holder.resolve(inline.uri), pid())).status).to.equal(200);
            expect(deliveries(tag)).to.have.length(1);
            expect(deliveries('pid-hooked')).to.have.length(before + 1);
        });

        it('the configuration\'s webhook endpoint is resolved when the request is made: a later change or deletion does not move the result', async () => {
            await create('acme', '/api/issuer/webhook-endpoints', { id: 'moving', name: 'Moving', url: `${receiver.url}/endpoint/moving-original`, auth: { type: 'apiKey', config: { headerName: 'x-endpoint-key', value: 'moving-secret-1' } } });
            await create('acme', '/api/verifier/config', { id: 'pid-moving', dcql_query: PID_QUERY, webhookEndpointId: 'moving' });
            const changed = await offer({ requestId: 'pid-moving' });
            const deleted = await offer({ requestId: 'pid-moving' });
            // The session keeps the target sealed: the endpoint's secret is not in the stored row as plain text.
            const row = await t.server.db.knex('sessions').where({ id: changed.session }).first();
            expect(JSON.stringify(row)).to.not.contain('moving-secret-1');

            const patched = await api(admins.acme!, 'PATCH', '/api/issuer/webhook-endpoints/moving', { url: `${receiver.url}/endpoint/moving-changed`, auth: { type: 'apiKey', config: { headerName: 'x-endpoint-key', value: 'moving-secret-2' } } });
            expect(patched.status, patched.payload).to.equal(200);
            expect((await present(await holder.resolve(changed.uri), pid())).status).to.equal(200);
            expect(deliveries('moving-changed')).to.have.length(0);
            const sent = deliveries('moving-original');
            expect(sent).to.have.length(1);
            expect(sent[0]!.body.session).to.equal(changed.session);
            expect(sent[0]!.headers['x-endpoint-key']).to.equal('moving-secret-1');

            expect((await api(admins.acme!, 'PATCH', '/api/verifier/config/pid-moving', { webhookEndpointId: null })).status).to.equal(200);
            expect((await api(admins.acme!, 'DELETE', '/api/issuer/webhook-endpoints/moving')).status).to.equal(204);
            expect((await present(await holder.resolve(deleted.uri), pid())).status).to.equal(200);
            expect(deliveries('moving-original')).to.have.length(2);
            expect(deliveries('moving-original')[1]!.body.session).to.equal(deleted.session);
            // A request made now, without an endpoint, sends nothing.
            const none = await offer({ requestId: 'pid-moving' });
            expect((await present(await holder.resolve(none.uri), pid())).status).to.equal(200);
            expect(receiver.deliveries.filter((d) => d.body?.session === none.session)).to.have.length(0);
        });

        it('presented values leave out cnf and status in the session and the webhook (spec 6.2, contract)', async () => {
            const withStatus = await issueSdJwtVc(t.server.signing, {
                tenantId: 'acme', keyChainId: 'issuer', issuer: `${publicUrl}/issuers/acme`, vct: PID_VCT,
                claims: { given_name: 'Erika', family_name: 'Mustermann', birthdate: '1964-08-12', age_over_18: true }, fields: PID_FIELDS,
                holderJwk: holderKey.publicJwk, status: { status_list: { idx: 7, uri: 'https://status.example/lists/1' } }
            });
            const { session, request, tag } = await start('pid-no-status-check');
            const answer = await present(request, pid(undefined, withStatus));
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            const stored = await sessionOf(session);
            expect(stored.status).to.equal('completed');
            const values = stored.credentials[0].values[0];
            expect(values).to.include({ given_name: 'Erika', age_over_18: true, vct: PID_VCT });
            expect(values.cnf).to.not.exist();
            expect(values.status).to.not.exist();
            const sent = deliveries(tag);
            expect(sent).to.have.length(1);
            expect(sent[0]!.body.credentials[0].values).to.equal(stored.credentials[0].values);
        });

        it('includeRawTokensFor must name DCQL credential ids', async () => {
            const res = await api(admins.acme!, 'POST', '/api/verifier/offer', { requestId: 'pid', webhook: { ...hook('x'), includeRawTokensFor: ['nope'] } });
            expect(res.status).to.equal(400);
        });

        // --- management ------------------------------------------------------------------------------------------

        it('allowedPresentationConfigs: another configuration answers 403', async () => {
            const allowed = await api(restricted, 'POST', '/api/verifier/offer', { requestId: 'pid' });
            expect(allowed.status, allowed.payload).to.equal(201);
            const denied = await api(restricted, 'POST', '/api/verifier/offer', { requestId: 'mdl' });
            expect(denied.status).to.equal(403);
        });

        it('an unknown requestId answers 400', async () => {
            const res = await api(admins.acme!, 'POST', '/api/verifier/offer', { requestId: 'does-not-exist' });
            expect(res.status).to.equal(400);
            expect(res.body).to.include({ statusCode: 400 });
        });

        it('another tenant\'s session answers 404', async () => {
            const created = await offer({ requestId: 'pid' });
            const res = await api(admins.other!, 'GET', `/api/session/${created.session}`);
            expect(res.status).to.equal(404);
        });

        it('request transaction_data follows the configuration\'s rules: TS12 types must be supported and their payloads valid', async () => {
            const payment = { type: 'urn:eudi:sca:payment:1', credential_ids: ['pid'], payload: { transaction_id: 'tx-1', payee: { name: 'Acme Shop', id: 'DE-123' }, currency: 'EUR', amount: 42 } };
            const unsupported = await api(admins.acme!, 'POST', '/api/verifier/offer', { requestId: 'pid', transaction_data: [{ type: 'urn:eudi:sca:not_a_type:1', credential_ids: ['pid'], payload: {} }] });
            expect(unsupported.status).to.equal(400);
            expect(unsupported.body.message).to.contain('not a supported TS12 transaction data type');
            const badPayload = await api(admins.acme!, 'POST', '/api/verifier/offer', { requestId: 'pid', transaction_data: [{ ...payment, payload: { ...payment.payload, currency: 'euro' } }] });
            expect(badPayload.status).to.equal(400);
            expect(badPayload.body.message).to.contain('currency');
            const noPayload = await api(admins.acme!, 'POST', '/api/verifier/offer', { requestId: 'pid', transaction_data: [{ type: payment.type, credential_ids: ['pid'] }] });
            expect(noPayload.status).to.equal(400);
            const unknownId = await api(admins.acme!, 'POST', '/api/verifier/offer', { requestId: 'pid', transaction_data: [{ ...payment, credential_ids: ['nope'] }] });
            expect(unknownId.status).to.equal(400);
            expect(unknownId.body.details[0].path).to.equal('transaction_data.0.credential_ids.0');
            const valid = await api(admins.acme!, 'POST', '/api/verifier/offer', { requestId: 'pid', transaction_data: [payment] });
            expect(valid.status, valid.payload).to.equal(201);
            const request = await holder.resolve(valid.body.uri);
            expect(decodeTransactionData(request.payload.transaction_data)).to.equal([payment]);
        });

        it('openid_federation authorities fail closed with verification_error, and an aki naming no anchor of the tenant with no_trust_chain_to_root, instead of using the tenant\'s lists', async () => {
            const federation = await start('pid-federation');
            await expectFailure(await present(federation.request, pid()), federation, coded('verification_error'));
            // aki picks the anchors with that key identifier (docs/trust.md); this one names none.
            const aki = await start('pid-aki');
            await expectFailure(await present(aki.request, pid()), aki, coded('no_trust_chain_to_root'));
            // Beside an etsi_tl authority they add nothing: the named list decides.
            const mixed = await start('pid-federation-or-list');
            expect((await present(mixed.request, pid())).status).to.equal(200);
        });

        it('a request\'s skewSeconds has no upper bound (spec: minimum 0) and is applied', async () => {
            expect((await api(admins.acme!, 'POST', '/api/verifier/offer', { requestId: 'pid', skewSeconds: -1 })).status).to.equal(400);
            expect((await api(admins.acme!, 'POST', '/api/verifier/offer', { requestId: 'pid', skewSeconds: 1.5 })).status).to.equal(400);
            const started = await start('pid', { skewSeconds: 7200 });
            // A KB-JWT issued an hour ahead is within a skew of two hours (the default of 60 s refuses it).
            const answer = await present(started.request, pid({ iat: Math.floor(Date.now() / 1000) + 3600 }));
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            expect((await sessionOf(started.session)).status).to.equal('completed');
        });

        it('accessKeyChainId must name a key chain of usage access (POST and PATCH)', async () => {
            const refused = await api(admins.acme!, 'POST', '/api/verifier/config', { id: 'signed-by-issuer', dcql_query: PID_QUERY, accessKeyChainId: 'issuer' });
            expect(refused.status).to.equal(400);
            expect(refused.body.details).to.equal([{ path: 'accessKeyChainId', message: 'key chain issuer has usageType attestation, not access' }]);
            const created = await api(admins.acme!, 'POST', '/api/verifier/config', { id: 'signed-by-verifier', dcql_query: PID_QUERY, accessKeyChainId: 'verifier' });
            expect(created.status, created.payload).to.equal(201);
            const patched = await api(admins.acme!, 'PATCH', '/api/verifier/config/signed-by-verifier', { accessKeyChainId: 'issuer' });
            expect(patched.status).to.equal(400);
            expect((await api(admins.acme!, 'GET', '/api/verifier/config/signed-by-verifier')).body.accessKeyChainId).to.equal('verifier');
        });

        it('a trustListId in trusted_authorities must name a trust list of the tenant (MISSING_RESOURCE_REFERENCE)', async () => {
            const query = (trustListId: string) => ({ credentials: [{ ...PID_QUERY.credentials[0], trusted_authorities: [{ type: 'etsi_tl', values: [{ verifierX509Der: 'MIIB' }, { trustListId }] }] }] });
            const refused = await api(admins.acme!, 'POST', '/api/verifier/config', { id: 'named-list', dcql_query: query('no-such-list') });
            expect(refused.status).to.equal(400);
            expect(refused.body.details).to.equal([{ path: 'dcql_query.credentials.0.trusted_authorities.0.values.1.trustListId', message: 'MISSING_RESOURCE_REFERENCE: no TrustList no-such-list' }]);
            // Trust lists are per tenant: another tenant's list is missing too.
            expect((await api(admins.acme!, 'POST', '/api/verifier/config', { id: 'named-list', dcql_query: query('wallets') })).status).to.equal(400);
            expect((await api(admins.acme!, 'POST', '/api/verifier/config', { id: 'named-list', dcql_query: query('acme') })).status).to.equal(201);
            expect((await api(admins.acme!, 'PATCH', '/api/verifier/config/named-list', { dcql_query: query('no-such-list') })).status).to.equal(400);
            // A named trust list cannot be deleted while the configuration names it.
            const inUse = await api(admins.acme!, 'DELETE', '/api/trust-lists/acme');
            expect(inUse.status).to.equal(409);
            expect(inUse.body.message).to.contain('PresentationConfig named-list');
            expect((await api(admins.acme!, 'GET', '/api/trust-lists/acme')).status).to.equal(200);
        });

        it('PATCH with flat registrationCert* fields replaces a stored registration_cert (spec 2.1); registration_cert sent beside them wins', async () => {
            const created = await api(admins.acme!, 'POST', '/api/verifier/config', { id: 'registered', dcql_query: PID_QUERY, registration_cert: { id: 'reg-old', body: { privacy_policy: 'https://rp.example/old' } } });
            expect(created.status, created.payload).to.equal(201);
            const patched = await api(admins.acme!, 'PATCH', '/api/verifier/config/registered', {
                registrationCertImportId: 'reg-new',
                registrationCertBodyPrivacyPolicy: 'https://rp.example/privacy',
                registrationCertBodyPurpose: [{ lang: 'en', content: 'Age check' }]
            });
            expect(patched.status, patched.payload).to.equal(200);
            const expected = { id: 'reg-new', body: { privacy_policy: 'https://rp.example/privacy', purpose: [{ lang: 'en', content: 'Age check' }] } };
            expect(patched.body.registration_cert).to.equal(expected);
            expect(patched.body.registrationCertImportId).to.not.exist();
            const read = await api(admins.acme!, 'GET', '/api/verifier/config/registered');
            expect(read.body.registration_cert).to.equal(expected);
            const both = await api(admins.acme!, 'PATCH', '/api/verifier/config/registered', { registration_cert: { jwt: 'eyJ.kept.jwt' }, registrationCertImportId: 'ignored' });
            expect(both.status, both.payload).to.equal(200);
            expect(both.body.registration_cert).to.equal({ jwt: 'eyJ.kept.jwt' });
            // A PATCH of other fields keeps the stored registration_cert.
            const other = await api(admins.acme!, 'PATCH', '/api/verifier/config/registered', { lifeTime: 90 });
            expect(other.body.registration_cert).to.equal({ jwt: 'eyJ.kept.jwt' });
        });

        it('presentation configuration CRUD: strict schema, DCQL rules, read-only fields', async () => {
            const base = { id: 'crud', dcql_query: PID_QUERY };
            expect((await api(admins.acme!, 'POST', '/api/verifier/config', { ...base, unknownField: true })).status).to.equal(400);
            expect((await api(admins.acme!, 'POST', '/api/verifier/config', { ...base, dcql_query: { credentials: [] } })).status).to.equal(400);
            expect((await api(admins.acme!, 'POST', '/api/verifier/config', { ...base, createdAt: new Date().toISOString() })).status).to.equal(400);
            expect((await api(admins.acme!, 'POST', '/api/verifier/config', { ...base, dcql_query: { credentials: [PID_QUERY.credentials[0], PID_QUERY.credentials[0]] } })).status).to.equal(400);
            const badSets = { credentials: [{ ...PID_QUERY.credentials[0], claims: [{ id: 'a', path: ['given_name'] }], claim_sets: [['b']] }] };
            expect((await api(admins.acme!, 'POST', '/api/verifier/config', { ...base, dcql_query: badSets })).status).to.equal(400);
            expect((await api(admins.acme!, 'POST', '/api/verifier/config', { ...base, dcql_query: { credentials: [{ ...PID_QUERY.credentials[0], claims: [{ path: ['age_over_18'], values: [] }] }] } })).status).to.equal(400);

            const created = await api(admins.acme!, 'POST', '/api/verifier/config', base);
            expect(created.status, created.payload).to.equal(201);
            const read = await api(admins.acme!, 'GET', '/api/verifier/config/crud');
            expect(read.status).to.equal(200);
            expect(read.body.createdAt).to.be.a.string();
            expect(read.body.dcql_query).to.equal(PID_QUERY);
            expect((await api(admins.acme!, 'PATCH', '/api/verifier/config/crud', { createdAt: new Date().toISOString() })).status).to.equal(400);
            expect((await api(admins.acme!, 'PATCH', '/api/verifier/config/crud', { unknownField: 1 })).status).to.equal(400);
            const patched = await api(admins.acme!, 'PATCH', '/api/verifier/config/crud', { lifeTime: 120 });
            expect(patched.status, patched.payload).to.equal(200);
            expect(patched.body.lifeTime).to.equal(120);
            const made = await offer({ requestId: 'crud' });
            const session = await sessionOf(made.session);
            expect(Date.parse(session.expiresAt) - Date.parse(session.createdAt)).to.be.within(119_000, 121_000);
            expect((await api(admins.acme!, 'DELETE', '/api/verifier/config/crud')).status).to.equal(204);
            expect((await api(admins.acme!, 'GET', '/api/verifier/config/crud')).status).to.equal(404);
        });
    });
}
