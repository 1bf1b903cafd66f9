import Zlib from 'node:zlib';
import type Hapi from '@hapi/hapi';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { getListFromStatusListJWT } from '@sd-jwt/jwt-status-list';
import Pino from 'pino';
import { createServer, nameOf, resolvePlugin, type Manifest } from '../../lib/compose';
import { loadConfig, type Config } from '../../manifests/environment';
import { STATUS_LIST_PUBLISH_JOB } from '../../plugins/status/jobs/publish';
import { StatusListService } from '../../plugins/status/services/status-lists';
import { statusListKind } from '../../resources/status-list';
import { DIALECTS } from '../helpers/databases';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { manifestFor, startTestServer, testEnv, type TestServer } from '../helpers/server';
import { cwtEntries, verified, verifiedCwt } from '../helpers/status-list';

export const lab = Lab.script();
const { describe, it, before, after, beforeEach } = lab;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const waitFor = async (what: string, check: () => Promise<boolean>, timeoutMs = 10_000) => {
    const until = Date.now() + timeoutMs;
    while (!(await check())) {
        if (Date.now() > until) {
            throw new Error(`Timed out waiting for ${what}`);
        }
        await sleep(50);
    }
};

/** The status plugin's manifest with the publishing job every `seconds`. */
const publishingEvery = (seconds: number) => (config: Config): Manifest => {
    const manifest = manifestFor('hallmark-status', 'hallmark-kms-db', 'hallmark-tenancy')(config);
    return {
        ...manifest,
        plugins: manifest.plugins.map((entry) => (nameOf(resolvePlugin(entry)) === 'hallmark-status'
            ? { ...entry, options: { ...entry.options, publishIntervalSeconds: seconds } }
            : entry))
    };
};

/** Tenants whose signatures fail, as when their KMS is unreachable. */
const failing = new Set<string>();

/** Counts the signatures a server makes (JWS and COSE_Sign1), calling through to the real signing service. */
const countSignatures = (server: Hapi.Server) => {
    const counts = { jws: 0, cose: 0 };
    const { signing } = server;
    const jws = signing.jws.bind(signing);
    const cose = signing.coseSign1.bind(signing);
    signing.jws = (...args) => {
        if (failing.has(args[0])) {
            return Promise.reject(new Error('KMS unreachable'));
        }
        counts.jws++;
        return jws(...args);
    };
    signing.coseSign1 = (...args) => {
        counts.cose++;
        return cose(...args);
    };
    return counts;
};

/**
 * What a colleague's entry change does to the state row (their service is not on this branch): set the value of
 * one entry in the packed bytes and increment entries_version, in one update.
 */
const setEntry = async (server: Hapi.Server, tenantId: string, listId: string, bits: number, index: number, value: number) => {
    const knex = server.db.knex;
    const row = await knex('status_list_states').where({ tenantId, listId }).first('entries', 'entriesVersion');
    const entries = Buffer.from(row.entries);
    const bit = index * bits;
    const mask = ((1 << bits) - 1) << (bit % 8);
    entries[bit >> 3] = (entries[bit >> 3]! & ~mask) | ((value << (bit % 8)) & mask);
    await knex('status_list_states').where({ tenantId, listId }).update({ entries, entriesVersion: row.entriesVersion + 1 });
};

const verifiedJwtPayload = async (jwt: string) => (await verified(jwt)).payload;

const url = (tenant: string, list: string) => `/issuers/${tenant}/status-management/status-list/${list}`;

