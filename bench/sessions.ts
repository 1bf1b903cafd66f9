import type Hapi from '@hapi/hapi';
import type { Knex } from 'knex';
import Pino from 'pino';
import { createServer } from '../lib/compose';
import { loadConfig } from '../manifests/environment';
import { PG_LIST_SETTINGS, pgPageSettings, SessionSearch, SORT_KEYS, type SessionListQuery } from '../plugins/sessions/services/search';
import { SessionService, sha256Hex } from '../plugins/sessions/services/session-service';
import { SingleUseStore } from '../lib/db/single-use';
import type { Database } from '../lib/db/database';
import { stopCheckpointer } from '../lib/db/knex';
import Crypto from 'node:crypto';
import { manifest } from '../manifests/default';
import { bearer, clientWithToken, createTenant, rootToken } from '../test/helpers/auth';
import { createTestDatabase, type DialectName } from '../test/helpers/databases';
import { testEnv } from '../test/helpers/server';
import * as indexBudget from '../plugins/sessions/migrations/20261126_0013_session_index_budget';
import * as lateUpdates from '../plugins/sessions/migrations/20261128_0016_session_late_updates';
import { threadsCpuNs } from './harness';
import { percentile, printTable } from './table';

const SESSIONS = Number(process.env.HALLMARK_BENCH_SESSIONS ?? 1_000_000);
/** HALLMARK_BENCH_DIALECTS=postgres (or sqlite) runs one database only; both by default. */
const BENCH_DIALECTS = (process.env.HALLMARK_BENCH_DIALECTS ?? 'sqlite,postgres').split(',').filter((d): d is DialectName => d === 'sqlite' || d === 'postgres');
const REQUESTS = 200;
const WARMUP = 10;
export const TENANT = 'bench';
const DAY_SECONDS = 86_400;
/** Seeded sessions span the 90 days before today (midnight UTC), so that the flows of the write bench come after them, as new sessions do. */
const SPAN_DAYS = 90;
const today = (): number => Math.floor(Date.now() / 1000 / DAY_SECONDS) * DAY_SECONDS;

export interface Seeding {
    tenant: string;
    /** Unix seconds of the first session. */
    start: number;
    /** Seconds between two sessions. */
    step: number;
}

/** `count` sessions of a tenant over the 90 days before today. */
export const seeding = (tenant: string, count: number): Seeding => ({ tenant, start: today() - SPAN_DAYS * DAY_SECONDS, step: (SPAN_DAYS * DAY_SECONDS) / count });

/**
 * Column values of session i, as SQL over an integer `i`, written once for both dialects. Ids are time-ordered as
 * the service's (UUID version 7 layout: the creation time in milliseconds first). Types alternate; the
 * status cycles through all five independently of the type (so status=active&type=issuance matches a tenth, 100,000
 * of a million); two sessions share each reference; presentation sessions have a requestId out of 7 and a
 * walletNonce; failed presentation sessions a failureCode; issuance sessions one or two credential configurations,
 * a code hash and (every other one) an offer id (handles unique across tenants). updated_at lies up to a day after
 * created_at, and not after the end of the span.
 */
