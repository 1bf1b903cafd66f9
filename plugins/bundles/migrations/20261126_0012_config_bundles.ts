import type { Knex } from 'knex';

export const up = async (knex: Knex): Promise<void> => {
    // Operation reports: no foreign key to tenants, since an import may create its tenant and a report outlives a
    // failed one.
    await knex.schema.createTable('config_bundle_operations', (t) => {
        t.string('id', 36).primary();
        t.string('tenant_id', 63).notNullable();
        t.string('type', 16).notNullable();
        t.string('mode', 16);
        t.string('status', 16).notNullable();
        t.string('actor', 255).notNullable();
        t.timestamp('started_at', { useTz: true }).notNullable();
        t.timestamp('finished_at', { useTz: true });
        t.text('summary');
        // Which process runs an import: a report whose process is gone shows interrupted (spec 3.4).
        t.string('worker_host', 255);
        t.integer('worker_pid');
        t.index(['tenant_id', 'started_at'], 'config_bundle_operations_tenant_time');
    });
    // One running import per tenant: the primary key makes a second insert fail on every replica.
    await knex.schema.createTable('config_bundle_locks', (t) => {
        t.string('tenant_id', 63).primary();
        t.string('operation_id', 36).notNullable();
        t.timestamp('acquired_at', { useTz: true }).notNullable();
    });
    // Which source (manifest.source) imported a resource: replace deletes only what the same source imported.
    await knex.schema.createTable('config_bundle_sources', (t) => {
        t.string('tenant_id', 63).notNullable().references('id').inTable('tenants').onDelete('CASCADE');
        t.string('kind', 64).notNullable();
        t.string('resource_id', 255).notNullable();
        t.string('source', 128).notNullable();
        t.primary(['tenant_id', 'kind', 'resource_id']);
    });
};

export const down = async (knex: Knex): Promise<void> => {
    await knex.schema.dropTableIfExists('config_bundle_sources');
    await knex.schema.dropTableIfExists('config_bundle_locks');
    await knex.schema.dropTableIfExists('config_bundle_operations');
};
