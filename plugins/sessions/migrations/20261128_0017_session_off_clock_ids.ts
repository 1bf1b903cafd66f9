import type { Knex } from 'knex';
import { dialectOf } from '../../../lib/db/knex';

/**
 * The sessions whose id does not tell when they were created ("off-clock" ids), indexed apart (issue #21).
 *
 * The service gives every session a UUID of version 7 whose first 48 bits are its created_at in milliseconds (see
 * timeOrderedUuid). An id prefix is then a stretch of creation time, and a list limited to a prefix in the default
 * order walks the window of the updated-at index where those sessions lie, as a created range does (see
 * SessionSearch.windowParts), instead of everything updated after them. That is exact only with every other session
 * of the prefix found elsewhere: the late ones (migration 0016) and these, whose id is not a lowercase version 7 UUID
 * within a minute of created_at (sessions written before ids were time-ordered, or by other means). The service
 * writes none, so this index stays empty but for them; its predicate is evaluated on each insert and update. It is
 * in the list's order (updated_at) so that its part of a page is walked, never sorted: PostgreSQL runs those pages
 * with sorts priced out, and would rather walk the whole updated-at index than sort an empty set.
 *
 * The predicate is written once per dialect in OFF_CLOCK, and a query must repeat it verbatim for either planner to
 * use the index. Both compare the id's 12 time digits with created_at ± 60 s written the same way (fixed-width
 * lowercase hex compares as the numbers do): SQLite with julianday() and printf() (deterministic), PostgreSQL with
 * the epoch of an interval and to_hex() (immutable).
 */

/** How far an id's time may be from its session's created_at and still be on the clock, in milliseconds. */
export const CLOCK_TOLERANCE_MS = 60_000;

const sqliteMs = "cast(round((julianday(created_at) - 2440587.5) * 86400000) as integer)";
const pgMs = "round(extract(epoch from (created_at - timestamptz '1970-01-01 00:00:00+00')) * 1000)::bigint";
const hex8 = '[0-9a-f]'.repeat(8);
const hex4 = '[0-9a-f]'.repeat(4);

export const OFF_CLOCK = {
    sqlite: `not (id glob '${hex8}-${hex4}-7*' and substr(id, 1, 8) || substr(id, 10, 4) between printf('%012x', ${sqliteMs} - ${CLOCK_TOLERANCE_MS}) and printf('%012x', ${sqliteMs} + ${CLOCK_TOLERANCE_MS}))`,
    postgres: `not (id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-7' and (substr(id, 1, 8) || substr(id, 10, 4)) collate "C" between lpad(to_hex(${pgMs} - ${CLOCK_TOLERANCE_MS}), 12, '0') and lpad(to_hex(${pgMs} + ${CLOCK_TOLERANCE_MS}), 12, '0'))`
} as const;

export const up = async (knex: Knex): Promise<void> => {
    const pg = dialectOf(knex) === 'postgres';
    await knex.raw(`create index sessions_off_clock on sessions (tenant_id, updated_at, id, created_at, type, status) where ${pg ? OFF_CLOCK.postgres : OFF_CLOCK.sqlite}`);
    if (pg) {
        await knex.raw('analyze sessions');
    }
};

export const down = async (knex: Knex): Promise<void> => {
    await knex.raw('drop index if exists sessions_off_clock');
};
