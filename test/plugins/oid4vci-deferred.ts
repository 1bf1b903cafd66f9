import Crypto from 'node:crypto';
import Fs from 'node:fs';
import Path from 'node:path';
import { cborDecode, parseIssuerSigned, type DataItem } from '@animo-id/mdoc';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import type { RequestDpopOptions } from '@openid4vc/oauth2';
import type { IssuerMetadataResult } from '@openid4vc/openid4vci';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { freePort, startReceiver, type Receiver } from '../helpers/net';
import { startTestServer, type TestServer } from '../helpers/server';
import { DEFERRED_TIDY_UP_JOB, transactionHash } from '../../plugins/oid4vci/services/deferred';
import { sameKey, verifyMdoc, verifySdJwtVc, Wallet, type HolderKey } from '../helpers/wallet';

/**
 * Deferred issuance (contract "Authorization code flow", deferred paragraph; spec 3.1): an attribute provider on a
 * real HTTP server answers `{deferred: true, interval: 5}`; the wallet (@openid4vc/openid4vci) gets 202 with a
 * transaction, polls the deferred credential endpoint (issuance_pending), the issuer backend completes or fails the
 * transaction, and the wallet gets the credentials once. Credentials are checked with code independent of the service.
 */

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const CONFIG = Path.join(__dirname, '..', '..', 'examples', 'config');
const spec = (...parts: string[]) => (JSON.parse(Fs.readFileSync(Path.join(CONFIG, 'demo', ...parts), 'utf8')) as { spec: Record<string, any> }).spec;
const PID = spec('issuance', 'credentials', 'pid.json');
const MDL = spec('issuance', 'credentials', 'mdl.json');
const ISSUER_KEY_CHAIN = spec('key-chains', 'issuer.json');
const MDL_NS = 'org.iso.18013.5.1';
const MDL_DOCTYPE = 'org.iso.18013.5.1.mDL';
const CONCURRENT = 20;
const INTERVAL = 7;

interface Deferral {
    session: string;
    wallet: Wallet;
    issuerMetadata: IssuerMetadataResult;
    accessToken: string;
    transactionId: string;
    interval: number;
    holderKey: HolderKey;
    status: number;
    dpop?: RequestDpopOptions;
}

