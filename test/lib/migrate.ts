import Crypto from 'node:crypto';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { ColumnCipher } from '../../lib/crypto/column-cipher';
import { Database } from '../../lib/db/database';
import { migrateLatest, migrationStatus } from '../../lib/db/migrate';
import { createTestDatabase, DIALECTS } from '../helpers/databases';
import { manifestMigrations } from '../helpers/migrations';
import { StampModel } from '../fixtures/table-plugin/models/stamp';
import { defaultManifestOnly, defaultManifestWith, startTestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it } = lab;

for (const dialect of DIALECTS) {
    describe(`migrations (${dialect})`, () => {
        it('apply on an empty database, then report nothing pending', async () => {
            const testDb = await createTestDatabase(dialect);
            const db = Database.open(testDb.config, new ColumnCipher(Crypto.randomBytes(32)));
            const migrations = await manifestMigrations();
            try {
                expect((await migrationStatus(db.knex, migrations)).pending).to.equal(migrations.map((m) => m.name));
                expect(await migrateLatest(db.knex, migrations)).to.equal(migrations.map((m) => m.name));
                expect(await migrateLatest(db.knex, migrations)).to.equal([]);
                expect(await migrationStatus(db.knex, migrations)).to.equal({ completed: migrations.map((m) => m.name), pending: [] });
            }
            finally {
                await db.close();
                await testDb.drop();
            }
        });
    });
}

/** The migrations released before plugins owned their tables: databases record these names, so they never change. */
const RELEASED = [
    '20261125_0001_foundation',
    '20261125_0002_auth',
    '20261125_0003_kms',
    '20261125_0004_sessions',
    '20261125_0005_session_logs',
    '20261125_0006_session_search',
    '20261125_0007_client_lockout_in_memory',
    '20261126_0008_status_lists',
    '20261126_0009_status_allocations',
    '20261126_0010_status_token_forms',
    '20261126_0011_deferred_issuance',
    '20261126_0012_config_bundles',
    '20261126_0013_session_index_budget',
    '20261126_0015_trust',
    '20261128_0016_session_late_updates',
    '20261128_0017_session_off_clock_ids'
];

describe('plugin migrations', () => {
    it('of the full default manifest are exactly the released ones, in order', async () => {
        expect((await manifestMigrations()).map((m) => m.name)).to.equal(RELEASED);
    });

    it('come only from the plugins a manifest composes', async () => {
        const names = async (...plugins: string[]) => (await manifestMigrations(defaultManifestOnly('subset', ...plugins))).map((m) => m.name);
        expect(await names('hallmark-core')).to.equal(['20261125_0001_foundation']);
        expect(await names('hallmark-core', 'hallmark-oauth2')).to.equal(['20261125_0001_foundation', '20261125_0002_auth', '20261125_0007_client_lockout_in_memory']);
        expect(await names('hallmark-core', 'hallmark-oauth2', 'hallmark-sessions')).to.equal(RELEASED.filter((n) => !['20261125_0003_kms', '20261126_0008_status_lists', '20261126_0009_status_allocations', '20261126_0010_status_token_forms', '20261126_0011_deferred_issuance', '20261126_0012_config_bundles', '20261126_0015_trust'].includes(n)));
    });
});

