import type { Knex } from 'knex';
import type { Database } from '../../../lib/db/database';
import type { SessionStatus, SessionType } from '../models/session';
import { LATE_AFTER_MS, LATE_UPDATE } from '../migrations/20261128_0016_session_late_updates';
import { CLOCK_TOLERANCE_MS, OFF_CLOCK } from '../migrations/20261128_0017_session_off_clock_ids';
import { sha256Hex, type Session } from './session-service';

/**
 * The session list and search (GET /api/session) and session deletion, on plain knex.
 *
 * Every query is limited to one tenant and to the session types the caller may see. Filters are AND-combined; `q`
 * is one OR group over the handles a caller may hold (session id or its start, walletNonce, pre-authorized code,
 * reference, offer id) plus what a pasted credential offer link or OpenID4VP request link resolves to. Each handle
 * has an index (see migrations/20261125_0006_session_search.ts); how a query uses them is decided by plan() (see
 * ListPlan), because neither database's planner can be left to choose alone.
 *
 * Ordering: the sort key, then `updated_at`, then `id`, all in the requested direction, so pages are stable
 * even when timestamps are equal. `sortBy=id` orders by the bytes of the id (binary collation on both dialects).
 *
 * `total` is exact up to COUNT_CAP matching sessions. Counting more would read an index range as long as the
 * tenant's sessions, which is what makes unfiltered lists of big tables slow; beyond the cap the answer says
 * `total: COUNT_CAP` (or the end of the requested page, when that is further) and `totalCapped: true`.
 */

export const COUNT_CAP = 10_000;

/**
 * The settings of the list's PostgreSQL statements, for their transaction only (see SessionSearch.list): no parallel
 * workers, no JIT, and no sequential scans while plan() probes (every probe is an index range under a limit);
 * pgPageSettings then says what the page and the count may use.
 */
export const PG_LIST_SETTINGS = "select set_config('max_parallel_workers_per_gather', '0', true), set_config('jit', 'off', true), set_config('enable_seqscan', 'off', true)";
/**
 * After plan(), for the page and the count: sequential scans priced out where the conditions follow the order the
 * table was written in (a created range; an id prefix, ids being time-ordered), where a scan under a limit reads
 * however much of the table lies before the first match; sorts priced out too where the statements walk an index in
 * order (pages out of parts, the count of an id prefix scan). Elsewhere both are left to the planner.
 */
export const pgPageSettings = (allows: { seqScan: boolean; sort: boolean }): string =>
    `select set_config('enable_seqscan', '${allows.seqScan ? 'on' : 'off'}', true), set_config('enable_sort', '${allows.sort ? 'on' : 'off'}', true)`;

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
 * How a list query runs, decided by plan() from a few cheap probes (index-only counts with a small limit). The
 * planners cannot see what these decisions rest on: SQLite keeps no statistics (the service never runs ANALYZE), so
 * it takes every `tenant_id = ?` for selective; PostgreSQL assumes filters are independent of the sort order, which
 * a time range is not (a session is updated soon after it is created).
 *
 * handles (`q`, `id`): `lookup-q` / `lookup-id` when that handle set matches fewer than lookupLimit sessions: those
 * are fetched through the primary key and sorted, and no other condition may use an index. `scan` when it matches
 * more (a short id prefix): the sort-order index is walked and each row tested against the handles.
 *
 * drive: a time range outside the sort key that holds fewer than rangeLimit sessions (or that does not reach the
 * start of the sort order, see walkProbe): its index is read and the
 * matches sorted (SQLite: INDEXED BY; PostgreSQL: an ORDER BY no index can serve). rowOnly: time ranges that hold
 * more, tested on the rows while the sort-order index is walked (SQLite only; PostgreSQL estimates those well).
 *
 * window: a wide created range in the default order (updated_at). A session created in [from, to] and not updated
 * late (see migrations/20261128_0016_session_late_updates.ts) was last updated in [from, to + 1 day] (from an hour
 * earlier: see CLOCK_SKEW_MS): that window of the updated-at index is walked in order with the created range tested on
 * the index entry (created_at is carried there), the late sessions of the range
 * are walked in the same order in their own partial index, and the page is taken from the union of the first
 * page × pageSize of each (see unionPage). Exact, and it stops early wherever the range lies. An id prefix that
 * matches many sessions (a scan) in the default order is a window too: its ids' time digits are a stretch of creation
 * time (see idClock), and the sessions whose id is off that clock are walked in a third part, their own partial index.
 */
