import type { Knex } from 'knex';

/** The client lockout moved to memory, keyed by client and source address (plugins/oauth2/auth-failures.ts). */
export async function up(knex: Knex): Promise<void> {
    await knex.schema.alterTable('clients', (t) => {
        t.dropColumn('failed_attempts');
        t.dropColumn('locked_until');
    });
}

export async function down(knex: Knex): Promise<void> {
    await knex.schema.alterTable('clients', (t) => {
        t.integer('failed_attempts').notNullable().defaultTo(0);
        t.timestamp('locked_until', { useTz: true });
    });
}
