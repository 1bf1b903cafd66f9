import type Hapi from '@hapi/hapi';
import { createChangeBus, type ChangeBus } from '../../lib/change-bus';
import { importConfigFolder } from '../../lib/config-import';
import { ColumnCipher } from '../../lib/crypto/column-cipher';
import { SecretHasher } from '../../lib/crypto/secret-hash';
import { Database } from '../../lib/db/database';
import { pluginOptions } from '../../lib/compose';
import { withStartupLock } from '../../lib/db/lock';
import { MigrationSet, migrateLatest, migrationStatus, type Migration } from '../../lib/db/migrate';
import { createJobRunner, type JobDefinition, type JobRunner } from '../../lib/jobs';
import type { OutboundPolicy } from '../../lib/outbound';
import { packageVersion } from '../../lib/package-info';
import type { ResourceKind } from '../../lib/registry/kind';
import { Registry } from '../../lib/registry/registry';
import { mapErrors } from './error-mapping';
import { registerHttpLogger } from './http-logger';
import * as foundation from './migrations/20261125_0001_foundation';
import { refuseNulCharacters } from './nul-guard';
import { coreOptionsSchema, type CoreOptions } from './options';
import { healthRoutes } from './routes/health';
import { schemaRoutes } from './routes/schemas';
import { tenantKind } from '../../resources/tenant';

declare module '@hapi/hapi' {
    interface Server {
        db: Database;
        registry: Registry;
        jobs: JobRunner;
        /** Messages to the other workers and replicas (registry changes, lockouts, session events). */
        bus: ChangeBus;
        /** The policy every outbound request of every plugin passes (core option `outbound`). */
        outbound: OutboundPolicy;
        /** Adds a configuration resource kind: API validation, startup import, export and audit follow from it. */
        registerResource(kind: ResourceKind): void;
        registerJob(job: JobDefinition): void;
        /**
         * Adds the calling plugin's migrations (its tables). Core runs those of every plugin of the manifest in
         * name order at start, and `hallmark migrate` runs the same set.
         */
        registerMigrations(migrations: Migration[]): void;
        /** Every registered plugin's migrations, in the order they run. */
        migrations(): Migration[];
    }
}

/**
 * The framework core every other plugin builds on: database, registry, jobs, migrations, error mapping, version
 * header, health, the outbound policy. Core owns the tenants, resources and audit_logs tables (the registry writes
 * them). Start-up order: migrate, seal the registry, import the config folder, then (after listening) start jobs.
 */
export const plugin: Hapi.Plugin<CoreOptions> = {
    name: 'hallmark-core',
    register(server, options) {
        const config = pluginOptions('hallmark-core', coreOptionsSchema, options);
        const { log } = server.app;
        const version = packageVersion();
        const db = Database.open(config.database, ColumnCipher.fromSecrets(config.secrets), SecretHasher.fromSecrets(config.secrets));
        const bus = createChangeBus(config.database, db.knex, log);
        const registry = new Registry(db, { outbound: config.outbound, bus });
        const jobs = createJobRunner({ db: config.database, log });
        const migrations = new MigrationSet();
        let migrated = false;

        server.decorate('server', 'outbound', config.outbound);
        server.decorate('server', 'db', db);
        server.decorate('server', 'registry', registry);
        server.decorate('server', 'jobs', jobs);
        server.decorate('server', 'bus', bus);
        server.decorate('server', 'registerResource', (kind: ResourceKind) => registry.register(kind));
        server.decorate('server', 'registerJob', (job: JobDefinition) => jobs.register(job));
        server.decorate('server', 'registerMigrations', function (this: Hapi.Server, list: Migration[]) {
            if (migrated) {
                throw new Error(`Plugin ${this.realm.plugin}: migrations must be registered before the server starts`);
            }
            migrations.add(this.realm.plugin ?? '(unnamed plugin)', list);
        });
        server.decorate('server', 'migrations', () => migrations.list());
        server.registerMigrations([{ name: '20261125_0001_foundation', ...foundation }]);
        // Every tenant-scoped kind depends on the Tenant kind, and tenant scoping is core's: the tenancy plugin adds
        // the tenant routes, but the kind is here, so no plugin needs tenancy (which needs oauth2) for it.
        registry.register(tenantKind);

        server.ext('onPostAuth', refuseNulCharacters);
        server.ext('onPreResponse', mapErrors);
        server.ext('onPreResponse', (request, h) => {
            const response = request.response as Hapi.ResponseObject;
            response.header?.('X-Hallmark-Version', version);
            return h.continue;
        });
        registerHttpLogger(server, config.httpLog);
        server.route([...healthRoutes, ...schemaRoutes]);

        server.ext('onPreStart', () => bus.start());
        server.ext('onPreStart', async () => {
            migrated = true;
            if (config.database.migrationsRun || config.database.synchronize) {
                const applied = await migrateLatest(db.knex, migrations.list());
                if (applied.length) {
                    log.info({ migrations: applied }, 'database migrated');
                }
            }
            else {
                const { pending } = await migrationStatus(db.knex, migrations.list());
                if (pending.length) {
                    log.warn({ pending }, `DB_MIGRATIONS_RUN is false and ${pending.length} migration(s) are pending: run "hallmark migrate"`);
                }
            }
            registry.seal();
            if (config.configImport.folder) {
                const folder = config.configImport.folder;
                await withStartupLock(db.knex, 'config-import', () => importConfigFolder({
                    folder,
                    registry,
                    log,
                    variables: config.configImport.variables,
                    unresolvedPlaceholders: config.configImport.unresolvedPlaceholders
                }));
            }
        });
        server.ext('onPostStart', async () => {
            if (config.worker) {
                await jobs.start();
            }
        });
        server.ext('onPreStop', () => jobs.stop());
        server.ext('onPostStop', () => bus.close());
        server.ext('onPostStop', () => db.close());
    }
};