for (const dialect of DIALECTS) {
    describe(`OID4VCI deferred issuance (${dialect})`, () => {
        let t: TestServer;
        let publicUrl: string;
        let offerer: string;
        let otherOfferer: string;
        let configurer: string;
        let admin: string;
        let provider: Receiver;
        let webhook: Receiver;

        const api = async (token: string, method: string, url: string, payload?: unknown) => {
            const res = await t.server.inject({ method, url, headers: bearer(token), ...(payload !== undefined ? { payload: payload as object } : {}) });
            return { status: res.statusCode, body: res.result as any, payload: res.payload };
        };
        const complete = (transactionId: string, body: unknown, token = offerer) => api(token, 'POST', `/api/issuer/deferred/${encodeURIComponent(transactionId)}/complete`, body);
        const fail = (transactionId: string, body: unknown, token = offerer) => api(token, 'POST', `/api/issuer/deferred/${encodeURIComponent(transactionId)}/fail`, body);
        /** The deferred credential endpoint, as a plain HTTP request with the bearer token. */
        const fetchDeferred = (accessToken: string, body: unknown) =>
            t.server.inject({ method: 'POST', url: '/issuers/demo/vci/deferred_credential', headers: bearer(accessToken), payload: body as object });
        const expectOAuthError = (res: { statusCode: number; result: any; payload: string }, error: string) => {
            expect(res.statusCode, res.payload).to.equal(400);
            expect(res.result.error, res.payload).to.equal(error);
            expect(res.result.error_description, res.payload).to.be.a.string();
        };
        const allocations = async (session: string) => (await t.server.db.knex('status_allocations').where({ sessionId: session })) as Array<{ listId: string; idx: number }>;
        const row = async (transactionId: string) => t.server.db.knex('deferred_issuances').where({ id: transactionHash(transactionId) }).first();

        /** Offer, token, nonce and a credential request the attribute provider defers, with the wallet library. */
        const deferredRequest = async (configurationId: string, offerExtra: Record<string, unknown> = {}, options: { dpop?: boolean } = {}): Promise<Deferral> => {
            const offered = await api(offerer, 'POST', '/api/issuer/offer', { credentialConfigurationIds: [configurationId], ...offerExtra });
            expect(offered.status, offered.payload).to.equal(201);
            const wallet = new Wallet();
            const offer = await wallet.client.resolveCredentialOffer(offered.body.uri);
            const issuerMetadata = await wallet.client.resolveIssuerMetadata(offer.credential_issuer);
            const dpopKey = options.dpop ? await wallet.key() : undefined;
            const token = await wallet.client.retrievePreAuthorizedCodeAccessTokenFromOffer({ credentialOffer: offer, issuerMetadata, ...(dpopKey ? { dpop: { signer: wallet.jwkSigner(dpopKey) } } : {}) });
            const dpop = dpopKey ? token.dpop ?? { signer: wallet.jwkSigner(dpopKey) } : undefined;
            const accessToken = token.accessTokenResponse.access_token;
            const { c_nonce: nonce } = await wallet.client.requestNonce({ issuerMetadata });
            const holderKey = await wallet.key();
            const [jwt] = await wallet.proofs(issuerMetadata, configurationId, nonce, [holderKey]);
            const { credentialResponse } = await wallet.client.retrieveCredentials({ issuerMetadata, credentialConfigurationId: configurationId, accessToken, proofs: { jwt: [jwt!] }, ...(dpop ? { dpop } : {}) });
            expect(credentialResponse.credentials).to.not.exist();
            expect(credentialResponse.transaction_id).to.be.a.string();
            return {
                session: offered.body.session,
                wallet,
                issuerMetadata,
                accessToken,
                transactionId: credentialResponse.transaction_id!,
                interval: credentialResponse.interval!,
                holderKey,
                status: wallet.exchange('/vci/credential')!.status,
                ...(dpop ? { dpop } : {})
            };
        };
        /**
         * The deferred credential endpoint through the wallet library; the answer as it went over the wire. @openid4vc/openid4vci
         * 0.4.6 refuses a deferred response with both credentials and notification_id (its check of OpenID4VCI 1.0's rule
         * "notification_id MUST NOT be present if credentials is not" is inverted), so a ready answer is taken from the
         * recorded exchange when the library refused it for exactly that.
         */
        const retrieve = async (deferral: Deferral, accessToken = deferral.accessToken): Promise<{ status: number; body: any }> => {
            const before = deferral.wallet.exchanges.length;
            try {
                const res = await deferral.wallet.client.retrieveDeferredCredentials({ issuerMetadata: deferral.issuerMetadata, accessToken, transactionId: deferral.transactionId, ...(deferral.dpop ? { dpop: deferral.dpop } : {}) });
                return { status: res.response.status, body: res.deferredCredentialResponse };
            }
            catch (err) {
                expect(deferral.wallet.exchanges.length, (err as Error).message).to.equal(before + 1);
                const exchange = deferral.wallet.exchange('/vci/deferred_credential')!;
                const body = JSON.parse(exchange.responseBody);
                if (exchange.status === 200) {
                    const issues = (err as { response?: { deferredCredentialResponseResult?: { error?: { issues?: Array<{ message: string }> } } } }).response?.deferredCredentialResponseResult?.error?.issues;
                    expect(issues?.map((i) => i.message)).to.equal(['\'notification_id\' MUST NOT be defined when \'credentials\' is not defined.']);
                    expect(body.credentials).to.exist();
                }
                return { status: exchange.status, body };
            }
        };

        before(async () => {
            const port = await freePort();
            publicUrl = `http://127.0.0.1:${port}`;
            const answers: Record<string, object> = { '/bad-interval': { deferred: true, interval: 0 }, '/no-interval': { deferred: true }, '/defer': { deferred: true, interval: INTERVAL } };
            provider = await startReceiver((path) => ({ status: 200, body: answers[path] ?? {} }));
            webhook = await startReceiver();
            t = await startTestServer(dialect, { listen: true, env: { PORT: String(port), PUBLIC_URL: publicUrl, CONFIG_FOLDER: CONFIG, OUTBOUND_URL_ALLOW_HTTP: 'true', OUTBOUND_URL_ALLOW_PRIVATE_NETWORK: 'true' } });
            const root = await rootToken(t.server);
            admin = (await clientWithToken(t.server, root, { clientId: 'deferred-admin', roles: ['tenant:admin'], tenantId: 'demo' })).token;
            offerer = (await clientWithToken(t.server, root, { clientId: 'deferred-offers', roles: ['issuance:offer'], tenantId: 'demo' })).token;
            configurer = (await clientWithToken(t.server, root, { clientId: 'deferred-config', roles: ['issuance:config'], tenantId: 'demo' })).token;
            await createTenant(t.server, root, 'other');
            otherOfferer = (await clientWithToken(t.server, root, { clientId: 'other-offers', roles: ['issuance:offer'], tenantId: 'other' })).token;
            const setup: Array<[string, string, object]> = [
                ['POST', '/api/issuer/attribute-providers', { id: 'deferring', url: `${provider.url}/defer`, auth: { type: 'none' } }],
                ['POST', '/api/issuer/attribute-providers', { id: 'bad-interval', url: `${provider.url}/bad-interval`, auth: { type: 'none' } }],
                ['POST', '/api/issuer/attribute-providers', { id: 'no-interval', url: `${provider.url}/no-interval`, auth: { type: 'none' } }],
                ['POST', '/api/issuer/webhook-endpoints', { id: 'backend', name: 'Issuer backend', url: `${webhook.url}/hook`, auth: { type: 'none' } }],
                ['POST', '/api/issuer/webhook-endpoints', { id: 'down', name: 'Backend that is down', url: `http://127.0.0.1:${await freePort()}/hook`, auth: { type: 'none' } }],
                ['POST', '/api/issuer/credentials', { ...PID, id: 'pid-unbound', config: { ...PID.config, scope: 'pid-unbound' }, attributeProviderId: 'no-interval', keyBinding: false }],
                ['POST', '/api/issuer/credentials', { ...PID, id: 'pid-gone', config: { ...PID.config, scope: 'pid-gone' }, attributeProviderId: 'deferring' }],
                ['POST', '/api/issuer/credentials', { ...PID, id: 'pid-deferred', config: { ...PID.config, scope: 'pid-deferred' }, attributeProviderId: 'deferring', statusManagement: true }],
                ['POST', '/api/issuer/credentials', { ...PID, id: 'pid-plain-deferred', config: { ...PID.config, scope: 'pid-plain-deferred' }, attributeProviderId: 'deferring' }],
                ['POST', '/api/issuer/credentials', { ...MDL, id: 'mdl-deferred', config: { ...MDL.config, scope: 'mdl-deferred' }, attributeProviderId: 'deferring', statusManagement: true }],
                ['POST', '/api/issuer/credentials', { ...PID, id: 'pid-bad-interval', config: { ...PID.config, scope: 'pid-bad-interval' }, attributeProviderId: 'bad-interval' }]
            ];
            for (const [method, url, body] of setup) {
                const res = await api(admin, method, url, body);
                expect(res.status, res.payload).to.equal(201);
            }
            const otherAdmin = (await clientWithToken(t.server, root, { clientId: 'other-admin', roles: ['tenant:admin'], tenantId: 'other' })).token;
            expect((await api(otherAdmin, 'POST', '/api/key-chain', ISSUER_KEY_CHAIN)).status).to.equal(201);
        });

        after(async () => {
            await t?.stop();
            await provider?.close();
            await webhook?.close();
        });

        it('defers an SD-JWT VC: 202 with the transaction, pending until completed, then the credential once with its status entry, and a notification', async () => {
            const deferral = await deferredRequest('pid-deferred', { webhookEndpointId: 'backend' });
            expect(deferral.status).to.equal(202);
            expect(deferral.interval).to.equal(INTERVAL);
            expect(deferral.transactionId).to.match(/^[A-Za-z0-9_-]{43}$/);
            // The attribute provider was sent the id it completes the transaction by, the backend's webhook too.
            const asked = provider.deliveries.find((d) => d.body.session === deferral.session)!;
            expect(asked.body).to.include({ credential_configuration_id: 'pid-deferred', transaction_id: deferral.transactionId });
            const told = webhook.deliveries.find((d) => d.body.session === deferral.session)!;
            expect(told.body.deferred).to.equal({ transactionId: deferral.transactionId, credentialConfigurationId: 'pid-deferred', interval: INTERVAL });
            // Nothing is signed yet: no status entry, the session has issued nothing.
            expect(await allocations(deferral.session)).to.equal([]);
            expect((await t.server.sessions.get(deferral.session))!.status).to.equal('active');
            // The transaction id is stored only as a hash.
            expect(JSON.stringify(await row(deferral.transactionId))).to.not.contain(deferral.transactionId);

            const pending = await retrieve(deferral);
            expect(pending).to.equal({ status: 400, body: { error: 'issuance_pending', error_description: `The credential is not ready yet; ask again in ${INTERVAL} seconds`, interval: INTERVAL } });
            expect(deferral.wallet.exchange('/vci/deferred_credential')!.responseHeaders['cache-control']).to.equal('no-store');

            const completed = await complete(deferral.transactionId, { claims: { given_name: 'Erika', family_name: 'Mustermann' } });
            expect(completed.status, completed.payload).to.equal(200);
            expect(completed.body).to.equal({ transactionId: deferral.transactionId, session: deferral.session, credentialConfigurationId: 'pid-deferred', state: 'ready' });
            const [allocation, ...more] = await allocations(deferral.session);
            expect(more).to.equal([]);
            expect((await t.server.sessions.get(deferral.session))!.status).to.equal('fetched');

            const ready = await retrieve(deferral);
            expect(ready.status, JSON.stringify(ready.body)).to.equal(200);
            const response = ready.body;
            expect(response.credentials).to.have.length(1);
            expect(response.notification_id).to.be.a.string();
            const verified = await verifySdJwtVc(response.credentials[0].credential);
            expect(verified.payload).to.include({ vct: PID.vct, given_name: 'Erika', family_name: 'Mustermann' });
            expect(sameKey((verified.payload.cnf as { jwk: any }).jwk, deferral.holderKey.publicJwk)).to.be.true();
            expect(verified.payload.status).to.equal({ status_list: { idx: allocation!.idx, uri: `${publicUrl}/issuers/demo/status-management/status-list/${allocation!.listId}` } });

            // Once: the credentials are gone from the database, a replay is an unknown transaction.
            const stored = await row(deferral.transactionId);
            expect(stored).to.include({ state: 'delivered', data: null });
            const replayed = await retrieve(deferral);
            expect(replayed.status).to.equal(400);
            expect(replayed.body.error).to.equal('invalid_transaction_id');
            const again = await complete(deferral.transactionId, { claims: { given_name: 'Erika', family_name: 'Mustermann' } });
            expect(again.status, again.payload).to.equal(409);

            // The notification_id of the delivered set completes the session, and the backend hears of it.
            await deferral.wallet.client.sendNotification({ issuerMetadata: deferral.issuerMetadata, accessToken: deferral.accessToken, notification: { notificationId: response.notification_id, event: 'credential_accepted' } });
            expect((await t.server.sessions.get(deferral.session))!.status).to.equal('completed');
            const notified = webhook.deliveries.find((d) => d.body.session === deferral.session && d.body.notification);
            expect(notified!.body.notification).to.equal({ id: response.notification_id, event: 'credential_accepted', credentialConfigurationId: 'pid-deferred' });
        });

        it('defers an mdoc: the device key of the proof and the MSO status entry allocated at completion', async () => {
            const deferral = await deferredRequest('mdl-deferred');
            expect(deferral.status).to.equal(202);
            expect(await allocations(deferral.session)).to.equal([]);
            const completed = await complete(deferral.transactionId, { claims: { [MDL_NS]: { given_name: 'Erika', family_name: 'Mustermann', age_over_18: true } } });
            expect(completed.status, completed.payload).to.equal(200);
            const [allocation] = await allocations(deferral.session);
            const ready = await retrieve(deferral);
            expect(ready.status, JSON.stringify(ready.body)).to.equal(200);
            const credential = ready.body.credentials[0].credential as string;
            const verified = await verifyMdoc(credential, MDL_DOCTYPE);
            expect(verified.namespaces[MDL_NS]).to.include({ given_name: 'Erika', family_name: 'Mustermann', age_over_18: true, issuing_country: 'DE' });
            expect(sameKey(verified.deviceJwk, deferral.holderKey.publicJwk)).to.be.true();
            const mso = (cborDecode(parseIssuerSigned(new Uint8Array(Buffer.from(credential, 'base64url')), MDL_DOCTYPE).issuerSigned.issuerAuth.payload) as DataItem<Map<string, any>>).data;
            const statusList = mso.get('status').get('status_list') as Map<string, unknown>;
            expect(statusList.get('idx')).to.equal(allocation!.idx);
            expect(statusList.get('uri')).to.equal(`${publicUrl}/issuers/demo/status-management/status-list/${allocation!.listId}`);
            expect((await retrieve(deferral)).body.error).to.equal('invalid_transaction_id');
        });

        it('fails a transaction: the wallet gets credential_request_denied with the reason, and it can no longer be completed', async () => {
            const deferral = await deferredRequest('pid-plain-deferred');
            const failed = await fail(deferral.transactionId, { error: 'The register has no entry for this person' });
            expect(failed.status, failed.payload).to.equal(200);
            expect(failed.body.state).to.equal('failed');
            const answer = await retrieve(deferral);
            expect(answer).to.equal({ status: 400, body: { error: 'credential_request_denied', error_description: 'The register has no entry for this person' } });
            expect((await complete(deferral.transactionId, { claims: { given_name: 'Erika', family_name: 'M' } })).status).to.equal(409);
            expect((await fail(deferral.transactionId, {})).status).to.equal(409);
            expect(((await t.server.sessions.get(deferral.session))!.data as { issued: unknown[] }).issued).to.equal([]);

            // Without a reason the wallet gets a generic one.
            const other = await deferredRequest('pid-plain-deferred');
            expect((await fail(other.transactionId, undefined)).status).to.equal(200);
            expect((await retrieve(other)).body).to.equal({ error: 'credential_request_denied', error_description: 'The issuer declined to issue this credential' });
        });

        it('checks the completion claims as an attribute provider answer: a missing mandatory claim is a 400 and the transaction stays pending', async () => {
            const deferral = await deferredRequest('pid-plain-deferred');
            const missing = await complete(deferral.transactionId, { claims: { given_name: 'Erika' } });
            expect(missing.status, missing.payload).to.equal(400);
            expect(missing.body.message).to.contain('family_name');
            expect((await row(deferral.transactionId)).state).to.equal('pending');
            expect((await retrieve(deferral)).body.error).to.equal('issuance_pending');
            expect((await complete(deferral.transactionId, { claims: { given_name: 'Erika', family_name: 'Mustermann' } })).status).to.equal(200);
            expect((await retrieve(deferral)).status).to.equal(200);
        });

        it('answers invalid_transaction_id to a token of another session and leaves the credentials to the right one', async () => {
            const deferral = await deferredRequest('pid-plain-deferred');
            const stranger = await deferredRequest('pid-plain-deferred');
            expect((await complete(deferral.transactionId, { claims: { given_name: 'Erika', family_name: 'Mustermann' } })).status).to.equal(200);
            expectOAuthError(await fetchDeferred(stranger.accessToken, { transaction_id: deferral.transactionId }), 'invalid_transaction_id');
            expect((await retrieve(deferral)).status).to.equal(200);
            // Without a token, or with an unknown one: the token check comes first.
            expect((await t.server.inject({ method: 'POST', url: '/issuers/demo/vci/deferred_credential', payload: { transaction_id: stranger.transactionId } })).statusCode).to.equal(401);
            expect((await fetchDeferred('not-a-token', { transaction_id: stranger.transactionId })).statusCode).to.equal(401);
        });

        it('keeps another tenant\'s transactions and unknown ids out: 404 at the management API, invalid_transaction_id for the wallet', async () => {
            const deferral = await deferredRequest('pid-plain-deferred');
            expect((await complete(deferral.transactionId, { claims: { given_name: 'Erika', family_name: 'Mustermann' } }, otherOfferer)).status).to.equal(404);
            expect((await fail(deferral.transactionId, {}, otherOfferer)).status).to.equal(404);
            for (const unknown of [Crypto.randomBytes(32).toString('base64url'), 'short', `${deferral.transactionId}x`, deferral.transactionId.toUpperCase()]) {
                expect((await complete(unknown, { claims: {} })).status, unknown).to.equal(404);
                expect((await fail(unknown, {})).status, unknown).to.equal(404);
                expectOAuthError(await fetchDeferred(deferral.accessToken, { transaction_id: unknown }), 'invalid_transaction_id');
            }
            expect((await row(deferral.transactionId)).state).to.equal('pending');
            // A role without issuance:offer may not complete or fail.
            expect((await complete(deferral.transactionId, { claims: {} }, configurer)).status).to.equal(403);
            expect((await fail(deferral.transactionId, {}, configurer)).status).to.equal(403);
        });

        it('refuses bad bodies with 400 and never a 500, and leaves the transaction pending', async () => {
            const deferral = await deferredRequest('pid-plain-deferred');
            const completions: unknown[] = [
                {}, { claims: 'Erika' }, { claims: ['Erika'] }, { claims: null }, { claims: { given_name: 'Erika' }, extra: true },
                { claims: { given_name: 'Er\u0000ika', family_name: 'M' } }
            ];
            for (const body of completions) {
                const res = await complete(deferral.transactionId, body);
                expect(res.status, `${JSON.stringify(body)} ${res.payload}`).to.equal(400);
            }
            const failures: unknown[] = [{ error: 42 }, { error: 'x'.repeat(501) }, { error: 'line\u0000break' }, { error: 'bell\u0007' }, { reason: 'unknown field' }];
            for (const body of failures) {
                const res = await fail(deferral.transactionId, body);
                expect(res.status, `${JSON.stringify(body)} ${res.payload}`).to.equal(400);
            }
            expect((await complete('x'.repeat(129), { claims: {} })).status).to.equal(400);
            for (const body of [{}, { transaction_id: 42 }, { transaction_id: ['a'] }, { transaction_id: '' }]) {
                expectOAuthError(await fetchDeferred(deferral.accessToken, body), 'invalid_credential_request');
            }
            expectOAuthError(await fetchDeferred(deferral.accessToken, { transaction_id: `${deferral.transactionId}\u0000` }), 'invalid_request');
            expect((await row(deferral.transactionId)).state).to.equal('pending');
        });

        it('defers without an interval (the default, 5 s), without key binding, and despite a webhook that is down', async () => {
            const deferral = await deferredRequest('pid-unbound', { webhookEndpointId: 'down' });
            expect(deferral.status).to.equal(202);
            expect(deferral.interval).to.equal(5);
            expect((await retrieve(deferral)).body).to.include({ error: 'issuance_pending', interval: 5 });
            expect((await complete(deferral.transactionId, { claims: { given_name: 'Erika', family_name: 'Mustermann' } })).status).to.equal(200);
            const ready = await retrieve(deferral);
            expect(ready.status).to.equal(200);
            const verified = await verifySdJwtVc(ready.body.credentials[0].credential);
            expect(verified.payload.given_name).to.equal('Erika');
            expect(verified.payload.cnf).to.not.exist();
        });

        it('takes a DPoP-bound token at the deferred credential endpoint only with a DPoP proof of its key', async () => {
            const deferral = await deferredRequest('pid-plain-deferred', {}, { dpop: true });
            expect(deferral.status).to.equal(202);
            expect((await retrieve(deferral)).body.error).to.equal('issuance_pending');
            expect(deferral.wallet.exchange('/vci/deferred_credential')!.requestHeaders.authorization).to.startWith('DPoP ');
            expect((await complete(deferral.transactionId, { claims: { given_name: 'Erika', family_name: 'Mustermann' } })).status).to.equal(200);
            // The token without its proof is refused before the transaction is looked at, and the credentials stay.
            const bare = await t.server.inject({ method: 'POST', url: '/issuers/demo/vci/deferred_credential', headers: { authorization: `DPoP ${deferral.accessToken}` }, payload: { transaction_id: deferral.transactionId } });
            expect(bare.statusCode, bare.payload).to.equal(401);
            expect((await row(deferral.transactionId)).state).to.equal('ready');
            const ready = await retrieve(deferral);
            expect(ready.status, JSON.stringify(ready.body)).to.equal(200);
            const verified = await verifySdJwtVc(ready.body.credentials[0].credential);
            expect(sameKey((verified.payload.cnf as { jwk: any }).jwk, deferral.holderKey.publicJwk)).to.be.true();
        });

        it('answers 409 when the credentials can no longer be issued', async () => {
            // The configuration was deleted meanwhile.
            const gone = await deferredRequest('pid-gone');
            expect((await api(admin, 'DELETE', '/api/issuer/credentials/pid-gone')).status).to.equal(204);
            const orphaned = await complete(gone.transactionId, { claims: { given_name: 'Erika', family_name: 'Mustermann' } });
            expect(orphaned.status, orphaned.payload).to.equal(409);
            expect(orphaned.body.message).to.contain('pid-gone');

            // The session expired meanwhile (what the maintenance job writes).
            const late = await deferredRequest('pid-plain-deferred');
            expect(await t.server.sessions.transition(late.session, ['active'], 'expired')).to.be.true();
            const expired = await complete(late.transactionId, { claims: { given_name: 'Erika', family_name: 'Mustermann' } });
            expect(expired.status, expired.payload).to.equal(409);
            expect(expired.body.message).to.contain('expired');
            expect((await row(late.transactionId)).state).to.equal('pending');
        });

        it('removes the transactions of anonymized sessions with the tidy-up job, and leaves the others', async () => {
            const anonymized = await deferredRequest('pid-plain-deferred');
            const kept = await deferredRequest('pid-plain-deferred');
            expect((await complete(anonymized.transactionId, { claims: { given_name: 'Erika', family_name: 'Mustermann' } })).status).to.equal(200);
            // What session anonymization writes: the row stays, its data and handles go.
            expect(await t.server.sessions.update(anonymized.session, { data: null, accessTokenHash: null })).to.be.true();
            await t.server.jobs.runNow(DEFERRED_TIDY_UP_JOB);
            expect(await row(anonymized.transactionId)).to.not.exist();
            expect((await row(kept.transactionId)).state).to.equal('pending');
            expect((await complete(anonymized.transactionId, { claims: {} })).status).to.equal(404);
        });

        it('refuses a deferral with an interval that is not a positive integer as a provider failure', async () => {
            const offered = await api(offerer, 'POST', '/api/issuer/offer', { credentialConfigurationIds: ['pid-bad-interval'] });
            const wallet = new Wallet();
            const error = await expect(wallet.receive(offered.body.uri, { configurationId: 'pid-bad-interval' })).to.reject();
            expect(error).to.exist();
            const exchange = wallet.exchange('/vci/credential')!;
            expect(exchange.status).to.equal(400);
            expect(JSON.parse(exchange.responseBody).error).to.equal('credential_request_denied');
            expect(await t.server.db.knex('deferred_issuances').where({ sessionId: offered.body.session })).to.equal([]);
        });

        it('delivers to exactly one of 20 concurrent fetches and signs for exactly one of 20 concurrent completions', async () => {
            const deferral = await deferredRequest('pid-deferred');
            const claims = { claims: { given_name: 'Erika', family_name: 'Mustermann' } };
            const completions = await Promise.all(Array.from({ length: CONCURRENT }, () => complete(deferral.transactionId, claims)));
            expect(completions.filter((r) => r.status === 200)).to.have.length(1);
            expect(completions.filter((r) => r.status === 409)).to.have.length(CONCURRENT - 1);
            expect(await allocations(deferral.session)).to.have.length(1);
            expect(((await t.server.sessions.get(deferral.session))!.data as { issued: unknown[] }).issued).to.have.length(1);

            // Completions and failures of one transaction racing: exactly one of them decides it.
            const raced = await deferredRequest('pid-plain-deferred');
            const racing = await Promise.all(Array.from({ length: CONCURRENT }, (_, i) => i % 2 ? fail(raced.transactionId, { error: 'no' }) : complete(raced.transactionId, claims)));
            expect(racing.filter((r) => r.status === 200)).to.have.length(1);
            expect(racing.filter((r) => r.status === 409)).to.have.length(CONCURRENT - 1);
            const decided = racing.find((r) => r.status === 200)!.body.state as string;
            expect((await row(raced.transactionId)).state).to.equal(decided);
            expect(((await t.server.sessions.get(raced.session))!.data as { issued: unknown[] }).issued).to.have.length(decided === 'ready' ? 1 : 0);

            const fetches = await Promise.all(Array.from({ length: CONCURRENT }, () => fetchDeferred(deferral.accessToken, { transaction_id: deferral.transactionId })));
            const delivered = fetches.filter((r) => r.statusCode === 200);
            expect(delivered).to.have.length(1);
            expect((delivered[0]!.result as any).credentials).to.have.length(1);
            const refused = fetches.filter((r) => r.statusCode === 400);
            expect(refused).to.have.length(CONCURRENT - 1);
            for (const res of refused) {
                expect((res.result as any).error).to.equal('invalid_transaction_id');
            }
        });
    });
}
