import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { getListFromStatusListJWT } from '@sd-jwt/jwt-status-list';
import * as Jose from 'jose';
import { AuditLogModel } from '../../lib/db/models/audit-log';
import { STATUS_LIST_PUBLISH_JOB } from '../../plugins/status/jobs/publish';
import { StatusAllocationModel, StatusListStateModel } from '../../plugins/status/models';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { freePort } from '../helpers/net';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';
import { verifySdJwtVc, Wallet, type Received } from '../helpers/wallet';

/**
 * Entry values of token status lists (spec 3.3): PATCH …/entry/{index} with its rules (range, allocation, revoked is
 * final, suspension reversible, tenant isolation), POST /api/session/revoke, the entries version that marks the
 * cached token stale, and the audit entries. Credentials come through the OpenID4VCI wallet library; values are read
 * back from the list token with @sd-jwt/jwt-status-list.
 */

export const lab = Lab.script();
const { describe, it, before, after } = lab;

type StatusClaim = { status_list: { idx: number; uri: string } };

const sdJwtConfig = (id: string, extra: Record<string, unknown> = {}) => ({
    id,
    config: { format: 'dc+sd-jwt', display: [{ locale: 'en', name: id }] },
    vct: `urn:test:${id}`,
    keyChainId: 'issuer',
    fields: [{ path: ['given_name'], type: 'string', mandatory: true, disclosable: true }],
    statusManagement: true,
    ...extra
});

const statusOf = async (credential: string): Promise<StatusClaim> => (await verifySdJwtVc(credential)).payload.status as StatusClaim;

