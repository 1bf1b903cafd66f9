import { Logger as GraphileLogger, parseCronItem, parseCronItems, run, type CronItem, type Runner, type Task, type TaskList } from 'graphile-worker';
import { Pool } from 'pg';
import type { Logger } from 'pino';
import type { DatabaseConfig } from '../db/config';
import { pgSsl } from '../db/knex';
import type { JobDefinition, JobRunner } from './types';

export const GRAPHILE_SCHEMA = 'graphile_worker';

type PostgresConfig = Extract<DatabaseConfig, { type: 'postgres' }>;

export interface GraphileJobRunnerOptions {
    db: PostgresConfig;
    log: Logger;
    /**
     * How far back a starting runner catches up on cron runs that fell while no replica was running. Graphile
     * only catches up on cron entries it already knew of, since they were first seen. Default 0: missed runs are skipped.
     */
    cronBackfillSeconds?: number;
}

const intervalKey = (name: string) => `interval:${name}`;

const createPool = (db: PostgresConfig, max: number, log: Logger): Pool => {
    const pool = new Pool({
        host: db.host,
        port: db.port,
        user: db.user,
        password: db.password,
        database: db.database,
        max,
        ssl: pgSsl(db)
    });
    // Without listeners a dropped connection is an uncaught 'error' event; pg already discards the broken client.
    const onError = (err: Error) => log.error({ err }, 'Background job database connection failed');
    pool.on('error', onError);
    pool.on('connect', (client) => client.on('error', onError));
    return pool;
};

/** Graphile chatters at info about every job; only its warnings and errors deserve more than debug. */
const graphileLogger = (log: Logger) => new GraphileLogger((scope) => (level, message, meta) => {
    const fields = { graphile: scope, err: meta?.error };
    if (level === 'error') {
        log.error(fields, message);
    }
    else if (level === 'warning') {
        log.warn(fields, message);
    }
    else {
        log.debug(fields, message);
    }
});

/**
 * The PostgreSQL driver. Graphile-worker makes each scheduled run happen once across replicas: cron jobs through
 * its crontab, interval jobs as one self-rescheduling job per name (a fixed job key, so replicas never add a second
 * one). Expects jobs validated by `createJobRunner`.
 */
export class GraphileJobRunner implements JobRunner {
    private readonly jobs = new Map<string, JobDefinition>();
    private readonly log: Logger;
    private runner?: Runner;
    private pool?: Pool;
    private started = false;

    constructor(private readonly options: GraphileJobRunnerOptions) {
        this.log = options.log;
    }

    register(job: JobDefinition): void {
        if ('cron' in job.schedule) {
            // graphile's cron dialect is stricter than cron-parser's; fail at boot, not at the first tick.
            parseCronItem({ task: job.name, match: job.schedule.cron });
        }
        this.jobs.set(job.name, job);
    }

    async start(): Promise<void> {
        if (this.started) {
            throw new Error('The job runner can only be started once');
        }
        this.started = true;

        const jobs = [...this.jobs.values()];
        const taskList: TaskList = {};
        const cronItems: CronItem[] = [];
        let shortestIntervalMs = Infinity;
        for (const job of jobs) {
            const { schedule } = job;
            if ('cron' in schedule) {
                taskList[job.name] = this.cronTask(job);
                cronItems.push({
                    task: job.name,
                    identifier: job.name,
                    match: schedule.cron,
                    options: {
                        backfillPeriod: (this.options.cronBackfillSeconds ?? 0) * 1000,
                        // Its own queue runs a job's runs one at a time; the key folds runs that have not started yet into one.
                        queueName: `cron:${job.name}`,
                        jobKey: `cron:${job.name}`,
                        jobKeyMode: 'preserve_run_at'
                    }
                });
            }
            else {
                taskList[job.name] = this.intervalTask(job, schedule.everySeconds);
                shortestIntervalMs = Math.min(shortestIntervalMs, schedule.everySeconds * 1000);
            }
        }

        const concurrency = Math.max(1, jobs.length);
        this.pool = createPool(this.options.db, concurrency + 2, this.log);
        try {
            this.runner = await run({
                pgPool: this.pool,
                schema: GRAPHILE_SCHEMA,
                taskList,
                parsedCronItems: parseCronItems(cronItems),
                concurrency,
                // Future jobs are found by polling, so it bounds how late an interval run starts.
                pollInterval: Math.min(2000, Math.max(100, shortestIntervalMs / 4)),
                noHandleSignals: true,
                logger: graphileLogger(this.log)
            });
            // Rejects only if the worker dies on its own (e.g. the database went away for good); unhandled, that would crash the process.
            this.runner.promise.catch((err: unknown) => this.log.error({ err }, 'Background job runner stopped'));
            for (const job of jobs) {
                if ('everySeconds' in job.schedule) {
                    await this.runner.addJob(job.name, {}, {
                        jobKey: intervalKey(job.name),
                        // Another replica may already have scheduled the next run; keep its time.
                        jobKeyMode: 'preserve_run_at',
                        runAt: new Date(Date.now() + job.schedule.everySeconds * 1000)
                    });
                }
            }
        }
        catch (err) {
            await this.stop();
            throw err;
        }
    }

    async stop(): Promise<void> {
        const { runner, pool } = this;
        this.runner = undefined;
        this.pool = undefined;
        try {
            await runner?.stop();
        }
        finally {
            await pool?.end();
        }
    }

    async runNow(name: string): Promise<void> {
        const job = this.jobs.get(name);
        if (!job) {
            throw new Error(`Unknown job "${name}"`);
        }
        await job.run({ log: this.log.child({ job: name }) });
    }

    /** Failures are logged, not thrown: a graphile retry would be an extra, unscheduled run. */
    private async perform(job: JobDefinition): Promise<void> {
        try {
            await job.run({ log: this.log.child({ job: job.name }) });
        }
        catch (err) {
            this.log.error({ err, job: job.name }, 'Job failed');
        }
    }

    private cronTask(job: JobDefinition): Task {
        return () => this.perform(job);
    }

    private intervalTask(job: JobDefinition, everySeconds: number): Task {
        return async (_payload, helpers) => {
            await this.perform(job);
            // Scheduling after the work keeps runs from overlapping. The running job holds the key, so graphile
            // detaches it and adds the next run; should this add fail, graphile retries this job and the chain survives.
            await helpers.addJob(job.name, {}, {
                jobKey: intervalKey(job.name),
                jobKeyMode: 'replace',
                runAt: new Date(Date.now() + everySeconds * 1000)
            });
        };
    }
}
