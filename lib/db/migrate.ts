import type { Knex } from 'knex';
import { migrations, type Migration } from '../../migrations';
import { dialectOf } from './knex';

/** Knex reads migrations from this list instead of globbing a folder, so compiled and ts-run builds behave alike. */
const source: Knex.MigrationSource<Migration> = {
    getMigrations: async () => migrations,
    getMigrationName: (m) => m.name,
    getMigration: async (m) => m
};

const config: Knex.MigratorConfig = { migrationSource: source, tableName: 'knex_migrations' };

// Any constant; identifies Hallmark's migration lock among other advisory locks on a shared PostgreSQL.
const PG_MIGRATION_LOCK = 0x48414c4d;

/**
 * Applies pending migrations. On PostgreSQL several replicas may start at once: an advisory lock held on one
 * connection makes them migrate one at a time, and the later ones find nothing left to do.
 */
export const migrateLatest = async (knex: Knex): Promise<string[]> => {
    if (dialectOf(knex) !== 'postgres') {
        const [, applied] = await knex.migrate.latest(config);
        return applied;
    }
    const conn = await knex.client.acquireConnection();
    try {
        await conn.query('select pg_advisory_lock($1)', [PG_MIGRATION_LOCK]);
        const [, applied] = await knex.migrate.latest(config);
        return applied;
    }
    finally {
        await conn.query('select pg_advisory_unlock($1)', [PG_MIGRATION_LOCK]).catch(() => undefined);
        await knex.client.releaseConnection(conn);
    }
};

export interface MigrationStatus {
    completed: string[];
    pending: string[];
}

export const migrationStatus = async (knex: Knex): Promise<MigrationStatus> => {
    const [completed, pending] = await knex.migrate.list(config) as [Array<{ name: string }>, Migration[]];
    return { completed: completed.map((c) => c.name), pending: pending.map((p) => p.name) };
};

export const rollbackAll = (knex: Knex) => knex.migrate.rollback(config, true);
