import Fs from 'node:fs';
import Path from 'node:path';
import Knex, { type Knex as KnexType } from 'knex';
import { knexSnakeCaseMappers } from 'objection';
import { SAFETY_NET_PAGES, startCheckpointer, type Checkpointer } from './checkpointer';
import type { DatabaseConfig } from './config';

export type Dialect = 'sqlite' | 'postgres';

const SQLITE_BUSY_TIMEOUT_MS = 5000;

const STATEMENT_CACHE_SIZE = 500;

/**
 * knex prepares every query anew; better-sqlite3 statements are reusable, and preparing was a sixth of the CPU time
 * of an issuance flow. The cache is per connection (statements belong to their connection) and bounded.
 */
const cachePreparedStatements = (conn: { prepare: (sql: string) => unknown }): void => {
    const prepare = conn.prepare.bind(conn);
    const cache = new Map<string, unknown>();
    conn.prepare = (sql: string) => {
        let statement = cache.get(sql);
        if (statement) {
            cache.delete(sql);
        }
        else {
            statement = prepare(sql);
            if (cache.size >= STATEMENT_CACHE_SIZE) {
                cache.delete(cache.keys().next().value as string);
            }
        }
        cache.set(sql, statement);
        return statement;
    };
};

/**
 * knex prints every failed connection attempt with its stack on the console, then rejects the query with the same
 * error, which its caller reports (at start: one line naming the database). Its other warnings still go out.
 */
const knexLog = {
    warn: (message: unknown) => {
        if (!(typeof message === 'string' && message.startsWith('Acquire connection error'))) {
            // knex's own warnings, before any service logger exists (the pool is made before the server).
            // eslint-disable-next-line no-console
            console.warn(message);
        }
    }
};

const checkpointers = new WeakMap<KnexType, Checkpointer>();

/**
 * Stops the checkpoint worker of a SQLite knex (nothing for others). Call before destroying the knex: the worker
 * closes its connection first, so that the service's, the last, checkpoints and removes the WAL.
 */
export const stopCheckpointer = (knex: KnexType): Promise<void> => checkpointers.get(knex)?.stop() ?? Promise.resolve();

export const createKnex = (db: DatabaseConfig, options: { connectTimeoutMs?: number } = {}): KnexType => {
    if (db.type === 'sqlite') {
        const file = db.filename !== ':memory:';
        if (file) {
            Fs.mkdirSync(Path.dirname(db.filename), { recursive: true });
        }
        let checkpointer: Checkpointer | undefined;
        const knex = Knex({
            ...knexSnakeCaseMappers(),
            client: 'better-sqlite3',
            connection: { filename: db.filename },
            useNullAsDefault: true,
            log: knexLog,
            pool: {
                min: 1,
                max: 1,
                afterCreate: (conn: any, done: (err: Error | null, conn: unknown) => void) => {
                    try {
                        conn.pragma('journal_mode = WAL');
                        conn.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
                        conn.pragma('foreign_keys = ON');
                        conn.pragma('synchronous = NORMAL');
                        // Keep the working set in memory: 64 MiB page cache, memory-mapped reads, temp tables in RAM.
                        // The map covers files of up to 2 GiB (SQLite's largest by default): past the first 256 MiB,
                        // pages were read with a system call and copied into the page cache, and the session
                        // statements of an issuance flow cost 11-25 % more CPU at 1,000,000 sessions (a 1 GiB file)
                        // than at none (1 % with the whole file mapped; npm run bench -- sessions). Mapped pages are the
                        // OS's file cache: they count in RSS once read, and the OS reclaims them under pressure.
                        conn.pragma('cache_size = -65536');
                        conn.pragma('mmap_size = 2147418112');
                        conn.pragma('temp_store = MEMORY');
                        cachePreparedStatements(conn);
                        if (file) {
                            // Checkpoints in a worker thread once the service writes (see checkpointer.ts); this
                            // connection's own then only as a safety net.
                            checkpointer ??= startCheckpointer(db.filename, () => {
                                if (conn.open) {
                                    conn.pragma(`wal_autocheckpoint = ${SAFETY_NET_PAGES}`);
                                }
                            });
                        }
                        done(null, conn);
                    }
                    catch (err) {
                        done(err as Error, conn);
                    }
                }
            }
        });
        checkpointers.set(knex, { stop: () => checkpointer?.stop() ?? Promise.resolve() });
        return knex;
    }

    return Knex({
        ...knexSnakeCaseMappers(),
        client: 'pg',
        connection: {
            host: db.host,
            port: db.port,
            user: db.user,
            password: db.password,
            database: db.database,
            ssl: pgSsl(db),
            connectionTimeoutMillis: options.connectTimeoutMs
        },
        pool: { min: 0, max: 10 },
        log: knexLog
    });
};

/** TLS options for PostgreSQL connections (knex and graphile-worker's pool alike). */
export const pgSsl = (db: Extract<DatabaseConfig, { type: 'postgres' }>) => {
    const read = (path?: string) => (path ? Fs.readFileSync(path, 'utf8') : undefined);
    return db.ssl
        ? { rejectUnauthorized: db.ssl.rejectUnauthorized, ca: read(db.ssl.caPath), cert: read(db.ssl.certPath), key: read(db.ssl.keyPath), passphrase: db.ssl.passphrase }
        : undefined;
};

export const dialectOf = (knex: KnexType): Dialect => (knex.client.config.client === 'pg' ? 'postgres' : 'sqlite');

export const ping = async (knex: KnexType | KnexType.Transaction): Promise<boolean> => {
    try {
        await knex.raw('select 1');
        return true;
    }
    catch {
        return false;
    }
};
