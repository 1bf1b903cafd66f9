import type { Knex } from 'knex';
import { dialectOf } from '../../../lib/db/knex';

/**
 * The sessions updated more than a day after their creation ("late" updates), indexed apart, and columns carried in
 * the updated-at and created-at list indexes (issue #21).
 *
 * A list in the default order (updated_at) limited to a wide created range cannot walk sessions_list_updated and stop
 * early unless it knows where the range's sessions lie in that order. Almost every session is updated within minutes
 * of its creation, so a session created in [from, to] that is not late was updated in [from, to + 1 day]: the walk
 * reads that window of the updated-at index, and the few late sessions come from this partial index. The two together
 * are exact (see SessionSearch and docs/performance.md).
 *
 * Write cost: the predicate is evaluated on every update (two timestamp parses); an entry is written only for late
 * sessions (a deferred issuance completed days later, an offer that expires after more than a day), so the index
 * budget of 0013 keeps three indexes rewritten by every update.
 *
 * The predicate is written once per dialect in LATE_UPDATE, and a query must repeat it verbatim for either planner to
 * use the index: SQLite compares julian days (deterministic, so allowed in a partial index), PostgreSQL subtracts two
 * timestamptz (immutable, where `created_at + interval` is not).
 */

export const LATE_UPDATE = {
    sqlite: '(julianday(updated_at) - julianday(created_at)) > 1',
    postgres: "(updated_at - created_at) > interval '1 day'"
} as const;

/** How long after its creation a session's update is late: what LATE_UPDATE says, in milliseconds. */
export const LATE_AFTER_MS = 86_400_000;

export const up = async (knex: Knex): Promise<void> => {
    const pg = dialectOf(knex) === 'postgres';
    await knex.raw(`create index sessions_list_late on sessions (tenant_id, updated_at, id, created_at, type, status) where ${pg ? LATE_UPDATE.postgres : LATE_UPDATE.sqlite}`);
    // Carried, so that reading these indexes never reads the table (sessions outside SQLite's page cache at a million):
    // created_at in the updated-at index (the created range tested on the window's walk; an updated range sorted by
    // creation), the credential configurations in the created-at index (the capped count of credentialConfigurationId).
    // Neither index is rewritten more often: updated_at changes on every update anyway, and neither carried column does.
    await knex.raw('drop index if exists sessions_list_updated');
    await knex.raw('create index sessions_list_updated on sessions (tenant_id, updated_at, id, type, status, created_at)');
    await knex.raw('drop index if exists sessions_list_created');
    await knex.raw('create index sessions_list_created on sessions (tenant_id, created_at, id, type, status, credential_configuration_ids)');
    if (pg) {
        await knex.raw('analyze sessions');
    }
};

export const down = async (knex: Knex): Promise<void> => {
    await knex.raw('drop index if exists sessions_list_late');
    await knex.raw('drop index if exists sessions_list_updated');
    await knex.raw('create index sessions_list_updated on sessions (tenant_id, updated_at, id, type, status)');
    await knex.raw('drop index if exists sessions_list_created');
    await knex.raw('create index sessions_list_created on sessions (tenant_id, created_at, id, type, status)');
};
