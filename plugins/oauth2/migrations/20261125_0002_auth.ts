import type { Knex } from 'knex';

export const up = async (knex: Knex): Promise<void> => {
    // Management clients. tenant_id is null for tenant-less clients (tenant:manage).
    await knex.schema.createTable('clients', (t) => {
        t.string('client_id', 255).primary();
        t.string('tenant_id', 63).references('id').inTable('tenants').onDelete('CASCADE');
        t.text('description');
        t.text('roles').notNullable();
        t.text('allowed_presentation_configs');
        t.text('allowed_issuance_configs');
        t.string('secret_hash', 128).notNullable();
        t.integer('failed_attempts').notNullable().defaultTo(0);
        t.timestamp('locked_until', { useTz: true });
        t.integer('generation').notNullable().defaultTo(1);
        t.string('ownership', 16).notNullable().defaultTo('unmanaged');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
        t.index(['tenant_id'], 'clients_tenant');
    });

    // Signing keys of the integrated OAuth2 server; private keys sealed with the column cipher.
    await knex.schema.createTable('service_keys', (t) => {
        t.string('kid', 64).primary();
        t.text('private_jwk').notNullable();
        t.text('public_jwk').notNullable();
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('retired_at', { useTz: true });
    });

    await knex.schema.alterTable('audit_logs', (t) => {
        t.index(['created_at'], 'audit_logs_time');
    });
};

export const down = async (knex: Knex): Promise<void> => {
    await knex.schema.alterTable('audit_logs', (t) => t.dropIndex(['created_at'], 'audit_logs_time'));
    await knex.schema.dropTableIfExists('service_keys');
    await knex.schema.dropTableIfExists('clients');
};