const columns = (dialect: DialectName, { tenant, start, step }: Seeding): Record<string, string> => {
    const pg = dialect === 'postgres';
    const time = (seconds: string) => (pg
        ? `to_timestamp(${start} + ${seconds})`
        : `strftime('%Y-%m-%dT%H:%M:%fZ', ${start} + ${seconds}, 'unixepoch')`);
    const hex = (bytes: number) => (pg ? `substr(md5(random()::text || i::text), 1, ${bytes * 2})` : `lower(hex(randomblob(${bytes})))`);
    const ms = pg ? `((${start} + i * ${step}) * 1000)::bigint` : `cast((${start} + i * ${step}) * 1000 as integer)`;
    const timeHex = pg
        ? `lpad(to_hex(${ms} / 65536), 8, '0') || '-' || lpad(to_hex(${ms} % 65536), 4, '0')`
        : `printf('%08x-%04x', ${ms} / 65536, ${ms} % 65536)`;
    const status = `(array['active', 'fetched', 'completed', 'failed', 'expired'])[((i / 2) % 5) + 1]`;
    const sqliteStatus = `case (i / 2) % 5 when 0 then 'active' when 1 then 'fetched' when 2 then 'completed' when 3 then 'failed' else 'expired' end`;
    const presentation = 'i % 2 = 1';
    return {
        id: `${timeHex} || '-7' || substr(${hex(2)}, 2) || '-' || ${hex(2)} || '-' || ${hex(6)}`,
        tenant_id: `'${tenant}'`,
        type: `case when ${presentation} then 'presentation' else 'issuance' end`,
        status: pg ? status : sqliteStatus,
        request_id: `case when ${presentation} then 'pc-' || ((i / 2) % 7) end`,
        credential_configuration_ids: `case when ${presentation} then null when i % 3 = 0 then '["pid","mdl"]' else '["pid"]' end`,
        reference: `'order-' || (i / 2)`,
        wallet_nonce: `case when ${presentation} then 'wn-${tenant}-' || i end`,
        offer_id: `case when i % 4 = 0 then 'of-${tenant}-' || i end`,
        code_hash: `case when not (${presentation}) then 'ch-${tenant}-' || i end`,
        failure_code: `case when ${presentation} and (i / 2) % 5 = 3 then (case i % 3 when 0 then 'signature_invalid' when 1 then 'access_denied' else 'trust_chain_not_trusted' end) end`,
        tx_code_failures: '0',
        created_at: time(`i * ${step}`),
        // Never after the end of the span (today): a service's sessions are not updated in the future.
        updated_at: time(`${pg ? 'least' : 'min'}(i * ${step} + ((i * 7919) % ${DAY_SECONDS}), ${SPAN_DAYS * DAY_SECONDS})`),
        expires_at: time(`i * ${step} + 300`)
    };
};

/** Bulk insert in SQL: a recursive CTE on SQLite, generate_series on PostgreSQL, in chunks of 100,000 per transaction. */
export const seedSessions = async (knex: Knex, dialect: DialectName, count: number, where: Seeding = seeding(TENANT, count)): Promise<void> => {
    const cols = columns(dialect, where);
    const names = Object.keys(cols).join(', ');
    const values = Object.values(cols).join(', ');
    const chunk = 100_000;
    const [cache] = dialect === 'sqlite' ? await knex.raw('pragma cache_size') as Array<{ cache_size: number }> : [];
    if (dialect === 'sqlite') {
        await knex.raw('pragma cache_size = -262144');
    }
    for (let from = 0; from < count; from += chunk) {
        const to = Math.min(count, from + chunk) - 1;
        const sql = dialect === 'postgres'
            ? `insert into sessions (${names}) select ${values} from generate_series(${from}::bigint, ${to}::bigint) as g(i)`
            : `insert into sessions (${names}) with recursive n(i) as (select ${from} union all select i + 1 from n where i < ${to}) select ${values} from n`;
        await knex.transaction((trx) => trx.raw(sql));
    }
    if (cache) {
        await knex.raw(`pragma cache_size = ${Number(cache.cache_size)}`);
    }
    // PostgreSQL: what autovacuum would do soon after a bulk load (statistics; visibility map for index-only scans).
    // SQLite: nothing. The service never runs ANALYZE there, so the plans below are the ones it gets without statistics.
    if (dialect === 'postgres') {
        await knex.raw('vacuum analyze sessions');
    }
    // The seeding's dirty pages written out now, not by a checkpoint in the middle of the timed requests.
    await knex.raw(dialect === 'postgres' ? 'checkpoint' : 'pragma wal_checkpoint(TRUNCATE)');
};


const WRITE_FLOWS = Number(process.env.HALLMARK_BENCH_WRITE_FLOWS ?? 2000);

/**
 * The session statements of one pre-authorized issuance flow, as the services run them: create the session (offer),
 * mark the offer fetched, redeem the code (access token hash), issue and consume the proof nonce, record the issued
 * credential in the sealed data (active → fetched). No HTTP, no signatures: what the index design costs per flow.
 */
