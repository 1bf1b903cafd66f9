import Cluster from 'node:cluster';
import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { ClusterIpcBus, PgNotifyBus, relayClusterBus, type ChangeBus } from '../lib/change-bus';
import { createKnex } from '../lib/db/knex';

/**
 * How fast a change reaches another process over each change-bus transport, and what the rejected alternative
 * (a change-log table on SQLite, polled) would cost per change. One-way latency from publish to the receiver's
 * handler, including the bus's 5 ms batching window, with a message every 2 ms.
 *
 *   node -r ./scripts/register-ts.js bench/change-bus.ts
 *
 * PostgreSQL from HALLMARK_TEST_PG_HOST/PORT/USER/PASSWORD (default 127.0.0.1:5432 postgres/postgres, database
 * postgres); skipped when unreachable.
 */

const MESSAGES = 1000;
const SPACING_MS = 2;

const now = () => performance.timeOrigin + performance.now();

const summary = (latencies: number[]) => {
    const sorted = [...latencies].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!.toFixed(2);
    return `n=${sorted.length} p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${sorted.at(-1)!.toFixed(2)} ms`;
};

/** Sends MESSAGES from `from`, resolves with the latencies `to` saw. */
const measure = async (from: ChangeBus, to: ChangeBus): Promise<number[]> => {
    const latencies: number[] = [];
    to.subscribe('bench', (data) => latencies.push(now() - (data as { at: number }).at));
    for (let i = 0; i < MESSAGES; i++) {
        from.publish('bench', { at: now(), i });
        await new Promise((r) => setTimeout(r, SPACING_MS));
    }
    const deadline = Date.now() + 5000;
    while (latencies.length < MESSAGES && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
    }
    return latencies;
};

const postgres = async () => {
    const db = {
        type: 'postgres' as const,
        host: process.env.HALLMARK_TEST_PG_HOST ?? '127.0.0.1',
        port: Number(process.env.HALLMARK_TEST_PG_PORT ?? 5432),
        user: process.env.HALLMARK_TEST_PG_USER ?? 'postgres',
        password: process.env.HALLMARK_TEST_PG_PASSWORD ?? 'postgres',
        database: 'postgres'
    };
    const knex = createKnex(db);
    const [a, b] = [new PgNotifyBus(db, knex), new PgNotifyBus(db, knex)];
    try {
        await a.start();
        await b.start();
        process.stdout.write(`postgres LISTEN/NOTIFY:      ${summary(await measure(a, b))}` + '\n');
    }
    catch (err) {
        process.stdout.write(`postgres LISTEN/NOTIFY:      skipped (${(err as Error).message})` + '\n');
    }
    finally {
        await Promise.all([a.close(), b.close()]);
        await knex.destroy();
    }
};

/** The alternative for SQLite: one autocommitted row per change in WAL mode (what every worker's poll would read). */
const changeLogWrite = () => {
    const folder = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-bus-'));
    const db = new Database(Path.join(folder, 'changes.db'));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.exec('create table changes (seq integer primary key, topic text not null, data text not null, at integer not null)');
    const insert = db.prepare('insert into changes (topic, data, at) values (?, ?, ?)');
    const started = performance.now();
    for (let i = 0; i < MESSAGES; i++) {
        insert.run('registry.change', JSON.stringify({ kind: 'Client', tenantId: 'acme', id: `c${i}` }), Date.now());
    }
    const perWrite = (performance.now() - started) / MESSAGES;
    db.close();
    Fs.rmSync(folder, { recursive: true, force: true });
    process.stdout.write(`sqlite change-log table:     ${(perWrite * 1000).toFixed(0)} µs per change written under the write lock, plus half the poll interval of delay on average` + '\n');
};

if (Cluster.isPrimary) {
    relayClusterBus(Cluster);
    const results = new Promise<number[]>((resolve) => Cluster.on('message', (_worker, message: { latencies?: number[] }) => {
        if (message.latencies) {
            resolve(message.latencies);
        }
    }));
    const [sender, receiver] = [Cluster.fork({ BENCH_ROLE: 'send' }), Cluster.fork({ BENCH_ROLE: 'receive' })];
    void (async () => {
        process.stdout.write(`change bus, ${MESSAGES} messages every ${SPACING_MS} ms, node ${process.version}, ${Os.availableParallelism()} cores, load ${Os.loadavg()[0]!.toFixed(2)}` + '\n');
        process.stdout.write(`cluster IPC (via primary):   ${summary(await results)}` + '\n');
        sender.kill();
        receiver.kill();
        await postgres();
        changeLogWrite();
        process.exit(0);
    })();
}
else {
    const bus = new ClusterIpcBus();
    void bus.start().then(async () => {
        if (process.env.BENCH_ROLE === 'receive') {
            const latencies: number[] = [];
            bus.subscribe('bench', (data) => {
                latencies.push(now() - (data as { at: number }).at);
                if (latencies.length === MESSAGES) {
                    process.send!({ latencies });
                }
            });
            process.send!({ ready: true });
        }
        else {
            // Give the receiver time to subscribe.
            await new Promise((r) => setTimeout(r, 1500));
            for (let i = 0; i < MESSAGES; i++) {
                bus.publish('bench', { at: now(), i });
                await new Promise((r) => setTimeout(r, SPACING_MS));
            }
        }
    });
}
