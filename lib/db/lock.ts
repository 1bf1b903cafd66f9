import type { Knex } from 'knex';
import { dialectOf } from './knex';

/**
 * Runs fn while holding a PostgreSQL advisory lock, so replicas starting at once take turns (migrations, the
 * startup import). The lock lives on one dedicated connection; fn uses the pool as usual. SQLite is one process's
 * file, so there fn simply runs.
 */
export const withStartupLock = async <T>(knex: Knex, name: string, fn: () => Promise<T>): Promise<T> => {
    if (dialectOf(knex) !== 'postgres') {
        return fn();
    }
    const conn = await knex.client.acquireConnection();
    try {
        await conn.query('select pg_advisory_lock(hashtext($1))', [`hallmark:${name}`]);
        return await fn();
    }
    finally {
        await conn.query('select pg_advisory_unlock(hashtext($1))', [`hallmark:${name}`]).catch(() => undefined);
        await knex.client.releaseConnection(conn);
    }
};
