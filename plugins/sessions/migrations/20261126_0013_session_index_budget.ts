import type { Knex } from 'knex';
import { dialectOf } from '../../../lib/db/knex';

/**
 * The index budget of `sessions` (issues #19 and #21): every index is paid for by every write of the flows, so each
 * one must earn its place in the session list (plugins/sessions/services/search.ts) or in a flow's lookup.
 *
 * Before: 15 indexes; every session update (about four per issuance flow, each setting updated_at) rewrote an
 * entry in five indexes that hold updated_at, and every insert added an entry to all fifteen, NULLs included.
 *
 * After: 13 indexes, three of them holding updated_at, and the handles a session may not have indexed only where
 * they are set:
 *
 * | Index | Written on | Serves |
 * |---|---|---|
 * | primary key (id) | insert | get, update by id |
 * | wallet_nonce, offer_id, code_hash, access_token_hash: unique where not null | insert, when set | the wallet's lookups, `q` |
 * | sessions_tenant_reference (tenant, reference) where reference is not null | insert | `q` by reference |
 * | sessions_status_expires (status, expires_at) | status changes | the maintenance job |
 * | sessions_list_updated (tenant, updated_at, id, +type, status) | every update | default order; one type (filtered in the index) |
 * | sessions_list_status_updated (tenant, status, updated_at, id, +type) | every update | `status=` with one or both types; sortBy=status |
 * | sessions_list_created (tenant, created_at, id, +type, status) | status changes | sortBy=createdAt, created ranges |
 * | sessions_list_request (tenant, request_id, updated_at, id, +type, status) | every update | requestId=, sortBy=requestId |
 * | sessions_list_id (tenant, id) | insert | id prefixes, sortBy=id |
 * | sessions_list_failure (…) where failure_code is not null | failed sessions only | failureCode= |
 *
 * Dropped: sessions_list_type_updated and sessions_list_status_type_updated. A caller limited to one type (or
 * `type=`) walks sessions_list_updated or sessions_list_status_updated and tests the type in the index entry (it is
 * carried there), reading about twice the entries for a page; counts stay index-only. Unique and lookup indexes on
 * columns that are NULL for most sessions (wallet_nonce of issuance sessions, offer_id of offers by value,
 * access_token_hash before the token, reference when the caller gives none) become partial: uniqueness is the same
 * (NULLs never collide) and `column = ?` implies `column is not null`, so both databases still use them.
 */

const HANDLES = ['wallet_nonce', 'offer_id', 'code_hash', 'access_token_hash'];

export const up = async (knex: Knex): Promise<void> => {
    const pg = dialectOf(knex) === 'postgres';
    for (const column of HANDLES) {
        const name = `sessions_${column}_unique`;
        await knex.raw(pg ? `alter table sessions drop constraint if exists ${name}` : `drop index if exists ${name}`);
        await knex.raw(`create unique index ${name} on sessions (${column}) where ${column} is not null`);
    }
    await knex.raw('drop index if exists sessions_tenant_reference');
    await knex.raw('create index sessions_tenant_reference on sessions (tenant_id, reference) where reference is not null');

    // Rebuilt with the carried columns (dropping first: the migration runs in one transaction either way).
    await knex.raw('drop index if exists sessions_list_updated');
    await knex.raw('create index sessions_list_updated on sessions (tenant_id, updated_at, id, type, status)');
    await knex.raw('drop index if exists sessions_list_status_updated');
    await knex.raw('create index sessions_list_status_updated on sessions (tenant_id, status, updated_at, id, type)');
    await knex.raw('drop index if exists sessions_list_type_updated');
    await knex.raw('drop index if exists sessions_list_status_type_updated');
    if (pg) {
        await knex.raw('analyze sessions');
    }
};

export const down = async (knex: Knex): Promise<void> => {
    const pg = dialectOf(knex) === 'postgres';
    await knex.raw('create index if not exists sessions_list_type_updated on sessions (tenant_id, type, updated_at, id)');
    await knex.raw('create index if not exists sessions_list_status_type_updated on sessions (tenant_id, status, type, updated_at, id)');
    await knex.raw('drop index if exists sessions_list_status_updated');
    await knex.raw('create index sessions_list_status_updated on sessions (tenant_id, status, updated_at, id)');
    await knex.raw('drop index if exists sessions_list_updated');
    await knex.raw('create index sessions_list_updated on sessions (tenant_id, updated_at, id)');
    await knex.raw('drop index if exists sessions_tenant_reference');
    await knex.raw('create index sessions_tenant_reference on sessions (tenant_id, reference)');
    for (const column of HANDLES) {
        const name = `sessions_${column}_unique`;
        await knex.raw(`drop index if exists ${name}`);
        await knex.raw(pg ? `alter table sessions add constraint ${name} unique (${column})` : `create unique index ${name} on sessions (${column})`);
    }
};