const flowWrites = async (sessions: SessionService, singleUse: SingleUseStore, tenantId: string): Promise<void> => {
    const offerId = Crypto.randomUUID();
    const code = Crypto.randomBytes(24).toString('base64url');
    const token = Crypto.randomBytes(32).toString('base64url');
    const nonce = Crypto.randomBytes(24).toString('base64url');
    const session = await sessions.create({
        tenantId, type: 'issuance', offerId, codeHash: sha256Hex(code), credentialConfigurationIds: ['pid'], reference: `ref-${offerId.slice(0, 8)}`,
        expiresAt: new Date(Date.now() + 300_000).toISOString(), data: { claims: { pid: { given_name: 'Erika', family_name: 'Mustermann' } }, issued: [], events: [] } as never
    });
    const offered = await sessions.findBy('issuance', tenantId, 'offerId', offerId);
    await sessions.update(offered!.id, { offerFetchedAt: new Date().toISOString() }, { isNull: ['offerFetchedAt'] });
    const redeemed = await sessions.findBy('issuance', tenantId, 'codeHash', sha256Hex(code));
    await sessions.update(redeemed!.id, { codeUsedAt: new Date().toISOString(), accessTokenHash: sha256Hex(token), accessTokenExpiresAt: new Date(Date.now() + 300_000).toISOString() }, { isNull: ['codeUsedAt'] });
    await singleUse.issue(tenantId, `c_nonce:${nonce}`, 300);
    const bearer = await sessions.findBy('issuance', tenantId, 'accessTokenHash', sha256Hex(token));
    await singleUse.consume(tenantId, `c_nonce:${nonce}`);
    await sessions.mutateData<'issuance'>(bearer ?? session.id, (data) => ({ ...data, issued: [...((data as { issued?: unknown[] }).issued ?? []), { format: 'dc+sd-jwt' }] }) as never, {}, { advance: { from: 'active', to: 'fetched' } });
};

/** WAL written by the database so far: SQLite frames (pages) since the last truncation, PostgreSQL bytes. */
const walPosition = async (knex: Knex, dialect: DialectName): Promise<number> => {
    if (dialect === 'sqlite') {
        const [row] = await knex.raw('pragma wal_checkpoint(PASSIVE)') as Array<{ log: number }>;
        return row!.log;
    }
    const { rows } = await knex.raw("select pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint as at");
    return Number(rows[0].at);
};

/**
 * The PostgreSQL server processes of this database's connections (the pool's, open after the warm-up): their CPU is
 * the statements' cost on the server. None for SQLite, whose statements run in this process.
 */
const databaseBackends = async (knex: Knex, dialect: DialectName): Promise<number[]> => {
    if (dialect === 'sqlite') {
        return [];
    }
    const { rows } = await knex.raw('select pid from pg_stat_activity where datname = current_database()');
    return (rows as Array<{ pid: number }>).map((r) => Number(r.pid));
};

/**
 * CPU (this process, where SQLite's statements run, and on PostgreSQL the database's server processes too) and WAL
 * per flow, over `flows` flows one at a time. The CPU is measured with SQLite checkpointing as it does by itself (on the connection, so its cost is in the process's CPU;
 * the service's checkpointer thread is stopped); the WAL is counted in a round of half as many flows without
 * checkpoints (SQLite frames, PostgreSQL bytes). Counting the WAL with checkpoints off while timing let the WAL grow to
 * tens of thousands of frames, and every page that missed the page cache searched a wal-index that long: at a million
 * sessions, where more pages miss, that doubled the CPU per flow in some runs, a cost no service pays.
 */