for (const dialect of DIALECTS) {
    describe(`status lists: entry values (${dialect})`, () => {
        let t: TestServer;
        let admin: string;
        let offerRole: string;
        let configRole: string;
        let reader: string;
        let other: string;
        let otherClaim: StatusClaim;

        const inject = async (token: string | undefined, method: string, url: string, payload?: unknown) => {
            const res = await t.server.inject({ method, url, headers: token ? bearer(token) : {}, ...(payload !== undefined ? { payload: payload as object } : {}) });
            return { status: res.statusCode, body: res.result as any, payload: res.payload };
        };
        const listId = (claim: StatusClaim) => new URL(claim.status_list.uri).pathname.split('/').pop()!;
        const entryUrl = (claim: StatusClaim, tenant = 'acme', index: number | string = claim.status_list.idx) =>
            `/issuers/${tenant}/status-management/status-list/${listId(claim)}/entry/${index}`;
        const patch = (claim: StatusClaim, value: unknown, token = admin) => inject(token, 'PATCH', entryUrl(claim), { value });
        const state = (claim: StatusClaim, tenant = 'acme') => t.server.db.model(StatusListStateModel).query().findById([tenant, listId(claim)]);

        /**
         * The entry as a fresh token states it, fetched over HTTP and decoded with @sd-jwt/jwt-status-list, after
         * the publishing job re-signed the changed list (these tenants do not set immediateUpdate).
         */
        const published = async (claim: StatusClaim): Promise<number> => {
            await t.server.jobs.runNow(STATUS_LIST_PUBLISH_JOB);
            const res = await fetch(claim.status_list.uri);
            expect(res.status).to.equal(200);
            const jwt = await res.text();
            await Jose.jwtVerify(jwt, async (header) => Jose.importX509(`-----BEGIN CERTIFICATE-----\n${header.x5c![0]}\n-----END CERTIFICATE-----`, 'ES256'), { typ: 'statuslist+jwt' });
            return getListFromStatusListJWT(jwt).getStatus(claim.status_list.idx);
        };

        const offer = async (ids: string[], token = admin) => {
            const claims = Object.fromEntries(ids.map((id) => [id, { type: 'inline', claims: { given_name: 'Erika' } }]));
            const res = await inject(token, 'POST', '/api/issuer/offer', { credentialConfigurationIds: ids, credentialClaims: claims });
            expect(res.status, res.payload).to.equal(201);
            return res.body as { session: string; uri: string };
        };
        /** One issuance session: `batch` credentials of the first configuration, then one request per further configuration. */
        const session = async (ids: string[], options: { batch?: number; token?: string } = {}): Promise<{ session: string; claims: Record<string, StatusClaim[]> }> => {
            const made = await offer(ids, options.token);
            const wallet = new Wallet();
            const received: Received = await wallet.receive(made.uri, { configurationId: ids[0]!, batch: options.batch ?? 1 });
            const claims: Record<string, StatusClaim[]> = { [ids[0]!]: await Promise.all(received.credentials.map(statusOf)) };
            for (const id of ids.slice(1)) {
                const { c_nonce: nonce } = await wallet.client.requestNonce({ issuerMetadata: received.issuerMetadata });
                const jwts = await wallet.proofs(received.issuerMetadata, id, nonce, [await wallet.key()]);
                const { credentialResponse } = await wallet.client.retrieveCredentials({ issuerMetadata: received.issuerMetadata, credentialConfigurationId: id, accessToken: received.accessToken, proofs: { jwt: jwts } });
                claims[id] = await Promise.all((credentialResponse.credentials ?? []).map((c) => statusOf((c as { credential: string }).credential)));
            }
            return { session: made.session, claims };
        };
        const issueOne = async (id: string, token = admin) => (await session([id], { token })).claims[id]![0]!;

        before(async () => {
            const port = await freePort();
            t = await startTestServer(dialect, { listen: true, manifest: manifestFor('hallmark-status', 'hallmark-kms-db', 'hallmark-tenancy'), env: { PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}` } });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme', { statusListConfig: { bits: 2, capacity: 1000, ttlSeconds: 600, immediateUpdate: false } });
            await createTenant(t.server, root, 'globex');
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            offerRole = (await clientWithToken(t.server, root, { clientId: 'acme-offer', roles: ['issuance:offer'], tenantId: 'acme' })).token;
            configRole = (await clientWithToken(t.server, root, { clientId: 'acme-config', roles: ['issuance:config'], tenantId: 'acme' })).token;
            reader = (await clientWithToken(t.server, root, { clientId: 'acme-reader', roles: ['tenant:read'], tenantId: 'acme' })).token;
            other = (await clientWithToken(t.server, root, { clientId: 'globex-admin', roles: ['tenant:admin'], tenantId: 'globex' })).token;
            for (const token of [admin, other]) {
                expect((await inject(token, 'POST', '/api/key-chain', { id: 'issuer', usageType: 'attestation' })).status).to.equal(201);
            }
            // pid: the tenant's 2-bit lists; pid1: 1-bit lists; plain: no status.
            for (const config of [sdJwtConfig('pid'), sdJwtConfig('pid1', { status: { enabled: true, bits: 1 } }), sdJwtConfig('plain', { statusManagement: false })]) {
                const res = await inject(admin, 'POST', '/api/issuer/credentials', config);
                expect(res.status, res.payload).to.equal(201);
            }
            expect((await inject(other, 'POST', '/api/issuer/credentials', sdJwtConfig('pid'))).status).to.equal(201);
            expect((await inject(admin, 'PUT', '/api/issuer/config', { batchSize: 3 })).status).to.equal(200);
            otherClaim = await issueOne('pid', other);
        });
        after(() => t?.stop());

        it('suspends and reinstates an entry of a 2-bit list; revoked is final (409); each change is versioned and audited', async () => {
            const claim = await issueOne('pid');
            const version = async () => (await state(claim))!.entriesVersion;
            const start = await version();
            expect(await published(claim)).to.equal(0);

            const suspended = await patch(claim, 1, offerRole);
            expect(suspended.status, suspended.payload).to.equal(200);
            expect(suspended.body).to.equal({ listId: listId(claim), index: claim.status_list.idx, value: 1 });
            expect(await published(claim)).to.equal(1);
            expect(await version()).to.equal(start + 1);

            expect((await patch(claim, 0, configRole)).status).to.equal(200);
            expect(await published(claim)).to.equal(0);
            expect(await version()).to.equal(start + 2);
            // Setting the value it has changes nothing: no new version, no audit entry.
            expect((await patch(claim, 0)).status).to.equal(200);
            expect(await version()).to.equal(start + 2);

            expect((await patch(claim, 3)).body).to.include({ value: 3 });
            expect((await patch(claim, 2)).status).to.equal(200);
            expect(await published(claim)).to.equal(2);
            expect((await patch(claim, 2)).status).to.equal(200);
            for (const value of [0, 1, 3]) {
                const refused = await patch(claim, value);
                expect(refused.status, refused.payload).to.equal(409);
                expect(refused.body.message).to.contain('revoked');
            }
            expect(await published(claim)).to.equal(2);
            expect(await version()).to.equal(start + 4);

            const audit = await t.server.db.model(AuditLogModel).query().where({ tenantId: 'acme', kind: 'StatusList', resourceId: listId(claim), action: 'update' }).orderBy('id');
            const entryChanges = audit.filter((a) => (a.changes as any[]).some((c) => c.path === `entries.${claim.status_list.idx}`));
            expect(entryChanges.map((a) => [a.actor, a.changes])).to.equal([
                ['acme-offer', [{ path: `entries.${claim.status_list.idx}`, before: 0, after: 1 }]],
                ['acme-config', [{ path: `entries.${claim.status_list.idx}`, before: 1, after: 0 }]],
                ['acme-admin', [{ path: `entries.${claim.status_list.idx}`, before: 0, after: 3 }]],
                ['acme-admin', [{ path: `entries.${claim.status_list.idx}`, before: 3, after: 2 }]]
            ]);
        });

        it('revokes with 1 on a 1-bit list, where 1 is final and 2 is out of range', async () => {
            const claim = await issueOne('pid1');
            const tooHigh = await patch(claim, 2);
            expect(tooHigh.status, tooHigh.payload).to.equal(400);
            expect(tooHigh.body.details).to.equal([{ path: 'value', message: 'must be at most 1' }]);
            expect((await patch(claim, 1)).status).to.equal(200);
            expect(await published(claim)).to.equal(1);
            expect((await patch(claim, 0)).status).to.equal(409);
            expect(await published(claim)).to.equal(1);
        });

        it('answers 400 for bad values and indexes, 404 for unknown lists and indexes never allocated, never 500', async () => {
            const claim = await issueOne('pid');
            const before = (await state(claim))!;
            for (const body of [{ value: 4 }, { value: 256 }, { value: -1 }, { value: 1.5 }, { value: 'x' }, { value: null }, { value: true }, {}, { value: 1, extra: 1 }, [1]]) {
                const res = await inject(admin, 'PATCH', entryUrl(claim), body);
                expect(res.status, `${JSON.stringify(body)} ${res.payload}`).to.equal(400);
            }
            for (const index of ['abc', '1.5', '-1', '1e3x', '99999999999']) {
                expect((await inject(admin, 'PATCH', entryUrl(claim, 'acme', index), { value: 1 })).status, index).to.equal(400);
            }
            // An index of the list nobody holds, and one beyond its capacity.
            const taken = new Set((await t.server.db.model(StatusAllocationModel).query().where({ tenantId: 'acme', listId: listId(claim) })).map((r) => r.idx));
            const free = Array.from({ length: 1000 }, (_, i) => i).find((i) => !taken.has(i))!;
            for (const index of [free, 1000, 5000]) {
                const res = await inject(admin, 'PATCH', entryUrl(claim, 'acme', index), { value: 1 });
                expect(res.status, `${index} ${res.payload}`).to.equal(404);
            }
            expect((await inject(admin, 'PATCH', `/issuers/acme/status-management/status-list/no-such-list/entry/0`, { value: 1 })).status).to.equal(404);
            expect((await inject(admin, 'PATCH', `/issuers/acme/status-management/status-list/-bad/entry/0`, { value: 1 })).status).to.equal(400);
            expect((await inject(admin, 'PATCH', `/issuers/NOT_A_TENANT/status-management/status-list/${listId(claim)}/entry/0`, { value: 1 })).status).to.equal(400);
            const after = (await state(claim))!;
            expect(after.entriesVersion).to.equal(before.entriesVersion);
            expect(Buffer.compare(after.entries, before.entries)).to.equal(0);
        });

        it('needs issuance:offer or issuance:config of the list\'s own tenant; another tenant learns nothing', async () => {
            const claim = await issueOne('pid');
            expect((await inject(undefined, 'PATCH', entryUrl(claim), { value: 1 })).status).to.equal(401);
            expect((await patch(claim, 1, reader)).status).to.equal(403);
            expect((await patch(claim, 1, await rootToken(t.server))).status).to.equal(403);
            // globex's token on acme's list: the same answer as for a list that does not exist.
            const foreign = await patch(claim, 1, other);
            const missing = await inject(other, 'PATCH', '/issuers/acme/status-management/status-list/no-such-list/entry/0', { value: 1 });
            expect(foreign.status).to.equal(404);
            expect(foreign.body).to.equal(missing.body);
            // ... and acme's list id under globex's own path.
            expect((await inject(other, 'PATCH', entryUrl(claim, 'globex'), { value: 1 })).status).to.equal(404);
            // acme's token cannot touch globex's list.
            expect((await inject(admin, 'PATCH', entryUrl(otherClaim, 'globex'), { value: 1 })).status).to.equal(404);
            expect((await inject(admin, 'PATCH', entryUrl(otherClaim, 'acme'), { value: 1 })).status).to.equal(404);
            expect(await published(claim)).to.equal(0);
            expect(await published(otherClaim)).to.equal(0);
            // globex changes its own.
            expect((await inject(other, 'PATCH', entryUrl(otherClaim, 'globex'), { value: 1 })).status).to.equal(200);
            expect(await published(otherClaim)).to.equal(1);
        });

        it('revokes the credentials of an issuance session: by configuration, then all (revoked by default), counting changes', async () => {
            const { session: id, claims } = await session(['pid', 'pid1'], { batch: 2 });
            expect(claims.pid).to.have.length(2);
            expect(claims.pid1).to.have.length(1);
            const revoke = (payload: object, token = admin) => inject(token, 'POST', '/api/session/revoke', payload);

            const onlyPid1 = await revoke({ sessionId: id, credentialConfigurationId: 'pid1' }, offerRole);
            expect(onlyPid1.status, onlyPid1.payload).to.equal(200);
            expect(onlyPid1.body).to.equal({ updated: 1 });
            expect(await published(claims.pid1![0]!)).to.equal(1);
            expect(await Promise.all(claims.pid!.map((c) => published(c)))).to.equal([0, 0]);

            // Without a filter: revoked is 2 on the 2-bit list; the 1-bit entry is already revoked.
            expect((await revoke({ sessionId: id }, configRole)).body).to.equal({ updated: 2 });
            expect(await Promise.all(claims.pid!.map((c) => published(c)))).to.equal([2, 2]);
            expect((await revoke({ sessionId: id })).body).to.equal({ updated: 0 });
            expect((await revoke({ sessionId: id, credentialConfigurationId: 'plain' })).body).to.equal({ updated: 0 });
            const audit = await t.server.db.model(AuditLogModel).query().where({ tenantId: 'acme', kind: 'StatusList', resourceId: listId(claims.pid![0]!), actor: 'acme-config' });
            expect(audit.some((a) => (a.changes as any[]).length === 2 && (a.changes as any[]).every((c) => c.after === 2))).to.be.true();
        });

        it('sets a session\'s entries to a given status: suspension is reversible, values out of a list\'s range change nothing', async () => {
            const { session: id, claims } = await session(['pid', 'pid1'], { batch: 2 });
            const revoke = (payload: object) => inject(admin, 'POST', '/api/session/revoke', { sessionId: id, ...payload });
            const all = () => Promise.all([...claims.pid!, ...claims.pid1!].map((c) => published(c)));
            // 3 fits the 2-bit list but not the 1-bit one: refused whole.
            const tooHigh = await revoke({ status: 3 });
            expect(tooHigh.status, tooHigh.payload).to.equal(400);
            expect(await all()).to.equal([0, 0, 0]);
            expect((await revoke({ status: 1 })).body).to.equal({ updated: 3 });
            // 1 suspends on the 2-bit list and revokes on the 1-bit list, which then stays revoked.
            expect(await all()).to.equal([1, 1, 1]);
            expect((await revoke({ status: 0 })).body).to.equal({ updated: 2 });
            expect(await all()).to.equal([0, 0, 1]);
        });

        it('answers 404 for another tenant\'s or an unknown session, 200 {updated: 0} without status entries, 400/403 for bad requests', async () => {
            const theirs = await session(['pid'], { token: other });
            const foreign = await inject(admin, 'POST', '/api/session/revoke', { sessionId: theirs.session });
            const unknown = await inject(admin, 'POST', '/api/session/revoke', { sessionId: 'no-such-session' });
            expect(foreign.status).to.equal(404);
            expect(foreign.body).to.equal(unknown.body);
            expect(await published(theirs.claims.pid![0]!)).to.equal(0);
            // A presentation session of the tenant is no issuance session.
            const presentation = await t.server.sessions.create({ tenantId: 'acme', type: 'presentation', data: null });
            expect((await inject(admin, 'POST', '/api/session/revoke', { sessionId: presentation.id })).body).to.equal(unknown.body);
            const plain = await session(['plain']);
            expect((await inject(admin, 'POST', '/api/session/revoke', { sessionId: plain.session })).body).to.equal({ updated: 0 });
            for (const payload of [{}, { sessionId: '' }, { sessionId: 42 }, { sessionId: 'x'.repeat(256) }, { sessionId: plain.session, status: 256 }, { sessionId: plain.session, status: -1 }, { sessionId: plain.session, status: 'revoked' }, { sessionId: plain.session, extra: true }]) {
                expect((await inject(admin, 'POST', '/api/session/revoke', payload)).status, JSON.stringify(payload)).to.equal(400);
            }
            expect((await inject(reader, 'POST', '/api/session/revoke', { sessionId: plain.session })).status).to.equal(403);
            expect((await inject(undefined, 'POST', '/api/session/revoke', { sessionId: plain.session })).status).to.equal(401);
        });
    });
}