for (const dialect of DIALECTS) {
    describe(`status list publishing (${dialect})`, () => {
        let t: TestServer;
        let signatures: { jws: number; cose: number };
        let admins: Record<string, string>;
        const get = async (tenant: string, list: string, headers: Record<string, string> = {}) => {
            const res = await t.server.inject({ method: 'GET', url: url(tenant, list), headers });
            expect(res.statusCode, res.payload).to.equal(200);
            return res;
        };
        const maxAge = (res: { headers: Record<string, unknown> }) => Number(/^max-age=(\d+)$/.exec(res.headers['cache-control'] as string)![1]);
        const status = async (tenant: string, list: string, index: number) => getListFromStatusListJWT((await get(tenant, list)).payload).getStatus(index);
        const putConfig = async (tenant: string, config: object) =>
            expect((await t.server.inject({ method: 'PUT', url: '/api/status-list-config', payload: config, headers: bearer(admins[tenant]!) })).statusCode).to.equal(200);
        const tokenRow = (tenantId: string, listId: string) => t.server.db.knex('status_list_states').where({ tenantId, listId }).first('token', 'tokenVersion', 'entriesVersion', 'tokenRefreshAt');

        before(async () => {
            t = await startTestServer(dialect, { manifest: publishingEvery(3600) });
            signatures = countSignatures(t.server);
            const root = await rootToken(t.server);
            admins = {};
            for (const [tenant, immediateUpdate] of [['live', true], ['batch', false]] as const) {
                await createTenant(t.server, root, tenant, { statusListConfig: { bits: 1, capacity: 1024, ttlSeconds: 600, immediateUpdate } });
                admins[tenant] = (await clientWithToken(t.server, root, { clientId: `${tenant}-admin`, roles: ['tenant:admin'], tenantId: tenant })).token;
                const call = (path: string, payload: object) => t.server.inject({ method: 'POST', url: path, payload, headers: bearer(admins[tenant]!) });
                expect((await call('/api/key-chain', { id: 'status', usageType: 'statusList' })).statusCode).to.equal(201);
                for (const id of ['l1', 'l2']) {
                    expect((await call('/api/status-lists', { id })).statusCode).to.equal(201);
                }
            }
        });
        after(() => t.stop());
        beforeEach(() => {
            signatures.jws = 0;
            signatures.cose = 0;
        });

        it('with immediateUpdate, shows a change at the next GET in both forms, signing once per change', async () => {
            const first = await get('live', 'l1');
            expect(signatures).to.equal({ jws: 1, cose: 1 });
            expect((await get('live', 'l1')).payload).to.equal(first.payload);
            expect((await get('live', 'l1', { accept: 'application/statuslist+cwt' })).statusCode).to.equal(200);
            expect(signatures).to.equal({ jws: 1, cose: 1 });

            await setEntry(t.server, 'live', 'l1', 1, 5, 1);
            const changed = await get('live', 'l1');
            expect(changed.payload).to.not.equal(first.payload);
            expect(changed.headers.etag).to.not.equal(first.headers.etag);
            const list = getListFromStatusListJWT(changed.payload);
            expect([list.getStatus(4), list.getStatus(5), list.getStatus(6)]).to.equal([0, 1, 0]);
            const { entries } = cwtEntries(verifiedCwt((await get('live', 'l1', { accept: 'application/statuslist+cwt' })).rawPayload).claims);
            expect(entries[0]).to.equal(0b0010_0000);
            expect(signatures).to.equal({ jws: 2, cose: 2 });
            // The ETag of the old token no longer matches.
            expect((await t.server.inject({ method: 'GET', url: url('live', 'l1'), headers: { 'if-none-match': first.headers.etag as string } })).statusCode).to.equal(200);
        });

        it('with immediateUpdate, signs once for concurrent GETs after a change', async () => {
            await get('live', 'l1');
            await setEntry(t.server, 'live', 'l1', 1, 7, 1);
            const answers = await Promise.all(Array.from({ length: 12 }, () => get('live', 'l1')));
            expect(new Set(answers.map((a) => a.payload)).size).to.equal(1);
            expect(getListFromStatusListJWT(answers[0]!.payload).getStatus(7)).to.equal(1);
            expect(signatures).to.equal({ jws: 1, cose: 1 });
        });

        it('signs once when two processes publish the same change (the other waits for the token)', async () => {
            // A second service on the same database: its own caches and queues, as in another replica.
            const replica = new StatusListService({ db: t.server.db, registry: t.server.registry, signing: t.server.signing, publicUrl: 'http://hallmark.test' });
            await get('live', 'l1');
            await setEntry(t.server, 'live', 'l1', 1, 20, 1);
            signatures.jws = 0;
            const [here, there] = await Promise.all([get('live', 'l1'), replica.token('live', 'l1')]);
            expect(signatures.jws).to.equal(1);
            expect(there!.jwt.body.toString()).to.equal(here.payload);
            expect(getListFromStatusListJWT(here.payload).getStatus(20)).to.equal(1);
            expect((await t.server.db.knex('status_list_states').where({ tenantId: 'live', listId: 'l1' }).first('tokenSigningUntil')).tokenSigningUntil).to.be.null();
        });

        it('does not sign again when another process published the change between its read and its claim', async () => {
            const replica = new StatusListService({ db: t.server.db, registry: t.server.registry, signing: t.server.signing, publicUrl: 'http://hallmark.test' });
            await get('live', 'l1');
            await setEntry(t.server, 'live', 'l1', 1, 23, 1);
            signatures.jws = 0;
            // The replica has read the list (the change not yet published) when this process publishes it in full
            // and releases its claim; only then does the replica claim the signing.
            const internals = replica as unknown as { claimSigning: (tenantId: string, listId: string) => Promise<string | undefined> };
            const claimSigning = internals.claimSigning.bind(replica);
            let published = '';
            internals.claimSigning = async (tenantId, listId) => {
                published = (await get('live', 'l1')).payload;
                return claimSigning(tenantId, listId);
            };
            const there = await replica.token('live', 'l1');
            expect(signatures.jws).to.equal(1);
            expect(there!.jwt.body.toString()).to.equal(published);
            expect(getListFromStatusListJWT(published).getStatus(23)).to.equal(1);
            expect((await t.server.db.knex('status_list_states').where({ tenantId: 'live', listId: 'l1' }).first('tokenSigningUntil')).tokenSigningUntil).to.be.null();
        });

        it('signs after a short wait when the process that claimed the signing never finishes', async () => {
            await get('live', 'l1');
            await setEntry(t.server, 'live', 'l1', 1, 21, 1);
            await t.server.db.knex('status_list_states').where({ tenantId: 'live', listId: 'l1' }).update({ tokenSigningUntil: new Date(Date.now() + 60_000).toISOString() });
            signatures.jws = 0;
            expect(await status('live', 'l1', 21)).to.equal(1);
            expect(signatures.jws).to.equal(1);
            // The dead claim lapses on its own; the next change is signed without waiting for it.
            await t.server.db.knex('status_list_states').where({ tenantId: 'live', listId: 'l1' }).update({ tokenSigningUntil: new Date(Date.now() - 1).toISOString() });
            await setEntry(t.server, 'live', 'l1', 1, 22, 1);
            expect(await status('live', 'l1', 22)).to.equal(1);
            expect((await t.server.db.knex('status_list_states').where({ tenantId: 'live', listId: 'l1' }).first('tokenSigningUntil')).tokenSigningUntil).to.be.null();
        });

        it('without immediateUpdate, keeps serving the valid token after a change until the job publishes it', async () => {
            const first = await get('batch', 'l1');
            await get('batch', 'l2');
            expect(signatures.jws).to.equal(2);
            await setEntry(t.server, 'batch', 'l1', 1, 3, 1);
            expect((await get('batch', 'l1')).payload).to.equal(first.payload);
            expect(await status('batch', 'l1', 3)).to.equal(0);
            expect(signatures.jws).to.equal(2);

            const l2 = (await tokenRow('batch', 'l2')).token;
            await t.server.jobs.runNow(STATUS_LIST_PUBLISH_JOB);
            // Only the changed list was signed (the live tenant's tokens are fresh too).
            expect(signatures).to.equal({ jws: 3, cose: 3 });
            expect((await tokenRow('batch', 'l2')).token).to.equal(l2);
            expect(await status('batch', 'l1', 3)).to.equal(1);
            const row = await tokenRow('batch', 'l1');
            expect(row.tokenVersion).to.equal(row.entriesVersion);

            // Nothing changed or due: the next run signs nothing.
            await t.server.jobs.runNow(STATUS_LIST_PUBLISH_JOB);
            expect(signatures.jws).to.equal(3);
        });

        it('re-signs a due token in the job, but never on a GET while it is still valid', async () => {
            const before = (await get('batch', 'l2')).payload;
            await t.server.db.knex('status_list_states').where({ tenantId: 'batch', listId: 'l2' }).update({ tokenRefreshAt: new Date(Date.now() - 1000).toISOString() });
            // A change of the tenant drops the tokens this process keeps in memory, so the GET reads the due row. (A
            // longer ttl: a shorter one would make the other list's token due as well.)
            await putConfig('batch', { bits: 1, capacity: 1024, ttlSeconds: 601, immediateUpdate: false });
            expect((await get('batch', 'l2')).payload).to.equal(before);
            expect(signatures.jws).to.equal(0);

            await t.server.jobs.runNow(STATUS_LIST_PUBLISH_JOB);
            expect(signatures.jws).to.equal(1);
            const after = (await get('batch', 'l2')).payload;
            expect(after).to.not.equal(before);
            expect(new Date((await tokenRow('batch', 'l2')).tokenRefreshAt).getTime()).to.be.above(Date.now() + 500_000);
        });

        it('signs on a GET when the cached token has expired (no valid token), without immediateUpdate', async () => {
            const before = (await get('batch', 'l1')).payload;
            await t.server.db.knex('status_list_states').where({ tenantId: 'batch', listId: 'l1' })
                .update({ tokenRefreshAt: new Date(Date.now() - 2000).toISOString(), tokenExpiresAt: new Date(Date.now() - 1000).toISOString() });
            await putConfig('batch', { bits: 1, capacity: 1024, ttlSeconds: 600, immediateUpdate: false });
            const res = await get('batch', 'l1');
            expect(res.payload).to.not.equal(before);
            expect(res.headers['cache-control']).to.equal('max-age=600');
            expect((await verifiedJwtPayload(res.payload)).ttl).to.equal(600);
            expect(signatures.jws).to.equal(1);
        });

        it('re-signs a token cached before the CWT form existed (no CWT, no expiry stored) at the next GET', async () => {
            await get('batch', 'l2');
            await t.server.db.knex('status_list_states').where({ tenantId: 'batch', listId: 'l2' }).update({ tokenCwt: null, tokenCwtEtag: null, tokenExpiresAt: null });
            await putConfig('batch', { bits: 1, capacity: 1024, ttlSeconds: 601, immediateUpdate: false });
            const cwt = await get('batch', 'l2', { accept: 'application/statuslist+cwt' });
            expect(verifiedCwt(cwt.rawPayload).claims.get(65534)).to.equal(601);
            expect(signatures.jws).to.equal(1);
            await putConfig('batch', { bits: 1, capacity: 1024, ttlSeconds: 600, immediateUpdate: false });
        });

        it('answers max-age from the ttl the served token was signed with, not a ttl set since', async () => {
            await putConfig('batch', { bits: 1, capacity: 1024, ttlSeconds: 900, immediateUpdate: false });
            const res = await get('batch', 'l1');
            expect(res.headers['cache-control']).to.equal('max-age=600');
            expect((await verifiedJwtPayload(res.payload)).ttl).to.equal(600);
            expect(signatures.jws).to.equal(0);
            // Its re-signing (due, or changed) takes the new ttl.
            await setEntry(t.server, 'batch', 'l1', 1, 11, 1);
            await t.server.jobs.runNow(STATUS_LIST_PUBLISH_JOB);
            const next = await get('batch', 'l1');
            expect(next.headers['cache-control']).to.equal('max-age=900');
            expect((await verifiedJwtPayload(next.payload)).ttl).to.equal(900);
            await putConfig('batch', { bits: 1, capacity: 1024, ttlSeconds: 600, immediateUpdate: false });
        });

        it('re-signs with immediateUpdate once due, and follows a switch of immediateUpdate at once', async () => {
            const before = (await get('live', 'l2')).payload;
            expect((await get('live', 'l2')).payload).to.equal(before);
            expect(signatures.jws).to.equal(1);
            await t.server.db.knex('status_list_states').where({ tenantId: 'live', listId: 'l2' }).update({ tokenRefreshAt: new Date(Date.now() - 1000).toISOString() });
            await putConfig('live', { bits: 1, capacity: 1024, ttlSeconds: 601, immediateUpdate: true });
            expect((await get('live', 'l2')).payload).to.not.equal(before);
            expect(signatures.jws).to.equal(2);

            await putConfig('batch', { bits: 1, capacity: 1024, ttlSeconds: 300, immediateUpdate: true });
            await setEntry(t.server, 'batch', 'l2', 1, 9, 1);
            expect(await status('batch', 'l2', 9)).to.equal(1);
            await putConfig('batch', { bits: 1, capacity: 1024, ttlSeconds: 600, immediateUpdate: false });
        });

        it('re-signs a token whose ttl the tenant shortened since: the job without immediateUpdate, the next GET with it', async () => {
            // A token of a longer ttl (what earlier tests left), then the ttl shortened to 60: relying parties must not be told to keep it longer.
            expect(maxAge(await get('batch', 'l2'))).to.be.above(60);
            await putConfig('batch', { bits: 1, capacity: 1024, ttlSeconds: 60, immediateUpdate: false });
            await t.server.jobs.runNow(STATUS_LIST_PUBLISH_JOB);
            const batch = await get('batch', 'l2');
            expect(batch.headers['cache-control']).to.equal('max-age=60');
            expect((await verifiedJwtPayload(batch.payload)).ttl).to.equal(60);
            // A lengthened ttl waits for the token to be due: the shorter promise stays true.
            await putConfig('batch', { bits: 1, capacity: 1024, ttlSeconds: 600, immediateUpdate: false });
            const before = signatures.jws;
            await t.server.jobs.runNow(STATUS_LIST_PUBLISH_JOB);
            expect(signatures.jws - before).to.equal(0);

            expect(maxAge(await get('live', 'l2'))).to.be.above(60);
            await putConfig('live', { bits: 1, capacity: 1024, ttlSeconds: 60, immediateUpdate: true });
            expect((await get('live', 'l2')).headers['cache-control']).to.equal('max-age=60');
            await putConfig('live', { bits: 1, capacity: 1024, ttlSeconds: 600, immediateUpdate: true });
        });

        it('marks the token stale when the list document changes (e.g. another signing chain), for the job to re-sign', async () => {
            await get('batch', 'l1');
            await t.server.jobs.runNow(STATUS_LIST_PUBLISH_JOB);
            const signed = signatures.jws;
            const change = await t.server.inject({ method: 'POST', url: '/api/key-chain', payload: { id: 'other', usageType: 'attestation' }, headers: bearer(admins.batch!) });
            expect(change.statusCode).to.equal(201);
            await t.server.registry.write({ tenantId: 'batch', clientId: 'test', roles: [] }, statusListKind, { id: 'l1', bits: 1, capacity: 1024, keyChainId: 'other' });
            expect((await tokenRow('batch', 'l1')).tokenVersion).to.be.null();
            await t.server.jobs.runNow(STATUS_LIST_PUBLISH_JOB);
            expect(signatures.jws).to.equal(signed + 1);
            const chain = ((await t.server.inject({ method: 'GET', url: '/api/key-chain/other', headers: bearer(admins.batch!) })).result as any).certificateChain as string[];
            const header = JSON.parse(Buffer.from((await get('batch', 'l1')).payload.split('.')[0]!, 'base64url').toString());
            expect(header.x5c[0]).to.equal(chain[0]!.replace(/-----[A-Z ]+-----|\s/g, ''));
        });

        it('keeps publishing the other lists when one cannot be signed (its KMS fails)', async () => {
            await get('live', 'l2');
            await setEntry(t.server, 'live', 'l2', 1, 1, 1);
            await setEntry(t.server, 'batch', 'l2', 1, 2, 1);
            signatures.jws = 0;
            failing.add('live');
            try {
                await t.server.jobs.runNow(STATUS_LIST_PUBLISH_JOB);
            }
            finally {
                failing.delete('live');
            }
            expect(signatures.jws).to.equal(1);
            expect(await status('batch', 'l2', 2)).to.equal(1);
            const live = await tokenRow('live', 'l2');
            expect(live.tokenVersion).to.equal(live.entriesVersion - 1);
            // The next run (or GET with immediateUpdate) publishes it.
            await t.server.jobs.runNow(STATUS_LIST_PUBLISH_JOB);
            expect(await status('live', 'l2', 1)).to.equal(1);
        });

        it('publishes on its own schedule when the worker runs (graphile-worker on PostgreSQL, timers on SQLite)', async () => {
            const w = await startTestServer(dialect, { manifest: publishingEvery(1), env: { WORKER: 'on' }, listen: true });
            try {
                const root = await rootToken(w.server);
                await createTenant(w.server, root, 'acme', { statusListConfig: { bits: 2, capacity: 64, ttlSeconds: 600, immediateUpdate: false } });
                const admin = (await clientWithToken(w.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
                await w.server.inject({ method: 'POST', url: '/api/key-chain', payload: { id: 'k', usageType: 'statusList' }, headers: bearer(admin) });
                await w.server.inject({ method: 'POST', url: '/api/status-lists', payload: { id: 'l' }, headers: bearer(admin) });
                await w.server.inject({ method: 'GET', url: url('acme', 'l') });
                await setEntry(w.server, 'acme', 'l', 2, 10, 2);
                await waitFor('the job to publish', async () => {
                    const res = await w.server.inject({ method: 'GET', url: url('acme', 'l') });
                    return getListFromStatusListJWT(res.payload).getStatus(10) === 2;
                });
                const lst = (verifiedCwt((await w.server.inject({ method: 'GET', url: url('acme', 'l'), headers: { accept: 'application/statuslist+cwt' } })).rawPayload).claims.get(65533) as Map<string, Uint8Array>).get('lst')!;
                expect(Zlib.inflateSync(lst)[2]).to.equal(0b0010_0000);
            }
            finally {
                await w.stop();
            }
        });

        if (dialect === 'postgres') {
            it('publishes each change once with two processes on one database', async () => {
                const a = await startTestServer(dialect, { manifest: publishingEvery(1), env: { WORKER: 'on' }, listen: true });
                let b: Hapi.Server | undefined;
                const runs = { count: 0 };
                const publishStale = StatusListService.prototype.publishStale;
                try {
                    const config = loadConfig(testEnv(a.database, { WORKER: 'on' }));
                    b = await createServer({ ...publishingEvery(1)(config), server: { port: 0, host: '127.0.0.1' } }, { logger: Pino({ level: 'silent' }) });
                    await b.start();
                    const counts = [countSignatures(a.server), countSignatures(b)];
                    const root = await rootToken(a.server);
                    await createTenant(a.server, root, 'acme', { statusListConfig: { bits: 1, capacity: 256, ttlSeconds: 600, immediateUpdate: false } });
                    const admin = (await clientWithToken(a.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
                    await a.server.inject({ method: 'POST', url: '/api/key-chain', payload: { id: 'k', usageType: 'statusList' }, headers: bearer(admin) });
                    const lists = Array.from({ length: 8 }, (_, i) => `l${i}`);
                    for (const id of lists) {
                        await a.server.inject({ method: 'POST', url: '/api/status-lists', payload: { id }, headers: bearer(admin) });
                        // Half the first tokens signed by each process.
                        expect((await (lists.indexOf(id) % 2 ? a.server : b).inject({ method: 'GET', url: url('acme', id) })).statusCode).to.equal(200);
                    }
                    const signed = () => counts[0]!.jws + counts[1]!.jws;
                    expect(signed()).to.equal(8);

                    StatusListService.prototype.publishStale = function (this: StatusListService, ...args) {
                        runs.count++;
                        return publishStale.apply(this, args);
                    };
                    for (const id of lists) {
                        await setEntry(a.server, 'acme', id, 1, 100, 1);
                    }
                    const published = async () => {
                        const rows = await a.server.db.knex('status_list_states').where({ tenantId: 'acme' }).select('entriesVersion', 'tokenVersion');
                        return rows.every((r) => r.entriesVersion === r.tokenVersion);
                    };
                    await waitFor('every list to be published', published);
                    const startedRuns = runs.count;
                    await sleep(3500);
                    // One token per changed list, whichever process ran the job, and no run of both at once.
                    expect(signed()).to.equal(16);
                    expect(counts[0]!.cose + counts[1]!.cose).to.equal(16);
                    // One chain of runs a second apart across both processes (both would make twice as many).
                    expect(runs.count - startedRuns).to.be.within(2, 4);
                    for (const id of lists) {
                        const res = await b.inject({ method: 'GET', url: url('acme', id) });
                        expect(getListFromStatusListJWT(res.payload).getStatus(100)).to.equal(1);
                    }

                    // With immediateUpdate, concurrent GETs on both processes after a change: one signature.
                    await a.server.inject({ method: 'PUT', url: '/api/status-list-config', payload: { bits: 1, capacity: 256, ttlSeconds: 600, immediateUpdate: true }, headers: bearer(admin) });
                    // B learns of the tenant change through its cache's TTL: until then it serves what it holds.
                    await sleep(5100);
                    await setEntry(a.server, 'acme', 'l0', 1, 200, 1);
                    const before = signed();
                    const answers = await Promise.all([a.server, b, a.server, b, a.server, b].map((server) => server.inject({ method: 'GET', url: url('acme', 'l0') })));
                    expect(answers.map((res) => getListFromStatusListJWT(res.payload).getStatus(200))).to.equal([1, 1, 1, 1, 1, 1]);
                    // One signature; a second only when the process waiting for the other's claim gave up after
                    // SIGNING_WAIT_MS (a CPU-starved machine), never one per GET.
                    expect(signed() - before).to.be.within(1, 2);
                }
                finally {
                    StatusListService.prototype.publishStale = publishStale;
                    await b?.stop();
                    await a.stop();
                }
            });
        }
    });
}
