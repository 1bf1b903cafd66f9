import { Writable } from 'node:stream';
import * as Lab from '@hapi/lab';
import { expect } from '@hapi/code';
import Knex from 'knex';
import Pino, { type Logger } from 'pino';
import { createJobRunner, InProcessJobRunner, type JobDefinition, type JobRunner } from '../../lib/jobs';
import { GRAPHILE_SCHEMA, GraphileJobRunner } from '../../lib/jobs/graphile';
import type { DatabaseConfig } from '../../lib/db/config';
import { createTestDatabase, DIALECTS, type TestDatabase } from '../helpers/databases';

export const lab = Lab.script();
const { describe, it, before, after, afterEach } = lab;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const waitFor = async (what: string, ready: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    while (!(await ready())) {
        if (Date.now() > deadline) {
            throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
        }
        await sleep(20);
    }
};

interface LogLine { level: number; msg: string; job?: string; err?: { message: string } }

const captureLogger = (): { log: Logger; lines: LogLine[] } => {
    const lines: LogLine[] = [];
    const sink = new Writable({
        write(chunk: Buffer, _encoding, done) {
            lines.push(JSON.parse(chunk.toString()) as LogLine);
            done();
        }
    });
    return { log: Pino({ level: 'debug' }, sink), lines };
};

const silent = Pino({ level: 'silent' });

const job = (name: string, schedule: JobDefinition['schedule'], run: JobDefinition['run'] = async () => {}): JobDefinition =>
    ({ name, schedule, run });

const pgKnex = (db: DatabaseConfig) => {
    if (db.type !== 'postgres') {
        throw new Error('PostgreSQL only');
    }
    return Knex({ client: 'pg', connection: { host: db.host, port: db.port, user: db.user, password: db.password, database: db.database }, pool: { min: 0, max: 1 } });
};

describe('job registration', () => {
    const memory: DatabaseConfig = { type: 'sqlite', filename: ':memory:' };

    it('rejects invalid names and schedules, naming the job', () => {
        const runner = createJobRunner({ db: memory, log: silent });
        expect(() => runner.register(job('bad cron', { cron: '* * * * *' }))).to.throw(/Invalid job name "bad cron"/);
        expect(() => runner.register(job('never', { cron: '61 * * * *' }))).to.throw(/Job "never": invalid five-field cron/);
        expect(() => runner.register(job('named-day', { cron: '0 3 * * MON' }))).to.throw(/Job "named-day"/);
        expect(() => runner.register(job('seconds', { cron: '* * * * * *' }))).to.throw(/Job "seconds"/);
        expect(() => runner.register(job('too-often', { everySeconds: 0.5 }))).to.throw(/Job "too-often": everySeconds must be a number of at least 1/);
        expect(() => runner.register(job('nan', { everySeconds: Number.NaN }))).to.throw(/Job "nan"/);
        expect(() => runner.register(job('shapeless', {} as JobDefinition['schedule']))).to.throw(/Job "shapeless": schedule must be/);
        runner.register(job('sessions.tidy-up:v1_0', { cron: '*/5 1-3 * * 1-5' }));
    });

    it('rejects duplicate names', () => {
        const runner = createJobRunner({ db: memory, log: silent });
        runner.register(job('twice', { everySeconds: 60 }));
        expect(() => runner.register(job('twice', { cron: '0 3 * * *' }))).to.throw('Job "twice" is already registered');
    });

    it('rejects registration after start', async () => {
        const runner = createJobRunner({ db: memory, log: silent });
        await runner.start();
        try {
            expect(() => runner.register(job('late', { everySeconds: 60 }))).to.throw(/Cannot register job "late"/);
        }
        finally {
            await runner.stop();
        }
    });
});

describe('in-process cron (fake clock)', () => {
    it('fires at the next UTC cron slot, computed by the clock it is given', async () => {
        const realStart = Date.now();
        const nextMinute = Math.ceil((realStart + 1) / 60_000) * 60_000;
        const slots = [
            { cron: '* * * * *', at: nextMinute },
            { cron: '0 3 * * *', at: Date.parse('2030-01-01T03:00:00.000Z') }
        ];
        const seen: Array<{ name: string; clock: number }> = [];
        const runners = slots.map(({ cron, at }, i) => {
            // Each runner's clock reads 300 ms before its slot, so a correct schedule fires in 300 real ms.
            const offset = at - 300 - realStart;
            const now = () => Date.now() + offset;
            const runner = new InProcessJobRunner({ log: silent, now });
            runner.register(job(`cron-${i}`, { cron }, async () => {
                seen.push({ name: `cron-${i}`, clock: now() });
            }));
            return runner;
        });
        try {
            await Promise.all(runners.map((r) => r.start()));
            await waitFor('both cron jobs', () => seen.length >= 2, 2000);
            await sleep(300);
            expect(seen.map((s) => s.name).sort()).to.equal(['cron-0', 'cron-1']);
            for (const [i, { at }] of slots.entries()) {
                const clock = seen.find((s) => s.name === `cron-${i}`)!.clock;
                expect(clock).to.be.within(at, at + 250);
            }
        }
        finally {
            await Promise.all(runners.map((r) => r.stop()));
        }
    });
});

describe('in-process cron (a clock behind the timers)', () => {
    it('never runs a job before its slot by the clock it is given, though the timer fires early by that clock', async () => {
        // This clock runs at half the speed of the timers: a timer set for the slot fires when the clock still reads
        // 200 ms before it (timers and Date.now() round apart by a millisecond in the same way).
        const realStart = Date.now();
        const slot = Date.parse('2030-01-01T03:00:00.000Z');
        const now = () => slot - 400 + (Date.now() - realStart) / 2;
        const seen: number[] = [];
        const runner = new InProcessJobRunner({ log: silent, now });
        runner.register(job('slow-clock', { cron: '0 3 * * *' }, async () => {
            seen.push(now());
        }));
        try {
            await runner.start();
            await waitFor('the cron job', () => seen.length >= 1, 3000);
            expect(seen[0]).to.be.at.least(slot);
        }
        finally {
            await runner.stop();
        }
    });
});

