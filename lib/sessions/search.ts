import type { Knex } from 'knex';
import type { Database } from '../db/database';
import type { SessionStatus, SessionType } from '../db/models/session';
import { sha256Hex, type Session } from './session-service';

/**
 * The session list and search (GET /api/session) and session deletion, on plain knex.
 *
 * Every query is limited to one tenant and to the session types the caller may see. Filters are AND-combined; `q`
 * is one OR group over the handles a caller may hold (session id or its start, walletNonce, pre-authorized code,
 * reference, offer id) plus what a pasted credential offer link or OpenID4VP request link resolves to. Each handle
 * is matched through an index (see migrations/20261125_0006_session_search.ts), never by scanning.
 *
 * Ordering: the sort key, then `updated_at`, then `id`, all in the requested direction, so pages are stable
 * even when timestamps are equal. `sortBy=id` orders by the bytes of the id (binary collation on both dialects).
 *
 * `total` is exact up to COUNT_CAP matching sessions. Counting more would read an index range as long as the
 * tenant's sessions, which is what makes unfiltered lists of big tables slow; beyond the cap the answer says
 * `total: COUNT_CAP` (or the end of the requested page, when that is further) and `totalCapped: true`.
 */

export const COUNT_CAP = 10_000;

export const SORT_KEYS = ['id', 'status', 'createdAt', 'updatedAt', 'requestId'] as const;
export type SortKey = (typeof SORT_KEYS)[number];

export interface SessionListQuery {
    createdFrom?: string;
    createdTo?: string;
    updatedFrom?: string;
    updatedTo?: string;
    status?: SessionStatus[];
    type?: SessionType;
    credentialConfigurationId?: string;
    requestId?: string;
    failureCode?: string;
    /** Sessions whose id starts with this. */
    id?: string;
    q?: string;
    sortBy?: SortKey;
    sortOrder?: 'asc' | 'desc';
    page: number;
    pageSize: number;
}

/** The columns of a list item; the sealed data and the secret hashes are never read. */
export type ListedSession = Pick<Session, 'id' | 'type' | 'status' | 'requestId' | 'credentialConfigurationIds' | 'reference'
    | 'failureCode' | 'createdAt' | 'updatedAt' | 'expiresAt'>;

export interface SessionListResult {
    items: ListedSession[];
    total: number;
    /** True when more sessions match than were counted (see COUNT_CAP). */
    totalCapped: boolean;
}

const LIST_COLUMNS = ['id', 'type', 'status', 'requestId', 'credentialConfigurationIds', 'reference', 'failureCode', 'createdAt', 'updatedAt', 'expiresAt'];

const ALL_STATUSES: SessionStatus[] = ['active', 'fetched', 'completed', 'failed', 'expired'];
const ALL_TYPES: SessionType[] = ['issuance', 'presentation'];
const PRE_AUTHORIZED_GRANT = 'urn:ietf:params:oauth:grant-type:pre-authorized_code';

/** What a `q` value may stand for, each matched exactly (ids by prefix). */
export interface SearchHandles {
    idPrefixes: string[];
    references: string[];
    walletNonces: string[];
    offerIds: string[];
    codeHashes: string[];
}

const unique = (values: Array<string | undefined | null>): string[] =>
    [...new Set(values.filter((v): v is string => typeof v === 'string' && v.length > 0))];

const tryUrl = (value: string): URL | undefined => {
    try {
        return new URL(value);
    }
    catch {
        return undefined;
    }
};

/** The query parameters of a link, whatever its scheme (openid-credential-offer://, openid4vp://, haip://, https://). */
const linkParams = (value: string): URLSearchParams | undefined => {
    const url = tryUrl(value);
    if (url && url.search) {
        return url.searchParams;
    }
    const at = value.indexOf('?');
    return at >= 0 ? new URLSearchParams(value.slice(at + 1)) : undefined;
};