export interface ListPlan {
    handles?: 'lookup-q' | 'lookup-id' | 'scan';
    drive?: 'created' | 'updated';
    rowOnly: Array<'created' | 'updated'>;
    window?: boolean;
    /**
     * PostgreSQL, an id prefix that matches many sessions: the direction of updated_at in which its count walks an
     * index that carries status and type, from the end of the tenant's ids nearer the prefix (see idPrefixEnd).
     */
    countOrder?: 'asc' | 'desc';
}

/** The thresholds of plan() and of the count; tests lower them to drive every plan over small data. */
export interface SearchLimits {
    /** total is exact up to this many matching sessions. */
    countCap: number;
    /** At most this many handle matches are fetched by id and sorted; beyond it the sort-order index is walked. */
    lookupLimit: number;
    /**
     * At most this many sessions of a time range are read from its index and sorted (about 5 ms on SQLite, 15 ms on
     * PostgreSQL); beyond it the sort order is walked when the range reaches its start (see walkProbe).
     */
    rangeLimit: number;
    /** Sessions read from the start of the sort order to see whether a wide time range reaches it. */
    walkProbe: number;
    /** A walk expected to read more sessions than this to fill the page loses to reading the range and sorting. */
    walkBudget: number;
}

export const DEFAULT_LIMITS: SearchLimits = { countCap: COUNT_CAP, lookupLimit: 1000, rangeLimit: 20_000, walkProbe: 2000, walkBudget: 20_000 };

/** The session types a query may return: the caller's, narrowed by `type` and by credentialConfigurationId (issuance). */
const visible = (types: SessionType[], query: SessionListQuery): SessionType[] =>
    types.filter((t) => (!query.type || t === query.type) && (query.credentialConfigurationId === undefined || t === 'issuance'));

/** Whether an id prefix is a query's only condition (its count then reads the prefix's range of (tenant, id)). */
const idAlone = (types: SessionType[], query: SessionListQuery): boolean =>
    !query.q?.trim() && visible(types, query).length === ALL_TYPES.length && [0, ALL_STATUSES.length].includes(unique(query.status ?? []).length)
    && query.requestId === undefined && query.failureCode === undefined && query.credentialConfigurationId === undefined
    && !query.createdFrom && !query.createdTo && !query.updatedFrom && !query.updatedTo;

