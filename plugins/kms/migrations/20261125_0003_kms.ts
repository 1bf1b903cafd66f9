import type { Knex } from 'knex';

export const up = async (knex: Knex): Promise<void> => {
    // Private keys of the db KMS provider, sealed with the column cipher.
    await knex.schema.createTable('kms_db_keys', (t) => {
        t.string('tenant_id', 63).notNullable().references('id').inTable('tenants').onDelete('CASCADE');
        t.string('kid', 255).notNullable();
        t.text('private_jwk').notNullable();
        t.text('public_jwk').notNullable();
        t.timestamp('created_at', { useTz: true }).notNullable();
        t.primary(['tenant_id', 'kid']);
    });

    // Runtime state of key chains (their configuration is the KeyChain resource): key reference, certificates,
    // and the previous keys that stay available for verification after a rotation.
    await knex.schema.createTable('key_chain_keys', (t) => {
        t.string('tenant_id', 63).notNullable().references('id').inTable('tenants').onDelete('CASCADE');
        t.string('key_chain_id', 255).notNullable();
        t.string('kms_provider', 255).notNullable();
        t.string('key_ref', 255).notNullable();
        t.text('public_jwk').notNullable();
        t.text('certificate_chain').notNullable();
        t.text('root_certificate');
        t.text('previous_keys').notNullable();
        t.timestamp('rotated_at', { useTz: true }).notNullable();
        t.primary(['tenant_id', 'key_chain_id']);
    });

    // The per-tenant root CA that signs internalChain leaf certificates; made on first use.
    await knex.schema.createTable('tenant_cas', (t) => {
        t.string('tenant_id', 63).primary().references('id').inTable('tenants').onDelete('CASCADE');
        t.string('kms_provider', 255).notNullable();
        t.string('key_ref', 255).notNullable();
        t.text('certificate').notNullable();
        t.timestamp('created_at', { useTz: true }).notNullable();
    });
};

export const down = async (knex: Knex): Promise<void> => {
    await knex.schema.dropTableIfExists('tenant_cas');
    await knex.schema.dropTableIfExists('key_chain_keys');
    await knex.schema.dropTableIfExists('kms_db_keys');
};
