import Crypto from 'node:crypto';
import type { Knex } from 'knex';
import type { Database } from '../../../lib/db/database';
import { snakeCase } from '../../../lib/db/direct';
import { TERMINAL_STATUSES, type SessionModel, type SessionStatus, type SessionType } from '../models/session';

type SessionColumns = Omit<SessionModel, keyof import('objection').Model | 'type' | 'data'>;

/**
 * The sealed data each session type keeps, declared by the plugin that runs the flow through declaration merging:
 * `declare module '…/plugins/sessions/services/session-service' { interface SessionDataTypes { issuance: IssuanceData } }`.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- filled by declaration merging
export interface SessionDataTypes {}

export type SessionData<K extends SessionType> = K extends keyof SessionDataTypes ? SessionDataTypes[K] : Record<string, unknown>;

/** A session of type K (by default of any type, discriminated by `type`); anonymized sessions have no data. */
export type Session<K extends SessionType = SessionType> = K extends SessionType ? SessionColumns & { type: K; data: SessionData<K> | null } : never;

/**
 * A session found by a wallet's handle (offer id, code, token, wallet nonce): its flow goes on, so it has its data
 * (anonymizing a session removes its handles together with its data).
 */
export type LiveSession<K extends SessionType> = Session<K> & { data: SessionData<K> };

export type SessionPatch = Partial<Omit<SessionColumns, 'id' | 'tenantId' | 'createdAt'>> & { data?: SessionData<SessionType> | null };

export interface UpdateConditions {
    /** Only when the status is one of these. */
    status?: SessionStatus[];
    /** Only when these columns are still null (single-use values). */
    isNull?: Array<keyof Session>;
    /** Only while this counter is below the limit. */
    below?: { column: 'txCodeFailures'; limit: number };
    /** Add one to this counter. */
    increment?: 'txCodeFailures';
    /** Also move the status from one value to another when it has that value (in the same statement). */
    advance?: { from: SessionStatus; to: SessionStatus };
    /** Only when the sealed data is still this ciphertext (optimistic concurrency of mutateData). */
    sameData?: string;
    /** Check the conditions without changing anything. */
    probeOnly?: boolean;
}

const MUTATE_ATTEMPTS = 20;
const DATA_VERSION = Symbol('dataVersion');

export const sha256Hex = (value: string): string => Crypto.createHash('sha256').update(value).digest('hex');

/**
 * A UUID of version 7 (RFC 9562): 48 bits of the Unix time `ms` (the session's created_at), then 74 random bits. Session ids grow with time, so a
 * new session's entries in the primary key and in (tenant, id) go at the end of those indexes, where the pages are
 * in memory, instead of at a random place of a million sessions' worth of pages (see docs/performance.md).
 */
export const timeOrderedUuid = (ms: number): string => {
    const bytes = Crypto.randomBytes(16);
    bytes.writeUIntBE(ms, 0, 6);
    bytes[6] = (bytes[6]! & 0x0f) | 0x70;
    bytes[8] = (bytes[8]! & 0x3f) | 0x80;
    const hex = bytes.toString('hex');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
};

const COLUMNS: Record<string, string> = {
    txCodeFailures: 'tx_code_failures'
};

/**
 * Sessions of both flows, on plain knex: the wallet-facing hot path runs a handful of these statements per request.
 * Every status change is one conditional update (`where status in (...)`), so a late or concurrent request can never
 * overwrite a final status, and single-use values are consumed exactly once. Personal data and protocol state live
 * in the `data` column, sealed with the column cipher.
 */
export class SessionService {
    private readonly listeners: Array<(session: { id: string; tenantId: string; type: SessionType; status: SessionStatus; updatedAt: string }) => void> = [];

    constructor(private readonly db: Database) {}

    private table(): Knex.QueryBuilder {
        return this.db.current()('sessions');
    }

    /** Called after every status change in this process (event streams and metrics listen). */
    onStatusChange(listener: (session: { id: string; tenantId: string; type: SessionType; status: SessionStatus; updatedAt: string }) => void): void {
        this.listeners.push(listener);
    }

    /** A status change another worker or replica made (it arrives on the change bus): told to the listeners here too. */
    relay(change: { id: string; tenantId: string; type: SessionType; status: SessionStatus; updatedAt: string }): void {
        this.notify(change);
    }

    private toRow(patch: SessionPatch): Record<string, unknown> {
        const row: Record<string, unknown> = { ...patch };
        if (patch.data !== undefined) {
            row.data = patch.data === null ? null : this.db.cipher.encrypt(JSON.stringify(patch.data));
        }
        if (patch.credentialConfigurationIds !== undefined) {
            row.credentialConfigurationIds = patch.credentialConfigurationIds === null ? null : JSON.stringify(patch.credentialConfigurationIds);
        }
        return row;
    }