/** The instants a list query's times may be (ISO years 1 to 9999 in UTC: see parseInstant and windowParts). */
export const MIN_INSTANT = Date.parse('0001-01-01T00:00:00.000Z');
export const MAX_INSTANT = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * How far behind the clock of the replica that created a session another replica's may be (see windowParts): a
 * session updated more than this before its creation is in no part of a window (a created range's or an id
 * prefix's), though counted. Replicas' clocks are expected to be synchronized far closer (NTP).
 */
const CLOCK_SKEW_MS = 3_600_000;

/**
 * The creation times, in ms, that the ids of a prefix stand for when they are on the clock (version 7 UUIDs whose
 * first 12 hex digits are created_at, see migrations/20261128_0017_session_off_clock_ids.ts): the prefix's time digits
 * followed by all zeros up to all f. Undefined for a prefix that is no start of such time digits (upper case, another
 * layout): its sessions are all off the clock, and the plain walk finds them. A prefix of the right shape that no
 * version 7 id can start with still has a clock; its window then finds nothing, and the off-clock part everything.
 */
export const idClock = (prefix: string): { from: number; to: number } | undefined => {
    const time = prefix.slice(0, 13);
    if (!/^[0-9a-f]{1,8}(-[0-9a-f]{0,4})?$/.test(time) || !/^(-7?)?$/.test(prefix.slice(13, 15))) {
        return undefined;
    }
    const digits = time.replace('-', '');
    return { from: parseInt(digits.padEnd(12, '0'), 16), to: parseInt(digits.padEnd(12, 'f'), 16) };
};

/** The columns of each sort order (see order()). */
const SORT_COLUMNS: Record<SortKey, string[]> = {
    id: ['id'],
    createdAt: ['created_at', 'id'],
    updatedAt: ['updated_at', 'id'],
    status: ['status', 'updated_at', 'id'],
    requestId: ['request_id', 'updated_at', 'id']
};

const RANGE_COLUMN = { created: 'created_at', updated: 'updated_at' } as const;
const RANGE_INDEX = { created: 'sessions_list_created', updated: 'sessions_list_updated' } as const;

export class SessionSearch {
    private readonly limits: SearchLimits;

    constructor(private readonly db: Database, limits: Partial<SearchLimits> = {}) {
        this.limits = { ...DEFAULT_LIMITS, ...limits };
    }

    private get pg(): boolean {
        return this.db.dialect === 'postgres';
    }

    private get knex(): Knex {
        return this.db.current();
    }

    /** `column` starts with `prefix`: a range in binary order (an index range on (tenant_id, id) for `id`). */
    private prefix(qb: Knex.QueryBuilder, column: string, prefix: string): void {
        const c = this.pg ? `${column} collate "C"` : column;
        qb.whereRaw(`${c} >= ?`, [prefix]);
        const upper = prefixUpperBound(prefix);
        if (upper !== undefined) {
            qb.whereRaw(`${c} < ?`, [upper]);
        }
    }

    /** Ids of the tenant's sessions matching any handle of `q`: a union of index lookups. */
    private handleIds(tenantId: string, handles: SearchHandles): Knex.QueryBuilder {
        const knex = this.knex;
        const branch = () => knex('sessions').select('id').where('tenantId', tenantId);
        const branches: Knex.QueryBuilder[] = handles.idPrefixes.map((prefix) => branch().where((w) => this.prefix(w, 'id', prefix)));
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
        return this.knex('sessions').select('id').where('tenantId', tenantId).where((w) => this.prefix(w, 'id', prefix));
    }

    /** The handles of `q` tested on the row, with expressions no index serves. */
    private handleRow(qb: Knex.QueryBuilder, handles: SearchHandles): void {
        qb.where((any) => {
            for (const prefix of handles.idPrefixes) {
                any.orWhere((w) => this.prefix(w, "(id || '')", prefix));
            }
            const equals = (column: string, values: string[]) => {
                if (values.length) {
                    any.orWhereRaw(`(${column} || '') in (${values.map(() => '?').join(', ')})`, values);
                }
            };
            equals('reference', handles.references);
            equals('wallet_nonce', handles.walletNonces);
            equals('offer_id', handles.offerIds);
            equals('code_hash', handles.codeHashes);
        });
    }

    private async probe(builder: Knex.QueryBuilder, limit: number): Promise<number> {
        const [row] = await this.knex.count({ n: '*' }).from(builder.limit(limit).as('probe'));
        return Number((row as { n: number | string }).n);
    }

    /**
     * The end of the tenant's sessions in updated_at order nearer the sessions of an id prefix. Ids are time-ordered
     * (UUID version 7: the creation time in milliseconds first, and sessions are updated soon after), so a prefix is
     * a stretch of time: a count that walks the updated-at order from the nearer end passes fewer other sessions
     * before the prefix's (a 4-character prefix is seven weeks; at 1,000,000 sessions over 90 days, 23,000 entries
     * walked from one end against 86,000 from the other). A prefix or end ids off that clock (see idClock) match
     * anywhere in time, and either end does as well.
     */
    private async idPrefixEnd(tenantId: string, prefix: string): Promise<'asc' | 'desc'> {
        const stretch = idClock(prefix);
        if (!stretch) {
            return 'asc';
        }
        const end = (dir: 'asc' | 'desc') => this.knex('sessions').select('id').where('tenantId', tenantId).orderByRaw(`id collate "C" ${dir}`).limit(1);
        const [ends] = await this.knex.select(end('asc').as('first'), end('desc').as('last')) as Array<{ first: string | null; last: string | null }>;
        const first = idClock(ends?.first ?? '')?.from;
        const last = idClock(ends?.last ?? '')?.to;
        return first === undefined || last === undefined || stretch.from - first <= last - stretch.to ? 'asc' : 'desc';
    }

    /** Decides how a list query runs (see ListPlan): at most one probe per handle set and per time range. */
    async plan(tenantId: string, types: SessionType[], query: SessionListQuery): Promise<ListPlan> {
        const plan: ListPlan = { rowOnly: [] };
        const q = query.q?.trim();
        const handleSets: Array<['lookup-q' | 'lookup-id', Knex.QueryBuilder]> = [];
        if (q) {
            handleSets.push(['lookup-q', this.handleIds(tenantId, searchHandles(q))]);
        }
        if (query.id) {
            handleSets.push(['lookup-id', this.prefixIds(tenantId, query.id)]);
        }
        let fewest = Infinity;
        for (const [kind, ids] of handleSets) {
            const n = await this.probe(ids, this.limits.lookupLimit);
            if (n < fewest) {
                fewest = n;
                plan.handles = n < this.limits.lookupLimit ? kind : 'scan';
            }
        }
        if (plan.handles === 'lookup-q' || plan.handles === 'lookup-id') {
            return plan;
        }
        if (this.pg && plan.handles === 'scan' && query.id && !q && !idAlone(types, query)) {
            plan.countOrder = await this.idPrefixEnd(tenantId, query.id);
        }

        const sortKey = query.sortBy ?? 'updatedAt';
        const ranges = ([
            ['created', query.createdFrom, query.createdTo],
            ['updated', query.updatedFrom, query.updatedTo]
        ] as const).filter(([range, from, to]) => (from || to) && `${range}At` !== sortKey);
        const inRange = (qb: Knex.QueryBuilder, range: 'created' | 'updated', from?: string, to?: string) => {
            if (from) {
                qb.where(`${range}At`, '>=', ts(from));
            }
            if (to) {
                qb.where(`${range}At`, '<=', ts(to));
            }
            return qb;
        };
        let narrowest = Infinity;
        for (const [range, from, to] of ranges) {
            const n = await this.probe(inRange(this.knex('sessions').select(this.knex.raw('1')).where('tenantId', tenantId), range, from, to), this.limits.rangeLimit);
            if (n < this.limits.rangeLimit && n < narrowest) {
                narrowest = n;
                plan.drive = range;
            }
        }
        if (!plan.drive && sortKey === 'updatedAt' && (ranges.length || this.clockOf(query, plan))) {
            plan.window = true;
        }
        else if (!plan.drive && ranges.length) {
            // Many sessions in range: walking the sort order pays when the range reaches its start (a recent range).
            // How many of the first walkProbe sessions in that order are in range tells.
            const walk = this.knex('sessions').select('createdAt', 'updatedAt').where('tenantId', tenantId);
            const wanted = visible(types, query);
            if (wanted.length < ALL_TYPES.length) {
                walk.where('type', wanted[0]!);
            }
            walk.orderByRaw(this.order(sortKey, query.sortOrder ?? 'desc', false)).limit(this.limits.walkProbe);
            const counted = this.knex.count({ n: '*' }).from(walk.as('walk'));
            for (const [range, from, to] of ranges) {
                inRange(counted, range, from, to);
            }
            const [row] = await counted;
            const seen = Number((row as { n: number | string }).n);
            const needed = query.page * query.pageSize;
            if (seen * (this.limits.walkBudget / this.limits.walkProbe) < needed) {
                plan.drive = ranges[0]![0];
            }
            else if (!this.pg) {
                plan.rowOnly = ranges.map(([range]) => range);
            }
        }
        return plan;
    }

    /**
     * The filters of a list query. The count has no order to keep: it leaves time ranges to the planner (their
     * indexes count index-only) and, on SQLite, matches a large `q` handle set by id (its row test costs a table read).
     */
    private filter(qb: Knex.QueryBuilder, tenantId: string, types: SessionType[], query: SessionListQuery, plan: ListPlan, forCount: boolean): void {
        const q = query.q?.trim();
        // In a lookup the rows come from the handle set through the primary key: every other condition is written so
        // that no index can serve it, or SQLite would walk a whole index range (a tenant's, or sessions_status_expires).
        const lookup = plan.handles === 'lookup-q' || plan.handles === 'lookup-id';
        const column = (name: string) => (lookup ? `(${name} || '')` : name);
        qb.whereRaw(`${column('tenant_id')} = ?`, [tenantId]);
        if (q) {
            const handles = searchHandles(q);
            if (plan.handles === 'lookup-q' || (plan.handles === 'scan' && forCount && !this.pg)) {
                qb.whereIn('id', this.handleIds(tenantId, handles));
            }
            else {
                this.handleRow(qb, handles);
            }
        }
        if (query.id) {
            // Tested on the index entry otherwise (every list index holds the id): a count of a prefix that matches
            // half a million sessions reads 10,001 matches' entries, where the set of their ids took 230 ms to build.
            // The count of a prefix with no other condition reads its own range of (tenant, id): 10,001 entries at
            // most, where a test on the entry walked that index from the tenant's oldest id (at a million sessions,
            // 30 ms on SQLite for a prefix in the middle).
            if (plan.handles === 'lookup-id') {
                qb.whereIn('id', this.prefixIds(tenantId, query.id));
            }
            else if (forCount && idAlone(types, query)) {
                this.prefix(qb, 'id', query.id);
            }
            else {
                this.prefix(qb, "(id || '')", query.id);
            }
        }
        const wanted = visible(types, query);
        if (wanted.length < ALL_TYPES.length) {
            qb.whereRaw(`${column('type')} = ?`, [wanted[0]!]);
        }
        const statuses = unique(query.status ?? []);
        if (statuses.length >= 1 && statuses.length < ALL_STATUSES.length) {
            qb.whereRaw(`${column('status')} in (${statuses.map(() => '?').join(', ')})`, statuses);
        }
        for (const range of ['created', 'updated'] as const) {
            // Timestamps are ISO text on SQLite, where `|| ''` keeps the value; PostgreSQL adds nothing to a timestamptz.
            const unindexed = this.pg ? `(${RANGE_COLUMN[range]} + interval '0 seconds')` : `(${RANGE_COLUMN[range]} || '')`;
            const c = plan.rowOnly.includes(range) && !forCount ? unindexed : RANGE_COLUMN[range];
            const from = range === 'created' ? query.createdFrom : query.updatedFrom;
            const to = range === 'created' ? query.createdTo : query.updatedTo;
            if (from) {
                qb.whereRaw(`${c} >= ?`, [ts(from)]);
            }
            if (to) {
                qb.whereRaw(`${c} <= ?`, [ts(to)]);
            }
        }
        if (query.credentialConfigurationId !== undefined) {
            // Stored as JSON text (an array of ids): an exact element match, whatever the id contains.
            // The substring test first: cheap, and true for every match (the column is written by JSON.stringify).
            const literal = JSON.stringify(query.credentialConfigurationId);
            if (this.pg) {
                qb.whereRaw('strpos(credential_configuration_ids, ?) > 0', [literal]);
                qb.whereRaw('credential_configuration_ids::jsonb @> ?::jsonb', [JSON.stringify([query.credentialConfigurationId])]);
            }
            else {
                qb.whereRaw('instr(credential_configuration_ids, ?) > 0', [literal]);
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

    /**
     * The ORDER BY of a sort key: the key, then updated_at, then id, in one direction. `unindexed`: the first key
     * written so that no index provides the order (PostgreSQL then reads the driving range and sorts).
     */
    private order(sortBy: SortKey, dir: 'asc' | 'desc', unindexed: boolean): string {
        const d = dir === 'asc' ? 'asc' : 'desc';
        // SQLite's unary + is a no-op on any value that no index matches.
        const text = (c: string) => (unindexed ? (this.pg ? `(${c} || '')` : `+${c}`) : c);
        const time = (c: string) => (unindexed ? (this.pg ? `(${c} + interval '0 seconds')` : `+${c}`) : c);
        const tail = `updated_at ${d}, id ${d}`;
        switch (sortBy) {
            case 'id':
                return this.pg ? `${text('id')} collate "C" ${d}` : `${text('id')} ${d}`;
            case 'createdAt':
                return `${time('created_at')} ${d}, id ${d}`;
            case 'status':
                return `${text('status')} ${d}, ${tail}`;
            case 'requestId':
                // SQLite sorts nulls first; PostgreSQL is told to do the same (and its index is built that way).
                return this.pg ? `${text('request_id')} ${d} ${d === 'asc' ? 'nulls first' : 'nulls last'}, ${tail}` : `${text('request_id')} ${d}, ${tail}`;
            default:
                return unindexed ? `${time('updated_at')} ${d}, id ${d}` : tail;
        }
    }

    /** The statements of a list query, for a plan from plan() (also used for query-plan checks). */
    builders(tenantId: string, types: SessionType[], query: SessionListQuery, plan: ListPlan, countLimit = this.limits.countCap + 1): { page: Knex.QueryBuilder; count: Knex.QueryBuilder } {
        const knex = this.knex;
        const from = (): Knex.QueryBuilder => (plan.drive && !this.pg ? this.indexedBy(RANGE_INDEX[plan.drive]) : knex('sessions'));
        const page = this.inParts(query, plan)
            ? this.partsPage(tenantId, types, query, plan)
            : from()
                .select(LIST_COLUMNS)
                .modify((qb) => this.filter(qb, tenantId, types, query, plan, false))
                .orderByRaw(this.order(query.sortBy ?? 'updatedAt', query.sortOrder ?? 'desc', Boolean(plan.drive)))
                .limit(query.pageSize)
                .offset((query.page - 1) * query.pageSize);
        // A condition only the row can answer (credentialConfigurationId) makes the count read rows. SQLite, free to
        // pick any index of the tenant for an unordered count, takes the narrowest, (tenant, id), whose order is
        // random in the table; the created-at index reads them in about the order they were written (and carries the
        // type and status conditions).
        const rowRead = !this.pg && query.credentialConfigurationId !== undefined && !plan.handles && !plan.drive;
        const countFrom = rowRead ? this.indexedBy('sessions_list_created') : knex('sessions');
        const count = knex
            .count({ n: '*' })
            .from(countFrom.select(knex.raw('1'))
                .modify((qb) => this.filter(qb, tenantId, types, query, plan, true))
                .modify((qb) => (plan.countOrder ? qb.orderByRaw(`updated_at ${plan.countOrder}`) : qb))
                .limit(countLimit).as('matching'));
        return { page, count };
    }

    /** The page of a window or of a scan of `q`, out of its parts (the exact handles of a scan come unordered). */
    private partsPage(tenantId: string, types: SessionType[], query: SessionListQuery, plan: ListPlan): Knex.QueryBuilder {
        return plan.window
            ? this.unionPage(tenantId, query, this.windowParts(tenantId, types, query, plan))
            : this.unionPage(tenantId, query, this.scanParts(tenantId, types, query, plan), [1]);
    }

    /** What the page and the count of a plan may use on PostgreSQL (see pgPageSettings). */
    pgPageAllows(query: SessionListQuery, plan: ListPlan): { seqScan: boolean; sort: boolean } {
        // An id prefix scan walks the sort order (and its count, with countOrder, the updated-at order): the planner,
        // which prices the prefix at 0.5 %, would sort the prefix's range of (tenant, id) instead (400,000 sessions
        // for 4 characters at a million).
        const ordered = this.inParts(query, plan) || (plan.handles === 'scan' && Boolean(query.id));
        return { sort: !ordered, seqScan: !ordered && !(query.id || query.createdFrom || query.createdTo) };
    }

    /** Whether the page is taken out of parts (see unionPage). */
    inParts(query: SessionListQuery, plan: ListPlan): boolean {
        return Boolean(plan.window) || (plan.handles === 'scan' && Boolean(query.q?.trim()));
    }

    /** The creation times of an id prefix that a window plan may walk (see idClock): a prefix scan's, without `q`. */
    private clockOf(query: SessionListQuery, plan: ListPlan): { from: number; to: number } | undefined {
        return plan.handles === 'scan' && query.id && !query.q?.trim() ? idClock(query.id) : undefined;
    }

    /** `sessions` read through one index (SQLite only). */
    private indexedBy(index: string): Knex.QueryBuilder {
        return this.knex.from(this.knex.raw(`sessions indexed by ${index}`)) as unknown as Knex.QueryBuilder;
    }

    /**
     * The ids of a window plan (see ListPlan): the first page × pageSize sessions in the sort order from the window of
     * the updated-at index, from the late sessions' partial index and, for an id prefix, from the off-clock sessions'.
     */
    private windowParts(tenantId: string, types: SessionType[], query: SessionListQuery, plan: ListPlan): Knex.QueryBuilder[] {
        const at = (value: string | undefined) => (value === undefined ? undefined : Date.parse(ts(value)));
        // The creation times the window stands for: the created range, and an id prefix's times (an on-clock id's time is
        // within CLOCK_TOLERANCE_MS of created_at).
        const clock = this.clockOf(query, plan);
        const createdFrom = Math.max(at(query.createdFrom) ?? -Infinity, clock ? clock.from - CLOCK_TOLERANCE_MS : -Infinity);
        const createdTo = Math.min(at(query.createdTo) ?? Infinity, clock ? clock.to + CLOCK_TOLERANCE_MS : Infinity);
        // An hour before the range: a replica whose clock lags the one that created a session may stamp its update
        // before its creation. One second beyond the day: julianday() compares in floating point, which may call a lag
        // of a day and a fraction of a millisecond not late.
        const lowest = Math.max(createdFrom - CLOCK_SKEW_MS, at(query.updatedFrom) ?? -Infinity);
        const highest = Math.min(createdTo + LATE_AFTER_MS + 1000, at(query.updatedTo) ?? Infinity);
        // Bounds held to the years 1 to 9999, where every stored time lies (parseInstant): the ISO text of an instant
        // beyond ('+010889-…', the end of id=f's clock) is no timestamp to PostgreSQL, and on SQLite it sorts before
        // every real one.
        const bound = (value: number) => (Number.isFinite(value) ? new Date(Math.min(Math.max(value, MIN_INSTANT), MAX_INSTANT)).toISOString() : undefined);
        const inWindow = { ...query, updatedFrom: bound(lowest), updatedTo: bound(highest) };
        const window = (this.pg ? this.knex('sessions') : this.indexedBy('sessions_list_updated'))
            .modify((qb) => this.filter(qb, tenantId, types, inWindow, { ...plan, rowOnly: ['created'] }, false));
        const late = (this.pg ? this.knex('sessions') : this.indexedBy('sessions_list_late'))
            .whereRaw(this.pg ? LATE_UPDATE.postgres : LATE_UPDATE.sqlite)
            .modify((qb) => this.filter(qb, tenantId, types, query, { ...plan, rowOnly: [] }, false));
        if (!clock) {
            return [window, late];
        }
        const offClock = (this.pg ? this.knex('sessions') : this.indexedBy('sessions_off_clock'))
            .whereRaw(this.pg ? OFF_CLOCK.postgres : OFF_CLOCK.sqlite)
            .modify((qb) => this.filter(qb, tenantId, types, query, { ...plan, rowOnly: [] }, false));
        return [window, late, offClock];
    }

    /**
     * The ids of a `q` that matches many sessions (a scan), as two parts: the sessions whose id starts with `q`, walked
     * in the sort order and tested on the index entry (every list index holds the id), and the few that match an exact
     * handle, looked up through their indexes. Testing every handle on the row read a table row per session walked.
     */
    private scanParts(tenantId: string, types: SessionType[], query: SessionListQuery, plan: ListPlan): Knex.QueryBuilder[] {
        const handles = searchHandles(query.q!.trim());
        const rest = { ...query, q: undefined };
        const byId = query.sortBy === 'id';
        const prefixed = this.knex('sessions')
            .modify((qb) => this.filter(qb, tenantId, types, rest, plan, false))
            .where((any) => {
                for (const prefix of handles.idPrefixes) {
                    any.orWhere((w) => this.prefix(w, byId ? 'id' : "(id || '')", prefix));
                }
            });
        const exact = this.knex('sessions')
            .modify((qb) => this.filter(qb, tenantId, types, rest, { handles: 'lookup-q', rowOnly: ['created', 'updated'] }, false))
            .whereIn('id', this.handleIds(tenantId, { ...handles, idPrefixes: [] }));
        return [prefixed, exact];
    }

    /**
     * A page out of parts that each select matching sessions: the first page × pageSize of each in the sort order
     * (ids and sort keys, from index entries where the part's index holds them), the page of their union (a sort of
     * at most that many keys per part; UNION drops a session two parts found), then those pageSize rows.
     */
    private unionPage(tenantId: string, query: SessionListQuery, parts: Knex.QueryBuilder[], unorderedParts: number[] = []): Knex.QueryBuilder {
        const knex = this.knex;
        const sortKey = query.sortBy ?? 'updatedAt';
        const dir = query.sortOrder ?? 'desc';
        const keys = SORT_COLUMNS[sortKey];
        const selected = parts
            .map((part, i) => part.select(keys).orderByRaw(this.order(sortKey, dir, unorderedParts.includes(i))).limit(query.page * query.pageSize))
            .map((part, i) => knex.select(keys).from(part.as(`part${i}`)));
        const page = knex.select('id')
            .from(selected.slice(1).reduce((union, part) => union.union(part), selected[0]!).as('parts'))
            .orderByRaw(this.order(sortKey, dir, true))
            .limit(query.pageSize)
            .offset((query.page - 1) * query.pageSize);
        return knex('sessions')
            .select(LIST_COLUMNS)
            .whereRaw("(tenant_id || '') = ?", [tenantId])
            .whereIn('id', page)
            .orderByRaw(this.order(sortKey, dir, true));
    }

    /**
     * One page of the tenant's sessions with the total. On PostgreSQL its statements run in one transaction with
     * settings of their own (`set local`): no parallel workers and no JIT compilation, whose start costs more than
     * the index-bounded statements of the list (the capped count of credentialConfigurationId=mdl at 1,000,000
     * sessions: 55 ms with two workers, 15 ms without). The probes of plan() run without sequential scans: each has
     * an index range to read, but the planner, which assumes matching rows spread evenly over the table, chose a
     * sequential scan under the probe's limit for a wide created range, and sessions lie in the table in creation
     * order, so the scan skipped up to 670,000 rows before its first match, as many as where a synchronized scan
     * began made it (8 to 180 ms for the same request at 1,000,000 sessions). The page and the count then run as
     * pgPageAllows says: without sequential scans under a created range or an id prefix (the same reason); without
     * sorts either where they walk an index in order (pages out of parts: the planner prices an id prefix tested on
     * the index entry at a default 0.5 % and, for page 100 of q=<1 character>, sorted the whole table, about 300 ms,
     * where the walk of the sort-order index reads 40,000 entries). Other pages are left to the planner: the capped
     * count of credentialConfigurationId=mdl, a condition of the row's JSON, reads 60,000 rows of the table in 17 ms
     * where the created-at index entries take 35–50 ms and the bitmap it picks otherwise 450 ms.
     * test/plugins/sessions-plans.ts asserts the plans under the same settings.
     */
    async list(tenantId: string, types: SessionType[], query: SessionListQuery): Promise<SessionListResult> {
        if (!visible(types, query).length) {
            return { items: [], total: 0, totalCapped: false };
        }
        if (!this.pg) {
            return this.listPage(tenantId, types, query);
        }
        return this.db.transaction(async (trx) => {
            await trx.raw(PG_LIST_SETTINGS);
            return this.listPage(tenantId, types, query);
        });
    }

    private async listPage(tenantId: string, types: SessionType[], query: SessionListQuery): Promise<SessionListResult> {
        const offset = (query.page - 1) * query.pageSize;
        const cap = Math.max(this.limits.countCap, offset + query.pageSize);
        const plan = await this.plan(tenantId, types, query);
        const statements = this.builders(tenantId, types, query, plan, cap + 1);
        if (this.pg) {
            await this.knex.raw(pgPageSettings(this.pgPageAllows(query, plan)));
        }
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
        const capped = { items, total: cap, totalCapped: true };
        if (plan.handles === 'scan' && await this.idPrefixReachesCap(tenantId, types, query, cap)) {
            return capped;
        }
        const counted = await statements.count;
        const n = Number((counted[0] as { n: number | string }).n);
        return n > cap ? capped : { items, total: n, totalCapped: false };
    }

    /**
     * Whether more than `cap` sessions match through the id prefix alone of a `q` that matches many (a scan): those
     * sessions are a subset of the matches, counted on the (tenant, id) index range without the union of every handle,
     * which both databases build in full before counting (a 1-character prefix of a million sessions: 62,000 ids,
     * ~30 ms on SQLite, where this reads 10,001 index entries). When the prefix alone stays below the cap, the exact
     * count follows.
     */
    private async idPrefixReachesCap(tenantId: string, types: SessionType[], query: SessionListQuery, cap: number): Promise<boolean> {
        const q = query.q?.trim();
        if (!q || query.id !== undefined) {
            return false;
        }
        const knex = this.knex;
        const matching = knex('sessions').select(knex.raw('1'))
            .modify((qb) => this.filter(qb, tenantId, types, { ...query, q: undefined }, { rowOnly: [] }, true))
            .modify((qb) => this.prefix(qb, 'id', q))
            .limit(cap + 1);
        const [row] = await knex.count({ n: '*' }).from(matching.as('matching'));
        return Number((row as { n: number | string }).n) > cap;
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
