import type { Knex } from 'knex';
import { migrations, type Migration } from '../../migrations';
import { withStartupLock } from './lock';

/** Knex reads migrations from this list instead of globbing a folder, so compiled and ts-run builds behave alike. */
const source: Knex.MigrationSource<Migration> = {
    getMigrations: async () => migrations,
    getMigrationName: (m) => m.name,
    getMigration: async (m) => m
};

const config: Knex.MigratorConfig = { migrationSource: source, tableName: 'knex_migrations' };

/**
 * Applies pending migrations. Several replicas may start at once: they migrate one at a time, and the later ones
 * find nothing left to do.
 */
export const migrateLatest = (knex: Knex): Promise<string[]> =>
    withStartupLock(knex, 'migrations', async () => {
        const [, applied] = await knex.migrate.latest(config);
        return applied as string[];
    });

export interface MigrationStatus {
    completed: string[];
    pending: string[];
}

export const migrationStatus = async (knex: Knex): Promise<MigrationStatus> => {
    const [completed, pending] = await knex.migrate.list(config) as [Array<{ name: string }>, Migration[]];
    return { completed: completed.map((c) => c.name), pending: pending.map((p) => p.name) };
};

export const rollbackAll = (knex: Knex) => knex.migrate.rollback(config, true);