for (const dialect of DIALECTS) {
    describe(`jobs on ${dialect}`, () => {
        let database: TestDatabase;
        const started: JobRunner[] = [];

        const runner = (log: Logger = silent): JobRunner => {
            const created = createJobRunner({ db: database.config, log });
            started.push(created);
            return created;
        };

        before(async () => {
            database = await createTestDatabase(dialect);
        });

        after(() => database.drop());

        afterEach(async () => {
            await Promise.all(started.splice(0).map((r) => r.stop()));
        });

        it('runs an interval job repeatedly, first after one interval', async () => {
            const runs: number[] = [];
            const jobs = runner();
            jobs.register(job('tick', { everySeconds: 1 }, async () => {
                runs.push(Date.now());
            }));
            const startedAt = Date.now();
            await jobs.start();
            await waitFor('two runs', () => runs.length >= 2, 3500);
            expect(runs[0]! - startedAt).to.be.at.least(900);
            if (dialect === 'postgres') {
                const knex = pgKnex(database.config);
                try {
                    const keys = await knex(`${GRAPHILE_SCHEMA}._private_jobs`).where({ key: 'interval:tick' }).count({ n: '*' });
                    expect(Number(keys[0]!.n)).to.equal(1);
                }
                finally {
                    await knex.destroy();
                }
            }
        });

        it('keeps scheduling a job that throws, logging each failure', async () => {
            const { log, lines } = captureLogger();
            const jobs = runner(log);
            jobs.register(job('fails', { everySeconds: 1 }, async () => {
                throw new Error('boom');
            }));
            await jobs.start();
            const failures = () => lines.filter((l) => l.level === 50 && l.job === 'fails');
            await waitFor('two logged failures', () => failures().length >= 2, 3500);
            expect(failures()[0]!.err!.message).to.equal('boom');
        });

        it('stop() waits for a running job, then schedules nothing more', async () => {
            let runs = 0;
            let running = false;
            let finished = false;
            const jobs = runner();
            jobs.register(job('slow', { everySeconds: 1 }, async () => {
                runs++;
                running = true;
                await sleep(600);
                finished = true;
            }));
            await jobs.start();
            await waitFor('the job to start', () => running, 3000);
            await jobs.stop();
            expect(finished).to.be.true();
            const runsAtStop = runs;
            await sleep(1300);
            expect(runs).to.equal(runsAtStop);
        });

        it('runNow runs a job in this process without starting the runner', async () => {
            let runs = 0;
            const jobs = runner();
            jobs.register(job('manual', { cron: '0 3 * * *' }, async () => {
                runs++;
            }));
            jobs.register(job('manual-fails', { everySeconds: 3600 }, async () => {
                throw new Error('manual boom');
            }));
            await jobs.runNow('manual');
            expect(runs).to.equal(1);
            await expect(jobs.runNow('manual-fails')).to.reject('manual boom');
            await expect(jobs.runNow('unknown')).to.reject('Unknown job "unknown"');
        });

        if (dialect === 'postgres') {
            it('runs each scheduled interval run once across two replicas', async () => {
                const runs: Array<{ at: number; by: string }> = [];
                const replicas = ['a', 'b'].map((by) => {
                    const replica = runner();
                    replica.register(job('shared', { everySeconds: 1 }, async () => {
                        runs.push({ at: Date.now(), by });
                    }));
                    return replica;
                });
                await Promise.all(replicas.map((r) => r.start()));
                await sleep(3500);
                await Promise.all(replicas.map((r) => r.stop()));

                // One chain, each run scheduled a second after the previous finished: a doubled run would be closer.
                expect(runs.length).to.be.within(2, 4);
                for (let i = 1; i < runs.length; i++) {
                    expect(runs[i]!.at - runs[i - 1]!.at).to.be.at.least(900);
                }
            });

            it('registers a cron job with graphile and fires it through graphile cron', async () => {
                const db = database.config;
                let runs = 0;
                const make = () => {
                    const cron = new GraphileJobRunner({ db: db as Extract<DatabaseConfig, { type: 'postgres' }>, log: silent, cronBackfillSeconds: 300 });
                    cron.register(job('every-minute', { cron: '* * * * *' }, async () => {
                        runs++;
                    }));
                    started.push(cron);
                    return cron;
                };
                const knex = pgKnex(db);
                try {
                    const first = make();
                    await first.start();
                    // Graphile's cron records the entry in the background once the runner is up.
                    const known = async () => (await knex(`${GRAPHILE_SCHEMA}._private_known_crontabs`).where({ identifier: 'every-minute' })).length === 1;
                    await waitFor('graphile to know the cron entry', known, 3000);
                    await first.stop();

                    // As if this entry had been known, with no replica up, for three minutes: the missed runs are
                    // due now, and graphile's cron schedules them at start instead of at the next minute.
                    await knex(`${GRAPHILE_SCHEMA}._private_known_crontabs`).where({ identifier: 'every-minute' })
                        .update({ known_since: knex.raw(`now() - interval '3 minutes'`), last_execution: null });
                    const runsBefore = runs;
                    await make().start();
                    await waitFor('the cron job', () => runs > runsBefore, 5000);
                }
                finally {
                    await knex.destroy();
                }
            });
        }
    });
}