export const writeCost = async (db: Database, dialect: DialectName, flows = WRITE_FLOWS): Promise<{ cpuMs: number; wal: number }> => {
    const sessions = new SessionService(db);
    const singleUse = new SingleUseStore(db);
    const run = async (n: number) => {
        for (let i = 0; i < n; i++) {
            await flowWrites(sessions, singleUse, TENANT);
        }
    };
    // Warm: the statements prepared and the code optimised before the measured flows.
    await run(300);
    if (dialect === 'sqlite') {
        await stopCheckpointer(db.knex);
        await db.knex.raw('pragma wal_autocheckpoint = 1000');
        await db.knex.raw('pragma wal_checkpoint(TRUNCATE)');
    }
    const backends = await databaseBackends(db.knex, dialect);
    const cpu = process.cpuUsage();
    const backendCpu = threadsCpuNs(backends);
    await run(flows);
    const used = process.cpuUsage(cpu);
    const backendMs = (threadsCpuNs(backends) - backendCpu) / 1e6;
    const walFlows = Math.max(1, Math.round(flows / 2));
    if (dialect === 'sqlite') {
        await db.knex.raw('pragma wal_autocheckpoint = 0');
        await db.knex.raw('pragma wal_checkpoint(TRUNCATE)');
    }
    const wal = await walPosition(db.knex, dialect);
    await run(walFlows);
    const written = (await walPosition(db.knex, dialect)) - wal;
    if (dialect === 'sqlite') {
        await db.knex.raw('pragma wal_autocheckpoint = 1000');
        await db.knex.raw('pragma wal_checkpoint(TRUNCATE)');
    }
    return { cpuMs: ((used.user + used.system) / 1000 + backendMs) / flows, wal: written / walFlows };
};

const WRITE_ROUNDS = 9;
const ROUND_FLOWS = WRITE_FLOWS / 5;

/**
 * The write cost on an empty database and on the seeded one, in WRITE_ROUNDS rounds of ROUND_FLOWS flows that
 * alternate between them, medians (five rounds left PostgreSQL's figure 14 % apart between the two in one run, 0 % in
 * the next): what the machine does meanwhile (other processes, the OS writing back the seeding) falls on both alike.
 */
const alternately = async (empty: Database, seeded: Database, dialect: DialectName): Promise<[{ cpuMs: number; wal: number }, { cpuMs: number; wal: number }]> => {
    const atZero: Array<{ cpuMs: number; wal: number }> = [];
    const atFull: Array<{ cpuMs: number; wal: number }> = [];
    for (let round = 0; round < WRITE_ROUNDS; round++) {
        atZero.push(await writeCost(empty, dialect, ROUND_FLOWS));
        atFull.push(await writeCost(seeded, dialect, ROUND_FLOWS));
    }
    const median = (costs: Array<{ cpuMs: number; wal: number }>) => ({
        cpuMs: percentile(costs.map((c) => c.cpuMs).sort((x, y) => x - y), 50),
        wal: percentile(costs.map((c) => c.wal).sort((x, y) => x - y), 50)
    });
    return [median(atZero), median(atFull)];
};

/**
 * The CPU of one issuance flow's session statements on SQLite through knex's builder and as prepared statements on
 * the connection (lib/db/direct.ts), alternately in one process (5 rounds of WRITE_FLOWS / 5 flows, the best round).
 */
export const directCost = async (): Promise<{ knexMs: number; directMs: number; pages: number }> => {
    const database = await createTestDatabase('sqlite');
    const config = loadConfig(testEnv(database, { NODE_ENV: 'production' }));
    const server = await createServer(manifest(config), { logger: Pino({ level: 'silent' }) });
    try {
        await server.initialize();
        await createTenant(server, await rootToken(server), TENANT);
        const db = server.db;
        const direct = db.direct;
        const best = { knexMs: Infinity, directMs: Infinity, pages: 0 };
        for (let round = 0; round < 5; round++) {
            (db as { direct?: unknown }).direct = undefined;
            best.knexMs = Math.min(best.knexMs, (await writeCost(db, 'sqlite', WRITE_FLOWS / 5)).cpuMs);
            (db as { direct?: unknown }).direct = direct;
            const measured = await writeCost(db, 'sqlite', WRITE_FLOWS / 5);
            best.directMs = Math.min(best.directMs, measured.cpuMs);
            best.pages = measured.wal;
        }
        return best;
    }
    finally {
        await server.stop();
        await database.drop();
    }
};