    private fromRow(row: Record<string, unknown> | undefined): Session | undefined {
        if (!row) {
            return undefined;
        }
        const session: Record<string, unknown> = {};
        for (const [key, value] of Object.entries(row)) {
            session[key] = value instanceof Date ? value.toISOString() : value;
        }
        session.data = typeof row.data === 'string' ? JSON.parse(this.db.cipher.decrypt(row.data)) : null;
        // The stored ciphertext identifies this version of the data for mutateData's first attempt.
        Object.defineProperty(session, DATA_VERSION, { value: row.data, enumerable: false });
        session.credentialConfigurationIds = typeof row.credentialConfigurationIds === 'string' ? JSON.parse(row.credentialConfigurationIds) : null;
        session.txCodeFailures = Number(row.txCodeFailures ?? 0);
        return session as Session;
    }

    /** The session when it is of this type and still has its data. */
    private live<K extends SessionType>(type: K, session: Session | undefined): LiveSession<K> | undefined {
        return session?.type === type && session.data !== null ? session as LiveSession<K> : undefined;
    }

    /** Rows of a query on SQLite's connection when it may run there now (see lib/db/direct.ts), else undefined. */
    private directRows(sql: string, params: unknown[]): Array<Record<string, unknown>> | undefined {
        return this.db.ambient() ? undefined : this.db.direct?.all(sql, params);
    }

    async create<K extends SessionType>(input: { tenantId: string; type: K; data?: SessionData<K> | null } & Omit<SessionPatch, 'data'>): Promise<Session<K>> {
        // One clock reading for the id's time and created_at: the list's id-prefix window relies on them agreeing
        // (see migrations/20261128_0017_session_off_clock_ids.ts).
        const clock = Date.now();
        const now = new Date(clock).toISOString();
        const session = { id: timeOrderedUuid(clock), status: 'active' as SessionStatus, txCodeFailures: 0, ...input, createdAt: now, updatedAt: now } as Session<K>;
        const row = this.toRow(session);
        const columns = Object.keys(row).filter((key) => row[key] !== undefined);
        const inserted = this.db.ambient() ? undefined : this.db.direct?.run(
            `insert into sessions (${columns.map(snakeCase).join(', ')}) values (${columns.map(() => '?').join(', ')})`, columns.map((key) => row[key]));
        if (inserted === undefined) {
            await this.table().insert(row);
        }
        this.notify(session);
        return session;
    }

    async get(id: string): Promise<Session | undefined> {
        const rows = this.directRows('select * from sessions where id = ? limit 1', [id]);
        return this.fromRow(rows ? rows[0] : await this.table().where({ id }).first());
    }

    /** A session of this type of the tenant found by one of its public handles. */
    async findBy<K extends SessionType>(type: K, tenantId: string, field: 'offerId' | 'codeHash' | 'accessTokenHash' | 'walletNonce', value: string): Promise<LiveSession<K> | undefined> {
        const rows = this.directRows(`select * from sessions where tenant_id = ? and ${snakeCase(field)} = ? limit 1`, [tenantId, value]);
        return this.live(type, this.fromRow(rows ? rows[0] : await this.table().where({ tenantId, [field]: value }).first()));
    }

    /** A session of this type found by a handle that is unique across tenants (the wallet nonce in a presentation URL). */
    async findByWalletNonce<K extends SessionType>(type: K, walletNonce: string): Promise<LiveSession<K> | undefined> {
        const rows = this.directRows('select * from sessions where wallet_nonce = ? limit 1', [walletNonce]);
        return this.live(type, this.fromRow(rows ? rows[0] : await this.table().where({ walletNonce }).first()));
    }

    /** Applies `patch` only when the session still meets the conditions. True when this call made the change. */
    async update(id: string, patch: SessionPatch, where: UpdateConditions = {}): Promise<boolean> {
        const direct = this.directUpdate(id, patch, where);
        if (direct !== undefined) {
            return direct;
        }
        const knex = this.db.knex;
        const query = this.table().where({ id });
        if (where.status) {
            query.whereIn('status', where.status);
        }
        for (const column of where.isNull ?? []) {
            query.whereNull(column as string);
        }
        if (where.below) {
            query.where(where.below.column, '<', where.below.limit);
        }
        if (where.sameData !== undefined) {
            query.where('data', where.sameData);
        }
        if (where.probeOnly) {
            return !!(await query.first('id'));
        }
        const row = this.toRow({ ...patch, updatedAt: new Date().toISOString() });
        if (where.increment) {
            row[where.increment] = knex.raw('?? + 1', [COLUMNS[where.increment]!]);
        }
        if (where.advance) {
            row.status = knex.raw('case when status = ? then ? else status end', [where.advance.from, where.advance.to]);
        }
        const statusChange = (patch.status || where.advance) && this.listeners.length;
        if (!statusChange) {
            return await query.update(row) === 1;
        }
        // RETURNING (PostgreSQL and SQLite alike) gives listeners what changed without another read.
        const [changed] = await query.update(row, ['id', 'tenantId', 'type', 'status', 'updatedAt']) as Array<Record<string, unknown>>;
        if (changed) {
            this.notify({ ...changed, updatedAt: changed.updatedAt instanceof Date ? changed.updatedAt.toISOString() : changed.updatedAt } as Session);
        }
        return !!changed;
    }

