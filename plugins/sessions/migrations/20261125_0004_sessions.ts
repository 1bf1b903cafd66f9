import type { Knex } from 'knex';

export const up = async (knex: Knex): Promise<void> => {
    // Issuance and presentation sessions. Personal data (claims, credentials, protocol state with keys) lives in the
    // sealed `data` column; what lists, filters and single-use checks need is in plain, indexed columns.
    await knex.schema.createTable('sessions', (t) => {
        t.string('id', 64).primary();
        t.string('tenant_id', 63).notNullable().references('id').inTable('tenants').onDelete('CASCADE');
        t.string('type', 16).notNullable();
        t.string('status', 16).notNullable();
        t.string('request_id', 255);
        t.text('credential_configuration_ids');
        t.string('reference', 255);
        t.string('wallet_nonce', 64).unique();
        t.string('offer_id', 64).unique();
        t.string('code_hash', 64).unique();
        t.string('access_token_hash', 64).unique();
        t.timestamp('offer_fetched_at', { useTz: true });
        t.timestamp('code_used_at', { useTz: true });
        t.integer('tx_code_failures').notNullable().defaultTo(0);
        t.timestamp('access_token_expires_at', { useTz: true });
        t.string('failure_code', 64);
        t.string('error_reason', 1000);
        t.string('response_code', 64);
        t.timestamp('consumed_at', { useTz: true });
        t.timestamp('expires_at', { useTz: true });
        t.text('data');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
        t.index(['tenant_id', 'updated_at'], 'sessions_tenant_updated');
        t.index(['tenant_id', 'status', 'type', 'updated_at'], 'sessions_tenant_status_type_updated');
        t.index(['tenant_id', 'created_at'], 'sessions_tenant_created');
        t.index(['tenant_id', 'reference'], 'sessions_tenant_reference');
        t.index(['tenant_id', 'request_id', 'updated_at'], 'sessions_tenant_request');
        t.index(['status', 'expires_at'], 'sessions_status_expires');
    });

    // Single-use values that belong to no session yet: credential proof nonces (c_nonce), DPoP proof ids and nonces.
    await knex.schema.createTable('single_use_values', (t) => {
        t.string('key', 255).primary();
        t.string('tenant_id', 63).notNullable().references('id').inTable('tenants').onDelete('CASCADE');
        t.timestamp('expires_at', { useTz: true }).notNullable();
        t.timestamp('used_at', { useTz: true });
        t.index(['expires_at'], 'single_use_values_expires');
    });
};

export const down = async (knex: Knex): Promise<void> => {
    await knex.schema.dropTableIfExists('single_use_values');
    await knex.schema.dropTableIfExists('sessions');
};
