import type { Knex } from 'knex';
import { withStartupLock } from './lock';

/**
 * One schema step of a plugin. knex records it by name in knex_migrations, so a name never changes once released;
 * names sort in the order the steps must run (`YYYYMMDD_NNNN_topic`), across all plugins.
 */
export interface Migration {
    name: string;
    up(knex: Knex): Promise<void>;
    down(knex: Knex): Promise<void>;
}

/** The migrations of the plugins a manifest composes, in name order: what core runs at start and the CLI runs. */
export class MigrationSet {
    private readonly byName = new Map<string, Migration>();

    add(owner: string, migrations: Migration[]): void {
        for (const migration of migrations) {
            if (this.byName.has(migration.name)) {
                throw new Error(`Plugin ${owner}: migration ${migration.name} is already registered`);
            }
            this.byName.set(migration.name, migration);
        }
    }

    list(): Migration[] {
        return [...this.byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    }
}

/** Knex reads migrations from this list instead of globbing a folder, so compiled and ts-run builds behave alike. */
const configFor = (migrations: Migration[]): Knex.MigratorConfig => ({
    tableName: 'knex_migrations',
    // A manifest may leave out a plugin whose tables an earlier, larger manifest created: its applied migrations are
    // then not in this list, which is not corruption. (Released names never change, so nothing else goes missing.)
    disableMigrationsListValidation: true,
    migrationSource: {
        getMigrations: async () => migrations,
        getMigrationName: (m: Migration) => m.name,
        getMigration: async (m: Migration) => m
    }
});

/**
 * Applies pending migrations. Several replicas may start at once: they migrate one at a time, and the later ones
 * find nothing left to do.
 */
export const migrateLatest = (knex: Knex, migrations: Migration[]): Promise<string[]> =>
    withStartupLock(knex, 'migrations', async () => {
        const [, applied] = await knex.migrate.latest(configFor(migrations));
        return applied as string[];
    });

export interface MigrationStatus {
    completed: string[];
    pending: string[];
}

export const migrationStatus = async (knex: Knex, migrations: Migration[]): Promise<MigrationStatus> => {
    const [completed, pending] = await knex.migrate.list(configFor(migrations)) as [Array<{ name: string }>, Migration[]];
    return { completed: completed.map((c) => c.name), pending: pending.map((p) => p.name) };
};