    /** update() as one prepared statement on SQLite's connection, when it may run there now; else undefined. */
    private directUpdate(id: string, patch: SessionPatch, where: UpdateConditions): boolean | undefined {
        if (this.db.ambient() || !this.db.direct) {
            return undefined;
        }
        const conditions = ['id = ?'];
        const params: unknown[] = [id];
        if (where.status) {
            conditions.push(`status in (${where.status.map(() => '?').join(', ')})`);
            params.push(...where.status);
        }
        for (const column of where.isNull ?? []) {
            conditions.push(`${snakeCase(column as string)} is null`);
        }
        if (where.below) {
            conditions.push(`${snakeCase(where.below.column)} < ?`);
            params.push(where.below.limit);
        }
        if (where.sameData !== undefined) {
            conditions.push('data = ?');
            params.push(where.sameData);
        }
        if (where.probeOnly) {
            const found = this.db.direct.all(`select id from sessions where ${conditions.join(' and ')} limit 1`, params);
            return found && found.length > 0;
        }
        const row = this.toRow({ ...patch, updatedAt: new Date().toISOString() });
        const sets: string[] = [];
        const values: unknown[] = [];
        for (const [key, value] of Object.entries(row)) {
            if (value !== undefined && key !== where.increment && !(where.advance && key === 'status')) {
                sets.push(`${snakeCase(key)} = ?`);
                values.push(value);
            }
        }
        if (where.increment) {
            const column = COLUMNS[where.increment]!;
            sets.push(`${column} = ${column} + 1`);
        }
        if (where.advance) {
            sets.push('status = case when status = ? then ? else status end');
            values.push(where.advance.from, where.advance.to);
        }
        const sql = `update sessions set ${sets.join(', ')} where ${conditions.join(' and ')}`;
        const statusChange = (patch.status || where.advance) && this.listeners.length;
        if (!statusChange) {
            const changed = this.db.direct.run(sql, [...values, ...params]);
            return changed === undefined ? undefined : changed === 1;
        }
        const rows = this.db.direct.all(`${sql} returning id, tenant_id, type, status, updated_at`, [...values, ...params]);
        if (!rows) {
            return undefined;
        }
        if (rows[0]) {
            this.notify(rows[0] as Session);
        }
        return rows.length > 0;
    }

    /**
     * Read-modify-write of the sealed data without losing a concurrent writer's change: the update only applies when
     * the stored ciphertext is still the one read (every encryption has a fresh IV, so it identifies the version);
     * otherwise it reads again and retries. Returns the data written, or undefined when `conditions` no longer hold.
     */
    async mutateData<K extends SessionType>(id: string | Session<K>, change: (data: SessionData<K>) => SessionData<K>, patch: SessionPatch = {}, conditions: UpdateConditions = {}): Promise<SessionData<K> | undefined> {
        // A session read earlier saves the first read: when nobody changed it since, the update applies at once.
        let known = typeof id === 'string' ? undefined : (id as Session<K> & { [DATA_VERSION]?: string })[DATA_VERSION];
        const sessionId = typeof id === 'string' ? id : id.id;
        for (let attempt = 0; attempt < MUTATE_ATTEMPTS; attempt++) {
            const row = known !== undefined ? { data: known } : this.directRows('select data from sessions where id = ? limit 1', [sessionId])?.[0] ?? await this.table().where({ id: sessionId }).first('data');
            known = undefined;
            if (!row || typeof row.data !== 'string') {
                return undefined;
            }
            const next = change(JSON.parse(this.db.cipher.decrypt(row.data)) as SessionData<K>);
            const applied = await this.update(sessionId, { ...patch, data: next }, { ...conditions, sameData: row.data });
            if (applied) {
                return next;
            }
            if (!(await this.update(sessionId, {}, { ...conditions, probeOnly: true }))) {
                return undefined;
            }
        }
        throw new Error(`Session ${sessionId} kept changing; gave up after ${MUTATE_ATTEMPTS} attempts`);
    }

    /** Moves a session to `to` unless it is already in a final status. */
    transition(id: string, from: SessionStatus[], to: SessionStatus, patch: SessionPatch = {}): Promise<boolean> {
        return this.update(id, { ...patch, status: to }, { status: from.filter((s) => !TERMINAL_STATUSES.includes(s)) });
    }

    private notify(session: Pick<Session, 'id' | 'tenantId' | 'type' | 'status' | 'updatedAt'>): void {
        for (const listener of this.listeners) {
            listener({ id: session.id, tenantId: session.tenantId, type: session.type, status: session.status, updatedAt: session.updatedAt });
        }
    }
}