/** The indexes of `sessions` with their sizes (MiB). */
export const indexSizes = async (knex: Knex, dialect: DialectName): Promise<Array<{ name: string; mib: number }>> => {
    if (dialect === 'sqlite') {
        const rows = await knex.raw(`select name, sum(pgsize) as bytes from dbstat where name in (select name from sqlite_master where type = 'index' and tbl_name = 'sessions') or name = 'sessions' group by name order by name`) as Array<{ name: string; bytes: number }>;
        return rows.map((r) => ({ name: r.name === 'sessions' ? 'sessions (table)' : r.name, mib: r.bytes / 2 ** 20 }));
    }
    const { rows } = await knex.raw(`select indexrelname as name, pg_relation_size(indexrelid) as bytes from pg_stat_user_indexes where relname = 'sessions' union all select 'sessions (table)', pg_relation_size('sessions') order by 1`);
    return (rows as Array<{ name: string; bytes: string }>).map((r) => ({ name: r.name, mib: Number(r.bytes) / 2 ** 20 }));
};

const time = async (server: Hapi.Server, token: string, urls: () => string, requests = REQUESTS): Promise<{ p50: number; p95: number; total: string }> => {
    const samples: number[] = [];
    let total = '';
    for (let i = 0; i < WARMUP + requests; i++) {
        const url = urls();
        const start = process.hrtime.bigint();
        const res = await server.inject({ url, headers: bearer(token) });
        const ms = Number(process.hrtime.bigint() - start) / 1e6;
        if (res.statusCode !== 200) {
            throw new Error(`${url}: ${res.statusCode} ${res.payload}`);
        }
        const body = res.result as { total: number; totalCapped?: boolean; items: unknown[] };
        if (i >= WARMUP) {
            samples.push(ms);
        }
        total = `${body.total}${body.totalCapped ? '+' : ''}`;
    }
    samples.sort((a, b) => a - b);
    return { p50: percentile(samples, 50), p95: percentile(samples, 95), total };
};

/** EXPLAIN QUERY PLAN (SQLite) or EXPLAIN ANALYZE (PostgreSQL) of a built statement, as text lines. */
export const explain = async (knex: Knex, dialect: DialectName, builder: Knex.QueryBuilder): Promise<string[]> => {
    const { sql, bindings } = builder.toSQL();
    const result = await knex.raw(`${dialect === 'postgres' ? 'explain (analyze, costs off, timing on, summary on)' : 'explain query plan'} ${sql}`, bindings as Knex.RawBinding[]);
    const rows = (Array.isArray(result) ? result : result.rows) as Array<Record<string, unknown>>;
    return rows.map((row) => (dialect === 'postgres' ? String(Object.values(row)[0]) : `${String(row.detail)}`));
};

const pick = <T>(values: T[]): T => values[Math.floor(Math.random() * values.length)]!;

/** Requests per shape of the sort-order matrix (every sortBy both ways, with and without q, pages 1 and 100). */
const MATRIX_REQUESTS = 50;

/**
 * Times every query shape over one seeded tenant (the base shapes, then the sort-order matrix) into `rows`, and
 * explains the plans of the shapes that name their query into `plans`.
 */
