import type { Knex } from 'knex';

export const up = async (knex: Knex): Promise<void> => {
    // Runtime state of status lists (their configuration is the StatusList resource): the packed entry values,
    // which indexes are allocated, and the last signed token, kept until it is due for re-signing.
    await knex.schema.createTable('status_list_states', (t) => {
        t.string('tenant_id', 63).notNullable().references('id').inTable('tenants').onDelete('CASCADE');
        t.string('list_id', 128).notNullable();
        // Entry i in bits i*bits … i*bits+bits-1, least significant first (the token's lst before compression).
        t.binary('entries').notNullable();
        // One bit per index: set once allocated, never cleared (an index is never reused).
        t.binary('allocated').notNullable();
        t.integer('used').notNullable().defaultTo(0);
        t.text('token');
        t.string('token_etag', 64);
        // When the cached token is due for re-signing (it stays valid for a ttl beyond).
        t.timestamp('token_refresh_at', { useTz: true });
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.primary(['tenant_id', 'list_id']);
    });
};

export const down = async (knex: Knex): Promise<void> => {
    await knex.schema.dropTableIfExists('status_list_states');
};
