import Crypto from 'node:crypto';
import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import autocannon from 'autocannon';
import Knex from 'knex';
import { knexSnakeCaseMappers } from 'objection';
import Pino from 'pino';
import { createServer } from '../lib/compose';
import { loadConfig } from '../manifests/environment';
import { manifest } from '../manifests/default';
import { StatusListService } from '../plugins/status/services/status-lists';
import { keyChainKind } from '../resources/key-chain';
import { statusListKind } from '../resources/status-list';
import { tenantKind } from '../resources/tenant';
import { cpuMs, post, ROOT, startService } from './service';
import { percentile, printTable } from './table';

const run = (options: autocannon.Options) => new Promise<autocannon.Result>((resolve, reject) =>
    autocannon(options, (err, result) => (err ? reject(err) : resolve(result))));

/** Packed entries of `capacity` entries of `bits` bits, `share` of them non-zero at random indexes. */
const entries = (bits: number, capacity: number, share: number): Buffer => {
    const bytes = Buffer.alloc(Math.ceil((bits * capacity) / 8));
    for (let i = 0; i < capacity; i++) {
        if (Math.random() < share) {
            const value = 1 + Crypto.randomInt((1 << bits) - 1);
            const bit = i * bits;
            bytes[bit >> 3] |= value << (bit % 8);
        }
    }
    return bytes;
};

/**
 * GET of a cached status list token: one service process (SQLite), loaded by autocannon from this process over
 * keep-alive; the service's own CPU time per request beside the rate.
 */
const benchTokenGet = async (): Promise<void> => {
    const service = await startService(3921);
    try {
        const root = (await post(`${service.url}/api/oauth2/token`, { grant_type: 'client_credentials', client_id: ROOT.id, client_secret: ROOT.secret })).body.access_token;
        const rows: Array<Record<string, string | number>> = [];
        for (const immediateUpdate of [false, true]) {
            const tenant = immediateUpdate ? 'live' : 'batch';
            await post(`${service.url}/api/tenants`, { id: tenant, name: tenant, statusListConfig: { bits: 1, capacity: 100_000, ttlSeconds: 3600, immediateUpdate } }, { authorization: `Bearer ${root}` });
            const created = await post(`${service.url}/api/clients`, { clientId: `${tenant}-admin`, roles: ['tenant:admin'], tenantId: tenant }, { authorization: `Bearer ${root}` });
            const token = (await post(`${service.url}/api/oauth2/token`, { grant_type: 'client_credentials', client_id: `${tenant}-admin`, client_secret: created.body.clientSecret })).body.access_token;
            await post(`${service.url}/api/key-chain`, { id: 'status', usageType: 'statusList' }, { authorization: `Bearer ${token}` });
            await post(`${service.url}/api/status-lists`, { id: 'l' }, { authorization: `Bearer ${token}` });
        }
        // 1% of 100,000 credentials revoked, written as an entry change would (the token is signed at the first GET).
        const knex = Knex({ ...knexSnakeCaseMappers(), client: 'better-sqlite3', connection: { filename: Path.join(service.folder, 'service.db') }, useNullAsDefault: true });
        try {
            for (const tenantId of ['batch', 'live']) {
                await knex('status_list_states').where({ tenantId, listId: 'l' }).update({ entries: entries(1, 100_000, 0.01), entriesVersion: 1 });
            }
        }
        finally {
            await knex.destroy();
        }
        const cases: Array<[string, string, Record<string, string>]> = [
            ['JWT, cached (no immediateUpdate)', 'batch', {}],
            ['CWT, cached (no immediateUpdate)', 'batch', { accept: 'application/statuslist+cwt' }],
            ['JWT, immediateUpdate (version read per GET)', 'live', {}],
            ['JWT, If-None-Match -> 304', 'batch', {}],
            // The framework's floor on this machine: the same server answering its cheapest route.
            ['GET /health (for comparison)', '', {}]
        ];
        for (const [name, tenant, headers] of cases) {
            const url = tenant ? `${service.url}/issuers/${tenant}/status-management/status-list/l` : `${service.url}/health`;
            const first = await fetch(url, { headers });
            const size = (await first.arrayBuffer()).byteLength;
            const conditional = name.includes('304') ? { 'if-none-match': first.headers.get('etag')! } : {};
            await run({ url, headers: { ...headers, ...conditional }, connections: 8, duration: 2 });
            const before = cpuMs(service.pid);
            const result = await run({ url, headers: { ...headers, ...conditional }, connections: 32, duration: 8 });
            const cpu = cpuMs(service.pid) - before;
            rows.push({
                case: name,
                'body bytes': conditional['if-none-match'] ? 0 : size,
                'req/s': Math.round(result.requests.average),
                'p50 ms': result.latency.p50,
                'p99 ms': result.latency.p99,
                'server CPU µs/req': Math.round((cpu * 1000) / Math.max(1, result.requests.total)),
                errors: result.non2xx + result.errors - (name.includes('304') ? result['3xx'] ?? 0 : 0),
                target: tenant ? '>= 10000/s' : ''
            });
        }
        printTable('Status list token GET (one process, SQLite, 100,000 entries with 1% set, 32 connections, 8 s)', rows);
    }
    finally {
        await service.stop();
    }
};

