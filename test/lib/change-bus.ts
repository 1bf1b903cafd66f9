import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import type { Knex } from 'knex';
import { Client } from 'pg';
import Pino from 'pino';
import { LocalBus, PgNotifyBus, createChangeBus, type ChangeBus } from '../../lib/change-bus';
import type { DatabaseConfig } from '../../lib/db/config';
import { createKnex } from '../../lib/db/knex';
import { loadConfig } from '../../manifests/environment';
import { DIALECTS, createTestDatabase, type TestDatabase } from '../helpers/databases';
import { testEnv } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

/** Resolves with the next `count` messages a bus delivers on `topic`. */
const collect = (bus: ChangeBus, topic: string) => {
    const received: unknown[] = [];
    bus.subscribe(topic, (data) => received.push(data));
    return {
        received,
        next: async (count: number, ms = 5000) => {
            const deadline = Date.now() + ms;
            while (received.length < count) {
                if (Date.now() > deadline) {
                    throw new Error(`got ${received.length} of ${count} messages`);
                }
                await new Promise((r) => setTimeout(r, 10));
            }
            return received.slice(0, count);
        }
    };
};

const quietLog = () => {
    const lines: Array<Record<string, unknown>> = [];
    const log = Pino({ level: 'debug' }, { write: (line: string) => lines.push(JSON.parse(line)) });
    return { log, lines };
};

describe('change bus', () => {
    it('has no peers in a single SQLite process: publishing is free and nothing comes back', async () => {
        const knex = createKnex({ type: 'sqlite', filename: ':memory:' });
        try {
            const bus = createChangeBus({ type: 'sqlite', filename: ':memory:' }, knex);
            expect(bus).to.be.an.instanceof(LocalBus);
            expect(bus.transport).to.equal('none');
            const { received } = collect(bus, 'topic');
            await bus.start();
            bus.publish('topic', { a: 1 });
            await new Promise((r) => setTimeout(r, 30));
            expect(received).to.equal([]);
            await bus.close();
            bus.publish('topic', { a: 2 });
        }
        finally {
            await knex.destroy();
        }
    });

    if (DIALECTS.includes('postgres')) {
        describe('on PostgreSQL (LISTEN/NOTIFY)', () => {
            let db: TestDatabase;
            let config: Extract<DatabaseConfig, { type: 'postgres' }>;
            let knex: Knex;

            before(async () => {
                db = await createTestDatabase('postgres');
                config = loadConfig(testEnv(db)).db as typeof config;
                knex = createKnex(config);
            });

            after(async () => {
                await knex?.destroy();
                await db?.drop();
            });

            const open = async (log?: Pino.Logger) => {
                const bus = createChangeBus(config, knex, log);
                expect(bus).to.be.an.instanceof(PgNotifyBus);
                await bus.start();
                return bus;
            };

            it('delivers to every other process in order, never back to the sender', async () => {
                const [a, b, c] = [await open(), await open(), await open()];
                try {
                    const atA = collect(a, 'registry.change');
                    const atB = collect(b, 'registry.change');
                    const atC = collect(c, 'registry.change');
                    const other = collect(b, 'other.topic');
                    for (let i = 0; i < 50; i++) {
                        a.publish('registry.change', { kind: 'Client', tenantId: null, id: `c${i}` });
                    }
                    const expected = Array.from({ length: 50 }, (_, i) => ({ kind: 'Client', tenantId: null, id: `c${i}` }));
                    expect(await atB.next(50)).to.equal(expected);
                    expect(await atC.next(50)).to.equal(expected);
                    c.publish('registry.change', { kind: 'Tenant', tenantId: 'acme', id: 'acme' });
                    expect((await atA.next(1))[0]).to.equal({ kind: 'Tenant', tenantId: 'acme', id: 'acme' });
                    await new Promise((r) => setTimeout(r, 100));
                    expect(atA.received).to.have.length(1);
                    expect(atC.received).to.have.length(50);
                    expect(other.received).to.equal([]);
                }
                finally {
                    await Promise.all([a.close(), b.close(), c.close()]);
                }
            });

            it('ignores what others notify on its channel, drops an oversized message, and a failing handler harms no other', async () => {
                const { log, lines } = quietLog();
                const [a, b] = [await open(log), await open(log)];
                const client = new Client({ host: config.host, port: config.port, user: config.user, password: config.password, database: config.database });
                await client.connect();
                try {
                    b.subscribe('t', () => {
                        throw new Error('handler bug');
                    });
                    const atB = collect(b, 't');
                    for (const payload of ['not json', '{"origin":1}', JSON.stringify({ origin: 'x', messages: [null, { topic: 't' }] }), '[]']) {
                        await client.query('select pg_notify($1, $2)', ['hallmark_changes', payload]);
                    }
                    a.publish('t', { big: 'x'.repeat(8000) });
                    a.publish('t', { small: true });
                    const got = await atB.next(2);
                    // The well-formed foreign envelope's message without data, then ours; the big one never left.
                    expect(got).to.equal([undefined, { small: true }]);
                    expect(lines.some((l) => l.msg === 'change bus: message too large, not sent' && l.topic === 't')).to.be.true();
                    expect(lines.some((l) => l.msg === 'change bus: a handler failed')).to.be.true();
                }
                finally {
                    await client.end();
                    await Promise.all([a.close(), b.close()]);
                }
            });

            it('reconnects its listening connection when it is cut, and hears later changes', async () => {
                const { log, lines } = quietLog();
                const [a, b] = [await open(), await open(log)];
                const admin = new Client({ host: config.host, port: config.port, user: config.user, password: config.password, database: config.database });
                await admin.connect();
                try {
                    const atB = collect(b, 't');
                    await admin.query("select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and query ilike 'LISTEN%'");
                    // Sent until one arrives: those sent while b reconnects are lost (the caches' TTL covers that).
                    const deadline = Date.now() + 10_000;
                    while (!atB.received.length && Date.now() < deadline) {
                        a.publish('t', { n: 1 });
                        await new Promise((r) => setTimeout(r, 100));
                    }
                    expect(atB.received[0]).to.equal({ n: 1 });
                    expect(lines.some((l) => l.msg === 'change bus: listening connection lost; reconnecting')).to.be.true();
                }
                finally {
                    await admin.end();
                    await Promise.all([a.close(), b.close()]);
                }
            });
        });
    }
});
