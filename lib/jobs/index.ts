import { CronExpressionParser } from 'cron-parser';
import type { Logger } from 'pino';
import type { DatabaseConfig } from '../db/config';
import { InProcessJobRunner } from './in-process';
import type { JobDefinition, JobRunner } from './types';

export type * from './types';
export { InProcessJobRunner };

const NAME = /^[A-Za-z0-9_:.-]+$/;

const scheduleProblem = (job: JobDefinition): string | undefined => {
    const { schedule } = job;
    if ('everySeconds' in schedule) {
        return Number.isFinite(schedule.everySeconds) && schedule.everySeconds >= 1
            ? undefined
            : `everySeconds must be a number of at least 1, got ${schedule.everySeconds}`;
    }
    if ('cron' in schedule && typeof schedule.cron === 'string') {
        // Five fields only: graphile-worker (PostgreSQL) accepts no seconds field; it also checks its own dialect.
        try {
            const fields = schedule.cron.trim().split(/\s+/);
            if (fields.length !== 5 || !fields.every((f) => /^[0-9*,/-]+$/.test(f))) {
                throw new Error('expected five numeric fields: minute hour day-of-month month day-of-week');
            }
            CronExpressionParser.parse(schedule.cron, { tz: 'UTC' });
            return undefined;
        }
        catch (err) {
            return `invalid five-field cron expression "${schedule.cron}": ${(err as Error).message}`;
        }
    }
    return 'schedule must be { everySeconds } or { cron }';
};

/** The checks both drivers rely on, done once at `register` so a mistake fails at boot rather than at 03:00. */
class CheckedJobRunner implements JobRunner {
    private readonly names = new Set<string>();
    private started = false;

    constructor(private readonly driver: JobRunner) {}

    register(job: JobDefinition): void {
        if (typeof job.name !== 'string' || !NAME.test(job.name)) {
            throw new Error(`Invalid job name "${job.name}": use letters, digits, "_", "-", ":" and "."`);
        }
        if (this.started) {
            throw new Error(`Cannot register job "${job.name}": the job runner has already started`);
        }
        if (this.names.has(job.name)) {
            throw new Error(`Job "${job.name}" is already registered`);
        }
        const problem = scheduleProblem(job);
        if (problem) {
            throw new Error(`Job "${job.name}": ${problem}`);
        }
        this.names.add(job.name);
        this.driver.register(job);
    }

    start(): Promise<void> {
        this.started = true;
        return this.driver.start();
    }

    stop(): Promise<void> {
        return this.driver.stop();
    }

    runNow(name: string): Promise<void> {
        return this.driver.runNow(name);
    }
}

/** Graphile-worker on PostgreSQL, so replicas share the schedule; timers on SQLite, which has a single process. */
export const createJobRunner = (options: { db: DatabaseConfig; log: Logger }): JobRunner => {
    const { db, log } = options;
    if (db.type !== 'postgres') {
        return new CheckedJobRunner(new InProcessJobRunner({ log }));
    }
    // Loaded only on PostgreSQL: graphile-worker costs ~20 MiB of memory a SQLite deployment never uses.
    const { GraphileJobRunner } = require('./graphile') as typeof import('./graphile');
    return new CheckedJobRunner(new GraphileJobRunner({ db, log }));
};
