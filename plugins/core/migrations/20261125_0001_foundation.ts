import type { Knex } from 'knex';

/**
 * Timestamps are timestamptz on PostgreSQL and ISO-8601 text on SQLite; the model layer writes ISO strings to both.
 * JSON documents are text: both dialects store them alike and the model layer parses them.
 */
export const up = async (knex: Knex): Promise<void> => {
    await knex.schema.createTable('tenants', (t) => {
        t.string('id', 63).primary();
        t.string('name', 255).notNullable();
        t.text('description');
        t.text('session_config');
        t.text('status_list_config');
        t.integer('generation').notNullable().defaultTo(1);
        t.string('ownership', 16).notNullable().defaultTo('unmanaged');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
    });

    // Configuration documents of every registered kind except Tenant: one table, scoped by tenant.
    await knex.schema.createTable('resources', (t) => {
        t.string('tenant_id', 63).notNullable().references('id').inTable('tenants').onDelete('CASCADE');
        t.string('kind', 64).notNullable();
        t.string('id', 255).notNullable();
        t.integer('version').notNullable();
        t.text('spec').notNullable();
        t.integer('generation').notNullable().defaultTo(1);
        t.string('ownership', 16).notNullable().defaultTo('unmanaged');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
        t.primary(['tenant_id', 'kind', 'id']);
    });

    await knex.schema.createTable('audit_logs', (t) => {
        t.bigIncrements('id').primary();
        t.string('tenant_id', 63).references('id').inTable('tenants').onDelete('CASCADE');
        t.string('actor', 255).notNullable();
        t.string('action', 32).notNullable();
        t.string('kind', 64).notNullable();
        t.string('resource_id', 255);
        t.text('changes');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.index(['tenant_id', 'created_at'], 'audit_logs_tenant_time');
    });
};

export const down = async (knex: Knex): Promise<void> => {
    await knex.schema.dropTableIfExists('audit_logs');
    await knex.schema.dropTableIfExists('resources');
    await knex.schema.dropTableIfExists('tenants');
};
