import type { Knex } from 'knex';

export const up = async (knex: Knex): Promise<void> => {
    // Session flow logs (LOG_SESSION_STORE). `detail` may hold request and response bodies in verbose mode: sealed.
    await knex.schema.createTable('session_logs', (t) => {
        t.bigIncrements('id').primary();
        t.string('tenant_id', 63).notNullable().references('id').inTable('tenants').onDelete('CASCADE');
        t.string('session_id', 64).notNullable().references('id').inTable('sessions').onDelete('CASCADE');
        t.string('level', 8).notNullable();
        t.string('flow_type', 32);
        t.string('context', 64);
        t.string('event', 64);
        t.string('stage', 64);
        t.text('message').notNullable();
        t.text('detail');
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.index(['session_id', 'id'], 'session_logs_session');
    });
};

export const down = async (knex: Knex): Promise<void> => {
    await knex.schema.dropTableIfExists('session_logs');
};