const measureShapes = async (server: Hapi.Server, dialect: DialectName, where: Seeding, token: string, verifier: string, rows: Array<Record<string, string | number>>, plans: string[]): Promise<void> => {
    const knex = server.db.knex;
    const { tenant } = where;
    const count = Math.round((SPAN_DAYS * DAY_SECONDS) / where.step);
    const day = (n: number) => new Date((where.start + n * DAY_SECONDS) * 1000).toISOString();
    const perDay = Math.round(count / SPAN_DAYS).toLocaleString('en');
    const ids = (await knex('sessions').select('id').where('tenantId', tenant).orderBy('createdAt').offset(Math.floor(count / 2)).limit(REQUESTS)).map((r) => r.id as string);
    const oldest = ((await knex('sessions').select('id').where('tenantId', tenant).orderBy('createdAt').first()) as { id: string }).id;
    const reference = () => `order-${Math.floor(Math.random() * (count / 2))}`;
    const issuance = () => Math.floor(Math.random() * (count / 4)) * 4;
    const range = (from?: string, to?: string) => [from ? `createdFrom=${from}` : '', to ? `createdTo=${to}` : ''].filter(Boolean).join('&');
    const targets: Array<{ name: string; url: () => string; query?: () => Partial<SessionListQuery>; as?: string; requests?: number }> = [
        { name: 'status=active&type=issuance&sortBy=updatedAt&pageSize=25', url: () => '/api/session?status=active&type=issuance&sortBy=updatedAt&pageSize=25', query: () => ({ status: ['active'], type: 'issuance', sortBy: 'updatedAt' }) },
        { name: 'q=<reference>', url: () => `/api/session?q=${reference()}`, query: () => ({ q: reference() }) },
        { name: '(no filter)', url: () => '/api/session' },
        { name: 'q=<8-character id prefix>', url: () => `/api/session?q=${pick(ids).slice(0, 8)}` },
        { name: 'q=<pasted offer link, by reference>', url: () => `/api/session?q=${encodeURIComponent(`openid-credential-offer://?credential_offer_uri=${encodeURIComponent(`http://hallmark.test/issuers/${tenant}/vci/credential-offers/of-${tenant}-${issuance()}`)}`)}` },
        { name: 'q=<pre-authorized code> (no match)', url: () => `/api/session?q=${sha256Hex(String(Math.random()))}` },
        { name: 'status=failed&status=expired&sortBy=createdAt&sortOrder=asc', url: () => '/api/session?status=failed&status=expired&sortBy=createdAt&sortOrder=asc' },
        { name: 'requestId=pc-3&status=completed', url: () => '/api/session?requestId=pc-3&status=completed' },
        { name: 'failureCode=access_denied', url: () => '/api/session?failureCode=access_denied' },
        { name: 'credentialConfigurationId=mdl', url: () => '/api/session?credentialConfigurationId=mdl', query: () => ({ credentialConfigurationId: 'mdl' }) },
        { name: `createdFrom/createdTo (one day, ${perDay} sessions)`, url: () => `/api/session?${range(day(30), day(31))}`, query: () => ({ createdFrom: day(30), createdTo: day(31) }) },
        { name: 'createdFrom/createdTo (one hour)', url: () => `/api/session?${range(day(30), new Date(Date.parse(day(30)) + 3_600_000).toISOString())}` },
        { name: 'createdFrom/createdTo (one week)', url: () => `/api/session?${range(day(30), day(37))}`, query: () => ({ createdFrom: day(30), createdTo: day(37) }) },
        { name: 'createdTo (the first 30 days)', url: () => `/api/session?${range(undefined, day(30))}`, query: () => ({ createdTo: day(30) }) },
        { name: 'createdTo (the first 30 days), page 100', url: () => `/api/session?${range(undefined, day(30))}&page=100` },
        { name: 'createdFrom (the last 30 days)', url: () => `/api/session?${range(day(60))}` },
        { name: 'updatedFrom/updatedTo (one day)&sortBy=createdAt', url: () => `/api/session?updatedFrom=${day(30)}&updatedTo=${day(31)}&sortBy=createdAt` },
        { name: 'id=<4-character prefix>&status=completed', url: () => `/api/session?id=${pick(ids).slice(0, 4)}&status=completed` },
        { name: 'id=<4-character prefix>', url: () => `/api/session?id=${pick(ids).slice(0, 4)}` },
        // The oldest sessions' prefix: the far end of the default order, and the count's walk from the nearer end.
        { name: 'id=<4-character prefix of the oldest>&status=failed', url: () => `/api/session?id=${oldest.slice(0, 4)}&status=failed` },
        { name: 'q=<1-character id prefix>', url: () => `/api/session?q=${pick(ids).slice(0, 1)}`, query: () => ({ q: ids[0]!.slice(0, 1) }) },
        { name: 'status=active&type=issuance, page 100', url: () => '/api/session?status=active&type=issuance&page=100' },
        { name: '(presentation:request client) status=failed', url: () => '/api/session?status=failed', as: verifier },
        ...SORT_KEYS.flatMap((sortBy) => (['asc', 'desc'] as const).flatMap((sortOrder) => [false, true].flatMap((withQ) => [1, 100].map((page) => ({
            name: `sortBy=${sortBy}&sortOrder=${sortOrder}${withQ ? '&q=<1-character id prefix>' : ''}${page > 1 ? `&page=${page}` : ''}`,
            url: () => `/api/session?sortBy=${sortBy}&sortOrder=${sortOrder}${withQ ? `&q=${pick(ids).slice(0, 1)}` : ''}&page=${page}`,
            requests: MATRIX_REQUESTS
        })))))
    ];
    for (const target of targets) {
        const result = await time(server, target.as ?? token, target.url, target.requests);
        rows.push({ dialect, tenant: `${tenant} (${count.toLocaleString('en')})`, query: target.name, total: result.total, 'p50 ms': result.p50, 'p95 ms': result.p95 });
    }
    const search = new SessionSearch(server.db);
    for (const target of targets.filter((t) => t.query)) {
        const query = { page: 1, pageSize: 25, ...target.query!() } as SessionListQuery;
        const plan = await search.plan(tenant, ['issuance', 'presentation'], query);
        const built = search.builders(tenant, ['issuance', 'presentation'], query, plan);
        const explained = (statement: Knex.QueryBuilder) => (dialect === 'sqlite'
            ? explain(knex, dialect, statement)
            : knex.transaction(async (trx) => {
                await trx.raw(PG_LIST_SETTINGS);
                await trx.raw(pgPageSettings(search.pgPageAllows(query, plan)));
                return explain(trx, dialect, statement);
            }));
        plans.push(`\n${dialect}: ${target.name}: page`, ...(await explained(built.page)).map((l) => `  ${l}`));
        plans.push(`${dialect}: ${target.name}: count`, ...(await explained(built.count)).map((l) => `  ${l}`));
    }
};

/**
 * GET /api/session over 1,000,000 sessions of one tenant, on a fresh SQLite file and a fresh PostgreSQL database,
 * through a server built in-process (production settings: no response validation) and `server.inject`: p50/p95 of
 * 200 requests per query, after 10 warm-up requests. Prints the query plans (EXPLAIN QUERY PLAN / EXPLAIN ANALYZE)
 * of the target queries and of the time-range and short-prefix cases.
 * HALLMARK_BENCH_SESSIONS=<n> changes the size; HALLMARK_BENCH_DIALECTS=postgres runs one database only.
 */
export const benchSessions = async (): Promise<void> => {
    const rows: Array<Record<string, string | number>> = [];
    const writes: Array<Record<string, string | number>> = [];
    const sizes: Array<Record<string, string | number>> = [];
    for (const dialect of BENCH_DIALECTS) {
        const plans: string[] = [];
        const database = await createTestDatabase(dialect);
        const config = loadConfig(testEnv(database, { NODE_ENV: 'production' }));
        const server = await createServer(manifest(config), { logger: Pino({ level: 'silent' }) });
        // An empty database beside it: the write cost at 0, measured alternately with the cost at a million.
        const emptyDatabase = await createTestDatabase(dialect);
        const emptyServer = await createServer(manifest(loadConfig(testEnv(emptyDatabase, { NODE_ENV: 'production' }))), { logger: Pino({ level: 'silent' }) });
        try {
            await server.initialize();
            await emptyServer.initialize();
            await createTenant(emptyServer, await rootToken(emptyServer), TENANT);
            const root = await rootToken(server);
            await createTenant(server, root, TENANT);
            const token = (await clientWithToken(server, root, { clientId: 'bench-admin', roles: ['tenant:admin'], tenantId: TENANT })).token;
            const verifier = (await clientWithToken(server, root, { clientId: 'bench-verifier', roles: ['presentation:request'], tenantId: TENANT })).token;
            const knex = server.db.knex;

            // The same at 0 with the index design before migration 0013 (15 indexes), for comparison.
            await lateUpdates.down(knex);
            await indexBudget.down(knex);
            const before = await writeCost(server.db, dialect);
            await indexBudget.up(knex);
            await lateUpdates.up(knex);
            writes.push(
                { dialect, measure: `CPU ms per flow, 15 indexes (before 0013)`, 'at 0': before.cpuMs.toFixed(3), [`at ${SESSIONS}`]: '', change: '' },
                { dialect, measure: `WAL per flow, 15 indexes (before 0013)`, 'at 0': (dialect === 'sqlite' ? before.wal : before.wal / 1024).toFixed(1), [`at ${SESSIONS}`]: '', change: '' }
            );
            const seedStart = Date.now();
            await seedSessions(knex, dialect, SESSIONS);
            const seconds = (Date.now() - seedStart) / 1000;
            process.stdout.write(`${dialect}: ${SESSIONS} sessions inserted in ${seconds.toFixed(1)} s\n`);
            await measureShapes(server, dialect, seeding(TENANT, SESSIONS), token, verifier, rows, plans);

            // On a connection of its own, opened after the seeding: right after a bulk insert of a million sessions the
            // connection that made it paid about 1.7 times as much per flow as a fresh one on the same file (1.38 against
            // 0.81 ms; 0.75 at 0), which no service that grew its sessions one by one sees.
            const reopened = await createServer(manifest(config), { logger: Pino({ level: 'silent' }) });
            await reopened.initialize();
            const [empty, full] = await alternately(emptyServer.db, reopened.db, dialect).finally(() => reopened.stop());
            const unit = dialect === 'sqlite' ? 'WAL pages (4 KiB)' : 'WAL KiB';
            const walOf = (cost: { wal: number }) => (dialect === 'sqlite' ? cost.wal : cost.wal / 1024).toFixed(1);
            writes.push(
                { dialect, measure: `CPU ms per flow (session statements${dialect === 'postgres' ? ' with the PostgreSQL server processes' : ''}, median of ${WRITE_ROUNDS} alternating rounds of ${ROUND_FLOWS} flows)`, 'at 0': empty.cpuMs.toFixed(3), [`at ${SESSIONS}`]: full.cpuMs.toFixed(3), change: `${Math.round((full.cpuMs / empty.cpuMs - 1) * 100)}%` },
                { dialect, measure: `${unit} per flow`, 'at 0': walOf(empty), [`at ${SESSIONS}`]: walOf(full), change: `${Math.round((full.wal / empty.wal - 1) * 100)}%` }
            );
            for (const index of await indexSizes(knex, dialect)) {
                sizes.push({ dialect, index: index.name, MiB: index.mib.toFixed(1) });
            }

            // Ten more tenants of a tenth each: the same shapes for one of them, beside the million of the first.
            const tenants = Array.from({ length: 10 }, (_, i) => `bench-${i}`);
            for (const tenant of tenants) {
                await createTenant(server, root, tenant);
                await seedSessions(knex, dialect, SESSIONS / 10, seeding(tenant, SESSIONS / 10));
            }
            if (dialect === 'postgres') {
                await knex.raw('vacuum analyze sessions');
            }
            const other = tenants[5]!;
            const otherToken = (await clientWithToken(server, root, { clientId: `${other}-admin`, roles: ['tenant:admin'], tenantId: other })).token;
            const otherVerifier = (await clientWithToken(server, root, { clientId: `${other}-verifier`, roles: ['presentation:request'], tenantId: other })).token;
            await measureShapes(server, dialect, seeding(other, SESSIONS / 10), otherToken, otherVerifier, rows, []);
        }
        finally {
            await server.stop();
            await emptyServer.stop();
            await database.drop();
            await emptyDatabase.drop();
        }
        process.stdout.write(`\nQuery plans (${dialect})${plans.join('\n')}\n`);
        printTable(`${dialect}: GET /api/session (p95 target: 50 ms)`, rows.filter((r) => r.dialect === dialect));
    }
    printTable(`GET /api/session: a tenant of ${SESSIONS} sessions, then one of 10 more tenants of ${SESSIONS / 10}; ${REQUESTS} requests per shape (${MATRIX_REQUESTS} per sort-order shape) via server.inject (target: p95 < 50 ms)`, rows);
    printTable(`Indexes of sessions at ${SESSIONS} sessions`, sizes);
    printTable(`Write cost of one issuance flow's session statements at 0 and at ${SESSIONS} sessions (target: within 10 %)`, writes);
};
