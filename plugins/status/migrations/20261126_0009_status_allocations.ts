import type { Knex } from 'knex';

export const up = async (knex: Knex): Promise<void> => {
    // Which credential holds which index: what revocation by issuance session and activeCredentials look up. One row
    // per allocated index (the primary key makes a double allocation impossible on either database).
    await knex.schema.createTable('status_allocations', (t) => {
        t.string('tenant_id', 63).notNullable().references('id').inTable('tenants').onDelete('CASCADE');
        t.string('list_id', 128).notNullable();
        t.integer('idx').notNullable();
        // The issuance session the credential was issued in (null when issued outside one).
        t.string('session_id', 64);
        t.string('credential_configuration_id', 255).notNullable();
        // HMAC of the offer's subject (activeCredentials); the subject itself is never stored.
        t.string('subject_hash', 64);
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.primary(['tenant_id', 'list_id', 'idx']);
        t.index(['tenant_id', 'session_id']);
        t.index(['tenant_id', 'credential_configuration_id', 'subject_hash']);
    });
    await knex.schema.alterTable('status_list_states', (t) => {
        // Incremented by every change of an entry value; the cached token records the version it signed, so a
        // token is stale exactly when the two differ (immediateUpdate re-signs at the next GET, the publishing job
        // otherwise).
        t.integer('entries_version').notNullable().defaultTo(0);
        t.integer('token_version');
    });
};

export const down = async (knex: Knex): Promise<void> => {
    await knex.schema.alterTable('status_list_states', (t) => {
        t.dropColumn('entries_version');
        t.dropColumn('token_version');
    });
    await knex.schema.dropTableIfExists('status_allocations');
};
