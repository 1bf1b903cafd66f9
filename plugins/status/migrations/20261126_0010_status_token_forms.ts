import type { Knex } from 'knex';

export const up = async (knex: Knex): Promise<void> => {
    await knex.schema.alterTable('status_list_states', (t) => {
        // The CWT form of the cached token, signed together with the JWT (same claims, same entries version), so the
        // two forms never disagree and a publish costs one compression.
        t.binary('token_cwt');
        t.string('token_cwt_etag', 64);
        // exp of the cached token: until then it is valid and a GET without immediateUpdate serves it unsigned.
        t.timestamp('token_expires_at', { useTz: true });
        // Set while a process signs the list, so another one waits for its token rather than signing the same
        // entries too; it lapses on its own should that process die.
        t.timestamp('token_signing_until', { useTz: true });
    });
};

export const down = async (knex: Knex): Promise<void> => {
    await knex.schema.alterTable('status_list_states', (t) => {
        t.dropColumn('token_cwt');
        t.dropColumn('token_cwt_etag');
        t.dropColumn('token_expires_at');
        t.dropColumn('token_signing_until');
    });
};
