import { CronExpressionParser } from 'cron-parser';
import type { Logger } from 'pino';
import type { JobDefinition, JobRunner } from './types';

/** setTimeout overflows (and fires at once) beyond this; a yearly cron easily waits longer. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

export interface InProcessJobRunnerOptions {
    log: Logger;
    /** The clock cron schedules are computed against, in ms since the epoch; tests shift it. */
    now?: () => number;
}

interface Entry {
    job: JobDefinition;
    timer?: NodeJS.Timeout;
    /** Settles when the job's last queued run has; chaining on it keeps a job from overlapping itself. */
    tail: Promise<void>;
}

/**
 * The SQLite driver: one process, so plain timers suffice. Expects jobs validated by `createJobRunner`.
 * Interval runs start `everySeconds` after the previous run finished; cron runs that fall while the job is
 * still running are skipped rather than queued.
 */
export class InProcessJobRunner implements JobRunner {
    private readonly jobs = new Map<string, Entry>();
    private readonly log: Logger;
    private readonly now: () => number;
    private state: 'idle' | 'started' | 'stopped' = 'idle';

    constructor(options: InProcessJobRunnerOptions) {
        this.log = options.log;
        this.now = options.now ?? Date.now;
    }

    register(job: JobDefinition): void {
        this.jobs.set(job.name, { job, tail: Promise.resolve() });
    }

    async start(): Promise<void> {
        if (this.state !== 'idle') {
            throw new Error('The job runner can only be started once');
        }
        this.state = 'started';
        for (const entry of this.jobs.values()) {
            this.scheduleAfter(entry, this.now());
        }
    }

    async stop(): Promise<void> {
        this.state = 'stopped';
        for (const entry of this.jobs.values()) {
            clearTimeout(entry.timer);
        }
        await Promise.all([...this.jobs.values()].map((entry) => entry.tail));
    }

    runNow(name: string): Promise<void> {
        const entry = this.jobs.get(name);
        if (!entry) {
            return Promise.reject(new Error(`Unknown job "${name}"`));
        }
        return this.exclusive(entry);
    }

    private exclusive(entry: Entry): Promise<void> {
        const { job } = entry;
        const run = entry.tail.then(() => job.run({ log: this.log.child({ job: job.name }) }));
        entry.tail = run.catch(() => undefined);
        return run;
    }

    /** Arms the entry's timer for its first due time after `from`. */
    private scheduleAfter(entry: Entry, from: number): void {
        const { schedule } = entry.job;
        const due = 'everySeconds' in schedule
            ? from + schedule.everySeconds * 1000
            : CronExpressionParser.parse(schedule.cron, { currentDate: new Date(from), tz: 'UTC' }).next().getTime();
        this.arm(entry, due);
    }

    private arm(entry: Entry, due: number): void {
        const wait = due - this.now();
        // A timer may fire a millisecond before its due time by the clock (timers and Date.now() round apart): then
        // it is armed again for the rest, so a job never runs before its slot (a 03:00 job at 02:59:59.999).
        entry.timer = wait > MAX_TIMEOUT_MS
            ? setTimeout(() => this.arm(entry, due), MAX_TIMEOUT_MS)
            : setTimeout(() => (this.now() < due ? this.arm(entry, due) : void this.fire(entry, due)), Math.max(0, wait));
        entry.timer.unref();
    }

    private async fire(entry: Entry, due: number): Promise<void> {
        try {
            await this.exclusive(entry);
        }
        catch (err) {
            this.log.error({ err, job: entry.job.name }, 'Job failed');
        }
        if (this.state === 'started') {
            // Timers may fire a little early; counting from `due` keeps a cron slot from running twice.
            this.scheduleAfter(entry, Math.max(this.now(), due));
        }
    }
}