for (const dialect of DIALECTS) {
    describe(`plugin tables (${dialect})`, () => {
        it('a manifest without the kms plugin creates no kms tables', async () => {
            const t = await startTestServer(dialect, { manifest: defaultManifestOnly('no-kms', 'hallmark-core', 'hallmark-oauth2', 'hallmark-tenancy', 'hallmark-sessions') });
            try {
                const { knex } = t.server.db;
                for (const table of ['tenants', 'resources', 'audit_logs', 'clients', 'service_keys', 'sessions', 'session_logs', 'single_use_values']) {
                    expect(await knex.schema.hasTable(table), table).to.be.true();
                }
                for (const table of ['kms_db_keys', 'key_chain_keys', 'tenant_cas']) {
                    expect(await knex.schema.hasTable(table), table).to.be.false();
                }
                expect((await knex('knex_migrations').orderBy('name').pluck('name'))).to.equal(RELEASED.filter((n) => !['20261125_0003_kms', '20261126_0008_status_lists', '20261126_0009_status_allocations', '20261126_0010_status_token_forms', '20261126_0011_deferred_issuance', '20261126_0012_config_bundles', '20261126_0015_trust'].includes(n)));
            }
            finally {
                await t.stop();
            }
        });

        it('a plugin outside plugins/ adds its own table with one manifest line', async () => {
            const t = await startTestServer(dialect, { manifest: defaultManifestWith('with-table-plugin', { plugin: Path.join(__dirname, '../fixtures/table-plugin') }) });
            try {
                const { db } = t.server;
                expect(t.server.migrations().map((m) => m.name)).to.equal([...RELEASED, '20270101_0001_stamps']);
                const now = new Date().toISOString();
                await db.knex('tenants').insert({ id: 'acme', name: 'Acme', generation: 1, ownership: 'unmanaged', createdAt: now, updatedAt: now });
                await db.model(StampModel).query().insert({ id: 's1', tenantId: 'acme', note: 'secret note', createdAt: now });
                expect((await db.model(StampModel).query().findById('s1'))!.note).to.equal('secret note');
                expect((await db.knex('stamps').first()).note).to.not.contain('secret');
            }
            finally {
                await t.stop();
            }
        });

        it('a database migrated by a larger manifest migrates and reports with a smaller one (a plugin left out)', async () => {
            const testDb = await createTestDatabase(dialect);
            const db = Database.open(testDb.config, new ColumnCipher(Crypto.randomBytes(32)));
            try {
                await migrateLatest(db.knex, await manifestMigrations());
                const smaller = await manifestMigrations(defaultManifestOnly('no-sessions', 'hallmark-core', 'hallmark-oauth2', 'hallmark-kms', 'hallmark-kms-db'));
                expect(await migrateLatest(db.knex, smaller)).to.equal([]);
                expect((await migrationStatus(db.knex, smaller)).pending).to.equal([]);
            }
            finally {
                await db.close();
                await testDb.drop();
            }
        });

        it('a database migrated by the central migration list starts without re-running or missing a migration', async () => {
            const testDb = await createTestDatabase(dialect);
            const db = Database.open(testDb.config, new ColumnCipher(Crypto.randomBytes(32)));
            try {
                // What the central list recorded: one row per released name (knex fills the other columns).
                await migrateLatest(db.knex, await manifestMigrations());
                const before = await db.knex('knex_migrations').orderBy('id').select('id', 'name', 'batch');
                expect(before.map((r: { name: string }) => r.name)).to.equal(RELEASED);
                expect(await migrateLatest(db.knex, await manifestMigrations())).to.equal([]);
                expect(await db.knex('knex_migrations').orderBy('id').select('id', 'name', 'batch')).to.equal(before);
            }
            finally {
                await db.close();
                await testDb.drop();
            }
        });
    });
}

if (DIALECTS.includes('postgres')) {
    describe('migrations with several replicas starting at once (postgres)', () => {
        it('run one at a time: every migration is applied exactly once', async () => {
            const testDb = await createTestDatabase('postgres');
            const migrations = await manifestMigrations();
            const replicas = Array.from({ length: 4 }, () => Database.open(testDb.config, new ColumnCipher(Crypto.randomBytes(32))));
            try {
                const results = await Promise.all(replicas.map((r) => migrateLatest(r.knex, migrations)));
                expect(results.flat().sort()).to.equal(migrations.map((m) => m.name).sort());
                const rows = await replicas[0]!.knex('knex_migrations').select('name');
                expect(rows.length).to.equal(migrations.length);
            }
            finally {
                await Promise.all(replicas.map((r) => r.close()));
                await testDb.drop();
            }
        });
    });
}
