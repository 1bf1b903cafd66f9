import type { Knex } from 'knex';

export const up = async (knex: Knex): Promise<void> => {
    // The last verified content of each remote trust list (TrustList with a url): its anchors, NextUpdate and when
    // the background job refreshes it. Shared by every replica, so one refresh (graphile-worker runs the job once
    // across replicas) serves all. config_digest is the hash of the list's url and signer certificates: a snapshot
    // of another configuration is never used. Times are epoch milliseconds.
    await knex.schema.createTable('trust_list_snapshots', (t) => {
        t.string('tenant_id', 63).notNullable().references('id').inTable('tenants').onDelete('CASCADE');
        t.string('list_id', 128).notNullable();
        t.string('config_digest', 64).notNullable();
        t.text('anchors').notNullable();
        t.string('format', 16).notNullable();
        t.bigInteger('next_update').notNullable();
        t.bigInteger('fetched_at').notNullable();
        t.bigInteger('refresh_at').notNullable();
        t.primary(['tenant_id', 'list_id']);
        t.index(['refresh_at'], 'trust_list_snapshots_refresh');
    });
    // The registration certificate of each presentation configuration (spec 2.1 registrationCertCache), as the
    // registrar issued it. source_digest hashes what it was requested for (registration_cert, dcql_query and the
    // registrar configuration): a change of any of them makes the row stale, i.e. the cache is cleared on change.
    await knex.schema.createTable('registration_certs', (t) => {
        t.string('tenant_id', 63).notNullable().references('id').inTable('tenants').onDelete('CASCADE');
        t.string('config_id', 255).notNullable();
        t.string('source_digest', 64).notNullable();
        t.text('jwt').notNullable();
        t.string('registrar_id', 255);
        t.bigInteger('issued_at').notNullable();
        t.bigInteger('expires_at');
        t.bigInteger('refresh_at').notNullable();
        t.primary(['tenant_id', 'config_id']);
        t.index(['refresh_at'], 'registration_certs_refresh');
    });
};

export const down = async (knex: Knex): Promise<void> => {
    await knex.schema.dropTableIfExists('registration_certs');
    await knex.schema.dropTableIfExists('trust_list_snapshots');
};
