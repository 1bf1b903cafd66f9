import type { Knex } from 'knex';
import { dialectOf } from '../../../lib/db/knex';

/**
 * Indexes of the session list and search (GET /api/session), for tenants with a million sessions and more.
 *
 * Every list query is `tenant_id = ?` plus filters, ordered by one sort key with `updated_at` and `id` as tie
 * breakers (see plugins/sessions/services/search.ts), so that pages are stable. Each index below serves one family of those
 * queries in index order: the first page reads about pageSize index entries and rows, and the capped count reads
 * index entries only. The 0004 list indexes are replaced by versions that end in the tie breakers.
 *
 * | Index | Serves |
 * |---|---|
 * | sessions_list_updated (tenant, updated_at, id) | the default list of a caller who sees both session types |
 * | sessions_list_type_updated (tenant, type, updated_at, id) | a caller limited to one type, or `type=` |
 * | sessions_list_status_type_updated (tenant, status, type, updated_at, id) | `status=` with one type |
 * | sessions_list_status_updated (tenant, status, updated_at, id) | `status=` with both types; `sortBy=status` |
 * | sessions_list_created (tenant, created_at, id, +type, status) | `sortBy=createdAt`; created ranges |
 * | sessions_list_request (tenant, request_id, updated_at, id, +type, status) | `requestId=`; `sortBy=requestId` |
 * | sessions_list_id (tenant, id) | `id=` prefix, `q` by id prefix, `sortBy=id` (binary order: `collate "C"` on PostgreSQL) |
 * | sessions_list_failure (tenant, failure_code, updated_at, id, +type, status) where failure_code is not null | `failureCode=` |
 *
 * `+type, status`: carried along so that counting with a type or status condition (a caller limited to one type,
 * `status=`) reads the index only, never the table. Columns after the tie breakers do not change the order. Writes:
 * the indexes that hold updated_at change on every session update anyway; sessions_list_created now changes with
 * the status too (a few times in a session's life).
 *
 * Kept from 0004: sessions_tenant_reference (q by reference), the unique indexes on wallet_nonce, offer_id and
 * code_hash (q by walletNonce, offer link, pre-authorized code), sessions_status_expires (maintenance job).
 *
 * On PostgreSQL sortBy=requestId puts sessions without a requestId first when ascending and last when descending,
 * as SQLite does; the index is built in that order (`nulls first`) so both directions are index scans.
 */

const replaced: Array<{ name: string; columns: string[] }> = [
    { name: 'sessions_tenant_updated', columns: ['tenant_id', 'updated_at'] },
    { name: 'sessions_tenant_status_type_updated', columns: ['tenant_id', 'status', 'type', 'updated_at'] },
    { name: 'sessions_tenant_created', columns: ['tenant_id', 'created_at'] },
    { name: 'sessions_tenant_request', columns: ['tenant_id', 'request_id', 'updated_at'] }
];

const indexes = (pg: boolean): Array<{ name: string; sql: string }> => [
    { name: 'sessions_list_updated', sql: '(tenant_id, updated_at, id)' },
    { name: 'sessions_list_type_updated', sql: '(tenant_id, type, updated_at, id)' },
    { name: 'sessions_list_status_type_updated', sql: '(tenant_id, status, type, updated_at, id)' },
    { name: 'sessions_list_status_updated', sql: '(tenant_id, status, updated_at, id)' },
    { name: 'sessions_list_created', sql: '(tenant_id, created_at, id, type, status)' },
    { name: 'sessions_list_request', sql: `(tenant_id, request_id${pg ? ' nulls first' : ''}, updated_at, id, type, status)` },
    { name: 'sessions_list_id', sql: pg ? '(tenant_id, id collate "C")' : '(tenant_id, id)' },
    { name: 'sessions_list_failure', sql: '(tenant_id, failure_code, updated_at, id, type, status) where failure_code is not null' }
];

export const up = async (knex: Knex): Promise<void> => {
    const pg = dialectOf(knex) === 'postgres';
    for (const index of indexes(pg)) {
        await knex.raw(`create index ${index.name} on sessions ${index.sql}`);
    }
    for (const index of replaced) {
        await knex.raw(`drop index if exists ${index.name}`);
    }
    if (pg) {
        // Fresh statistics, so the planner sees the new indexes on a table that already holds sessions.
        await knex.raw('analyze sessions');
    }
};

export const down = async (knex: Knex): Promise<void> => {
    const pg = dialectOf(knex) === 'postgres';
    for (const index of replaced) {
        await knex.raw(`create index if not exists ${index.name} on sessions (${index.columns.join(', ')})`);
    }
    for (const index of indexes(pg)) {
        await knex.raw(`drop index if exists ${index.name}`);
    }
};