/** Publishing a list of 1,000,000 entries: read the entries, deflate once, sign the JWT and the CWT, store both. */
const benchSigning = async (): Promise<void> => {
    const folder = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-bench-status-'));
    const config = loadConfig({ PUBLIC_URL: 'http://127.0.0.1', FOLDER: folder, MASTER_SECRET: 'm'.repeat(40), AUTH_CLIENT_ID: 'root', AUTH_CLIENT_SECRET: 'bench-root-secret-0123', WORKER: 'off', LOG_LEVEL: 'error' });
    const server = await createServer(manifest(config), { logger: Pino({ level: 'silent' }) });
    await server.initialize();
    try {
        const ctx = { clientId: 'bench', roles: [] };
        await server.registry.write(ctx, tenantKind, { id: 'bench', name: 'Bench', statusListConfig: { bits: 1, capacity: 100_000, ttlSeconds: 3600, immediateUpdate: true } });
        const tenant = { ...ctx, tenantId: 'bench' };
        await server.registry.write(tenant, keyChainKind, { id: 'status', usageType: 'statusList' });
        const lists = new StatusListService({ db: server.db, registry: server.registry, signing: server.signing, publicUrl: 'http://127.0.0.1' });
        const rows: Array<Record<string, string | number>> = [];
        const cases: Array<[string, 1 | 2 | 8, number]> = [
            ['1 bit, 1% revoked', 1, 0.01],
            ['1 bit, 50% revoked (incompressible)', 1, 0.5],
            ['2 bits, 5% non-zero', 2, 0.05],
            ['8 bits, 1% non-zero', 8, 0.01]
        ];
        for (const [name, bits, share] of cases) {
            const id = `l${bits}-${Math.round(share * 100)}`;
            await server.registry.write(tenant, statusListKind, { id, bits, capacity: 1_000_000 });
            const state = server.db.knex('status_list_states').where({ tenantId: 'bench', listId: id });
            await state.clone().update({ entries: entries(bits, 1_000_000, share) });
            const times: number[] = [];
            let size = 0;
            for (let i = 0; i < 12; i++) {
                // An entry change: the next GET of an immediateUpdate list re-signs.
                await state.clone().increment('entriesVersion', 1);
                const start = process.hrtime.bigint();
                const token = await lists.token('bench', id);
                times.push(Number(process.hrtime.bigint() - start) / 1e6);
                size = token!.jwt.body.length;
            }
            const measured = times.slice(2).sort((a, b) => a - b);
            rows.push({ list: `1,000,000 entries, ${name}`, 'JWT bytes': size, 'p50 ms': percentile(measured, 50), 'max ms': measured[measured.length - 1]!, target: '< 200 ms' });
        }
        printTable('Status list publish (in-process, SQLite, db KMS provider: read, deflate, sign JWT + CWT, store)', rows);
    }
    finally {
        await server.stop();
        Fs.rmSync(folder, { recursive: true, force: true });
    }
};

export const benchStatusLists = async (): Promise<void> => {
    await benchSigning();
    await benchTokenGet();
};