/** `…/vci/credential-offers/<offerId>` → offerId. */
const offerIdOf = (value: string): string | undefined => {
    const path = tryUrl(value)?.pathname ?? value;
    return /\/credential-offers\/([^/?#]+)\/?$/.exec(path)?.[1];
};

/** `…/presentations/<walletNonce>/oid4vp/request` (or any path under /presentations/<walletNonce>/) → walletNonce. */
const walletNonceOf = (value: string): string | undefined => {
    const path = tryUrl(value)?.pathname ?? value;
    return /\/presentations\/([^/?#]+)(?:\/|$)/.exec(path)?.[1];
};

/** The pre-authorized code of a credential offer (an object or its JSON). */
const preAuthorizedCodeOf = (offer: unknown): string | undefined => {
    let value = offer;
    if (typeof value === 'string') {
        try {
            value = JSON.parse(value);
        }
        catch {
            return undefined;
        }
    }
    const grants = (value as { grants?: Record<string, Record<string, unknown> | undefined> } | null)?.grants;
    const code = grants?.[PRE_AUTHORIZED_GRANT]?.['pre-authorized_code'];
    return typeof code === 'string' ? code : undefined;
};

const safeDecode = (value: string): string => {
    try {
        return decodeURIComponent(value);
    }
    catch {
        return value;
    }
};

/**
 * The handles a `q` value stands for. Plain values may be a session id (or its start), a reference, a walletNonce,
 * an offer id or a pre-authorized code (matched by its hash). Pasted links are taken apart: a credential offer link by
 * reference gives its offer id, one by value its pre-authorized code, an OpenID4VP request link (or its request_uri)
 * its walletNonce. A link pasted once more URL-encoded is decoded first.
 */
export const searchHandles = (raw: string): SearchHandles => {
    const q = raw.trim();
    const handles: SearchHandles = { idPrefixes: [q], references: [q], walletNonces: [q], offerIds: [q], codeHashes: [sha256Hex(q)] };
    const candidates = unique([q, q.includes('%') ? safeDecode(q) : undefined]);
    for (const text of candidates) {
        const params = linkParams(text);
        const offerUri = params?.get('credential_offer_uri');
        const offerValue = params?.get('credential_offer');
        const requestUri = params?.get('request_uri');
        handles.offerIds.push(...unique([offerUri ? offerIdOf(offerUri) : undefined, offerIdOf(text)]));
        handles.codeHashes.push(...unique([offerValue ? preAuthorizedCodeOf(offerValue) : undefined, text.startsWith('{') ? preAuthorizedCodeOf(text) : undefined]).map(sha256Hex));
        handles.walletNonces.push(...unique([requestUri ? walletNonceOf(requestUri) : undefined, text.includes('://') ? walletNonceOf(text) : undefined]));
    }
    return {
        idPrefixes: unique(handles.idPrefixes),
        references: unique(handles.references),
        walletNonces: unique(handles.walletNonces),
        offerIds: unique(handles.offerIds),
        codeHashes: unique(handles.codeHashes)
    };
};

/**
 * The smallest string above every string that starts with `prefix`, in code point order (which is the byte order
 * of UTF-8, SQLite's BINARY and PostgreSQL's "C" collation). Undefined when there is none.
 */
export const prefixUpperBound = (prefix: string): string | undefined => {
    const points = [...prefix].map((c) => c.codePointAt(0)!);
    while (points.length) {
        let last = points.pop()! + 1;
        if (last === 0xd800) {
            last = 0xe000;
        }
        if (last <= 0x10ffff) {
            return String.fromCodePoint(...points, last);
        }
    }
    return undefined;
};

const ts = (value: string): string => new Date(value).toISOString();

const iso = (value: unknown): string | null => (value instanceof Date ? value.toISOString() : value === null || value === undefined ? null : String(value));

/**
 * How a list query finds its rows when it has handles (`q`, `id`). `lookup`: the handles match few sessions, so those
 * are fetched by id and sorted; `scan`: they match many (a short id prefix), so the list index is walked in order and
 * each row tested against the handle set.
 */
export type HandlePlan = { kind: 'lookup'; driver: 'q' | 'id' } | { kind: 'scan' };

/** At most this many handle matches are sorted in memory; beyond it the list index is walked in order instead. */
export const LOOKUP_LIMIT = 1000;

export class SessionSearch {
    constructor(private readonly db: Database) {}

    private get pg(): boolean {
        return this.db.dialect === 'postgres';
    }

    private get knex(): Knex {
        return this.db.ambient() ?? this.db.knex;
    }

    /** `id` starts with `prefix`, as an index range on (tenant_id, id) in binary order. */
    private idPrefix(qb: Knex.QueryBuilder, prefix: string): void {
        const column = this.pg ? 'id collate "C"' : 'id';
        qb.whereRaw(`${column} >= ?`, [prefix]);
        const upper = prefixUpperBound(prefix);
        if (upper !== undefined) {
            qb.whereRaw(`${column} < ?`, [upper]);
        }
    }

    /** Ids of the tenant's sessions matching any handle of `q`: a union of index lookups. */
    private handleIds(tenantId: string, handles: SearchHandles): Knex.QueryBuilder {
        const knex = this.knex;
        const branch = () => knex('sessions').select('id').where('tenantId', tenantId);
        const branches: Knex.QueryBuilder[] = handles.idPrefixes.map((prefix) => branch().where((w) => this.idPrefix(w, prefix)));
        const equals = (column: string, values: string[]) => {
            if (values.length) {
                branches.push(values.length === 1 ? branch().where(column, values[0]!) : branch().whereIn(column, values));
            }
        };
        equals('reference', handles.references);
        equals('walletNonce', handles.walletNonces);
        equals('offerId', handles.offerIds);
        equals('codeHash', handles.codeHashes);
        const [first, ...rest] = branches;
        return rest.length ? first!.unionAll(rest) : first!;
    }

    /** Ids of the tenant's sessions whose id starts with `prefix`. */
    private prefixIds(tenantId: string, prefix: string): Knex.QueryBuilder {
        return this.knex('sessions').select('id').where('tenantId', tenantId).where((w) => this.idPrefix(w, prefix));
    }

    /**
     * Decides how a query with handles runs, by counting (up to LOOKUP_LIMIT) what each handle set matches: a few
     * index entries. Without handles there is nothing to decide.
     */
    async plan(tenantId: string, query: SessionListQuery): Promise<HandlePlan | undefined> {
        const q = query.q?.trim();
        const sets: Array<['q' | 'id', Knex.QueryBuilder]> = [];
        if (q) {
            sets.push(['q', this.handleIds(tenantId, searchHandles(q))]);
        }
        if (query.id) {
            sets.push(['id', this.prefixIds(tenantId, query.id)]);
        }
        if (!sets.length) {
            return undefined;
        }
        const knex = this.knex;
        let best: { driver: 'q' | 'id'; n: number } | undefined;
        for (const [driver, ids] of sets) {
            const [row] = await knex.count({ n: '*' }).from(ids.limit(LOOKUP_LIMIT).as('probe'));
            const n = Number((row as { n: number | string }).n);
            if (!best || n < best.n) {
                best = { driver, n };
            }
        }
        return best!.n < LOOKUP_LIMIT ? { kind: 'lookup', driver: best!.driver } : { kind: 'scan' };
    }

    /** The filters of a list query, for both the page and the count. */
    private filter(qb: Knex.QueryBuilder, tenantId: string, types: SessionType[], query: SessionListQuery, plan: HandlePlan | undefined): void {
        const q = query.q?.trim();
        // In a lookup, the rows come from the handle set through the primary key; every other condition is written so
        // that no index can serve it. SQLite has no statistics: it would take `tenant_id = ?` or `status = ?` for
        // selective and walk a whole index range instead (sessions_list_updated, or sessions_status_expires).
        const lookup = plan?.kind === 'lookup';
        const column = (name: string) => (lookup ? `(${name} || '')` : name);
        qb.whereRaw(`${column('tenant_id')} = ?`, [tenantId]);
        if (q) {
            const ids = this.handleIds(tenantId, searchHandles(q));
            if (lookup && plan.driver !== 'q') {
                qb.whereRaw(`${column('id')} in ?`, [ids]);
            }
            else {
                qb.whereIn('id', ids);
            }
        }
        if (query.id) {
            const ids = this.prefixIds(tenantId, query.id);
            if (lookup && plan.driver !== 'id') {
                qb.whereRaw(`${column('id')} in ?`, [ids]);
            }
            else {
                qb.whereIn('id', ids);
            }
        }
        const issuanceOnly = query.credentialConfigurationId !== undefined;
        const wanted = types.filter((t) => (!query.type || t === query.type) && (!issuanceOnly || t === 'issuance'));
        if (wanted.length < ALL_TYPES.length) {
            qb.whereRaw(`${column('type')} = ?`, [wanted[0]!]);
        }
        const statuses = unique(query.status ?? []);
        if (statuses.length >= 1 && statuses.length < ALL_STATUSES.length) {
            qb.whereRaw(`${column('status')} in (${statuses.map(() => '?').join(', ')})`, statuses);
        }
        if (query.createdFrom) {
            qb.where('createdAt', '>=', ts(query.createdFrom));
        }
        if (query.createdTo) {
            qb.where('createdAt', '<=', ts(query.createdTo));
        }
        if (query.updatedFrom) {
            qb.where('updatedAt', '>=', ts(query.updatedFrom));
        }
        if (query.updatedTo) {
            qb.where('updatedAt', '<=', ts(query.updatedTo));
        }
        if (query.credentialConfigurationId !== undefined) {
            // Stored as JSON text (an array of ids): an exact element match, whatever the id contains.
            if (this.pg) {
                qb.whereRaw('credential_configuration_ids::jsonb @> ?::jsonb', [JSON.stringify([query.credentialConfigurationId])]);
            }
            else {
                qb.whereRaw('exists (select 1 from json_each(sessions.credential_configuration_ids) e where e.value = ?)', [query.credentialConfigurationId]);
            }
        }
        if (query.requestId !== undefined) {
            qb.whereRaw(`${column('request_id')} = ?`, [query.requestId]);
        }
        if (query.failureCode !== undefined) {
            qb.whereRaw(`${column('failure_code')} = ?`, [query.failureCode]);
        }
    }

    /** The ORDER BY of a sort key: the key, then updated_at, then id, in one direction. */
    private order(sortBy: SortKey, dir: 'asc' | 'desc'): string {
        const d = dir === 'asc' ? 'asc' : 'desc';
        const tail = `updated_at ${d}, id ${d}`;
        switch (sortBy) {
            case 'id':
                return this.pg ? `id collate "C" ${d}` : `id ${d}`;
            case 'createdAt':
                return `created_at ${d}, id ${d}`;
            case 'status':
                return `status ${d}, ${tail}`;
            case 'requestId':
                // SQLite sorts nulls first; PostgreSQL is told to do the same (and its index is built that way).
                return `request_id ${d}${this.pg ? (d === 'asc' ? ' nulls first' : ' nulls last') : ''}, ${tail}`;
            default:
                return tail;
        }
    }

    /** The statements of a list query, for a plan from plan() (also used for query-plan checks). */
    builders(tenantId: string, types: SessionType[], query: SessionListQuery, plan: HandlePlan | undefined, countLimit = COUNT_CAP + 1): { page: Knex.QueryBuilder; count: Knex.QueryBuilder } {
        const knex = this.knex;
        const page = knex('sessions')
            .select(LIST_COLUMNS)
            .modify((qb) => this.filter(qb, tenantId, types, query, plan))
            .orderByRaw(this.order(query.sortBy ?? 'updatedAt', query.sortOrder ?? 'desc'))
            .limit(query.pageSize)
            .offset((query.page - 1) * query.pageSize);
        const count = knex
            .count({ n: '*' })
            .from(knex('sessions').select(knex.raw('1')).modify((qb) => this.filter(qb, tenantId, types, query, plan)).limit(countLimit).as('matching'));
        return { page, count };
    }

    async list(tenantId: string, types: SessionType[], query: SessionListQuery): Promise<SessionListResult> {
        const wanted = types.filter((t) => (!query.type || t === query.type) && (query.credentialConfigurationId === undefined || t === 'issuance'));
        if (!wanted.length) {
            return { items: [], total: 0, totalCapped: false };
        }
        const offset = (query.page - 1) * query.pageSize;
        const cap = Math.max(COUNT_CAP, offset + query.pageSize);
        const statements = this.builders(tenantId, types, query, await this.plan(tenantId, query), cap + 1);
        const rows = await statements.page as Array<Record<string, unknown>>;
        const items = rows.map((row) => ({
            id: row.id as string,
            type: row.type as SessionType,
            status: row.status as SessionStatus,
            requestId: (row.requestId as string | null) ?? null,
            credentialConfigurationIds: typeof row.credentialConfigurationIds === 'string' ? JSON.parse(row.credentialConfigurationIds) as string[] : null,
            reference: (row.reference as string | null) ?? null,
            failureCode: (row.failureCode as string | null) ?? null,
            createdAt: iso(row.createdAt)!,
            updatedAt: iso(row.updatedAt)!,
            expiresAt: iso(row.expiresAt)
        }));

        // A page that is not full ends the list: its end is the total, no count needed (most searches end here).
        if (items.length < query.pageSize && (items.length > 0 || offset === 0)) {
            return { items, total: offset + items.length, totalCapped: false };
        }
        const counted = await statements.count;
        const n = Number((counted[0] as { n: number | string }).n);
        return n > cap ? { items, total: cap, totalCapped: true } : { items, total: n, totalCapped: false };
    }

    /** The type of a session of the tenant, or undefined when the tenant has no such session. */
    async typeOf(tenantId: string, id: string): Promise<SessionType | undefined> {
        const row = await this.knex('sessions').where({ tenantId, id }).first('type') as { type: SessionType } | undefined;
        return row?.type;
    }

    /** Deletes a session of the tenant (its logs go with it). True when there was one. */
    async remove(tenantId: string, id: string): Promise<boolean> {
        return await this.knex('sessions').where({ tenantId, id }).delete() === 1;
    }
}
