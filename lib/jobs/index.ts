import { CronExpressionParser } from 'cron-parser';
import { parseCronItem } from 'graphile-worker';
import type { Logger } from 'pino';
import type { DatabaseConfig } from '../config';
import { GraphileJobRunner } from './graphile';
import { InProcessJobRunner } from './in-process';
import type { JobDefinition, JobRunner } from './types';

export type * from './types';
export { GraphileJobRunner, InProcessJobRunner };

const NAME = /^[A-Za-z0-9_:.-]+$/;

const scheduleProblem = (job: JobDefinition): string | undefined => {
    const { schedule } = job;
    if ('everySeconds' in schedule) {
        return Number.isFinite(schedule.everySeconds) && schedule.everySeconds >= 1
            ? undefined
            : `everySeconds must be a number of at least 1, got ${schedule.everySeconds}`;
    }
    if ('cron' in schedule && typeof schedule.cron === 'string') {
        // Both parsers must accept it, so a schedule that works on SQLite cannot fail on PostgreSQL.
        try {
            parseCronItem({ task: job.name, match: schedule.cron });
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
    return new CheckedJobRunner(db.type === 'postgres' ? new GraphileJobRunner({ db, log }) : new InProcessJobRunner({ log }));
};
