import Fs from 'node:fs';
import { Worker } from 'node:worker_threads';

/**
 * WAL checkpoints off the event loop (issue #19). SQLite's automatic checkpoint runs in the connection that commits
 * the transaction crossing the WAL size limit: on the service's one connection, that is a request's write waiting for
 * the database file's fsync (about 5 ms on the measured machine) with the event loop blocked. Here a worker thread
 * holds its own connection to the same file and runs a PASSIVE checkpoint (it never waits for, nor blocks, the
 * writer) every CHECKPOINT_INTERVAL_MS; the service's connection keeps an automatic checkpoint only as a safety net
 * far above what the worker lets the WAL grow to (see knex.ts).
 *
 * A worker thread is a V8 isolate of its own (about 9 MiB resident): it starts only once the WAL file has reached
 * nearly the size of one automatic checkpoint at SQLite's default (900 of 1,000 pages), that is when the service writes enough
 * for checkpoints to matter. Until then the connection checkpoints as SQLite does by default.
 */

export const CHECKPOINT_INTERVAL_MS = 200;

/** The automatic checkpoint of the service's connection when the worker runs (pages; SQLite's default is 1000). */
export const SAFETY_NET_PAGES = 10_000;

/** The WAL size (bytes) from which the worker runs, looked at every WATCH_INTERVAL_MS. */
const START_WAL_BYTES = 900 * 4096;
const WATCH_INTERVAL_MS = 1000;

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.filename, { fileMustExist: true });
db.pragma('busy_timeout = 0');
const timer = setInterval(() => {
    try {
        db.pragma('wal_checkpoint(PASSIVE)');
    }
    catch {
        // busy or the file went away: the next tick tries again, the service's safety net stays
    }
}, workerData.intervalMs);
parentPort.on('message', () => {
    clearInterval(timer);
    try {
        db.pragma('wal_checkpoint(PASSIVE)');
        db.close();
    }
    catch {
        // closing anyway
    }
    process.exit(0);
});
`;

export interface Checkpointer {
    stop(): Promise<void>;
}

/** Starts the checkpoint worker of a SQLite database file (WAL mode) once its WAL grows; `started` runs then. */
export const startCheckpointer = (filename: string, started: () => void): Checkpointer => {
    let worker: Worker | undefined;
    const watch = setInterval(() => {
        let size = 0;
        try {
            size = Fs.statSync(`${filename}-wal`).size;
        }
        catch {
            // no WAL file yet
        }
        if (size >= START_WAL_BYTES) {
            clearInterval(watch);
            worker = spawn(filename);
            started();
        }
    }, WATCH_INTERVAL_MS);
    // The service's lifetime decides, never this timer or thread: they must not keep a finished process alive.
    watch.unref();
    let stopped: Promise<void> | undefined;
    return {
        stop() {
            clearInterval(watch);
            const running = worker;
            stopped ??= !running ? Promise.resolve() : new Promise<void>((resolve) => {
                const timeout = setTimeout(() => {
                    void running.terminate().then(() => resolve(), () => resolve());
                }, 2000);
                running.once('exit', () => {
                    clearTimeout(timeout);
                    resolve();
                });
                running.postMessage('stop');
            });
            return stopped;
        }
    };
};

const spawn = (filename: string): Worker => {
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { filename, driver: require.resolve('better-sqlite3'), intervalMs: CHECKPOINT_INTERVAL_MS } });
    worker.unref();
    // A failing worker only costs the service its checkpoints off the event loop (the safety net checkpoints).
    worker.on('error', () => undefined);
    return worker;
};
