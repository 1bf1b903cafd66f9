import type { Logger } from 'pino';

export type JobSchedule =
    /** Runs every N seconds (first run N seconds after start). */
    | { everySeconds: number }
    /** A five-field cron expression in UTC, e.g. `0 3 * * *` for 03:00 daily. */
    | { cron: string };

export interface JobContext {
    log: Logger;
}

export interface JobDefinition {
    /** Unique; letters, digits, `_`, `-`, `:` and `.`. */
    name: string;
    schedule: JobSchedule;
    run(ctx: JobContext): Promise<void>;
}

/** One interface, two drivers: graphile-worker on PostgreSQL (each run happens once across replicas), timers on SQLite. */
export interface JobRunner {
    register(job: JobDefinition): void;
    /** Starts scheduling. Called once the server has started, only when WORKER is on. */
    start(): Promise<void>;
    /** Stops scheduling and waits for running jobs to finish. */
    stop(): Promise<void>;
    /** Runs a registered job now, in this process (CLI and tests). */
    runNow(name: string): Promise<void>;
}
