import type { Knex } from 'knex';

export const up = async (knex: Knex): Promise<void> => {
    // Deferred credential requests (OpenID4VCI deferred credential endpoint): one row per transaction, keyed by the
    // hash of its transaction_id. The holder keys, the signed credentials until their one delivery, and a failure's
    // reason live in the sealed `data` column; `state` moves pending → completing → ready → delivered, or pending →
    // failed, each step by one conditional update.
    await knex.schema.createTable('deferred_issuances', (t) => {
        t.string('id', 64).primary();
        t.string('tenant_id', 63).notNullable().references('id').inTable('tenants').onDelete('CASCADE');
        t.string('session_id', 64).notNullable().references('id').inTable('sessions').onDelete('CASCADE');
        t.string('credential_configuration_id', 255).notNullable();
        t.string('state', 16).notNullable();
        t.integer('interval').notNullable();
        t.text('data');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.timestamp('updated_at', { useTz: true }).notNullable();
        t.index(['session_id'], 'deferred_issuances_session');
        t.index(['tenant_id', 'state'], 'deferred_issuances_tenant_state');
    });
};

export const down = async (knex: Knex): Promise<void> => {
    await knex.schema.dropTableIfExists('deferred_issuances');
};
