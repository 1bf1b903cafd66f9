import type Hapi from '@hapi/hapi';
import type { Boom } from '@hapi/boom';
import type { Database } from '../../lib/db/database';
import type { SessionType } from './models/session';
import { DomainError } from '../../lib/errors';
import { redactSensitive, type Logger } from '../../lib/logging';

/**
 * Session flow logs (LOG_ENABLE_SESSION_LOGGER, LOG_SESSION_STORE).
 *
 * A wallet request binds its session once it has resolved it (`sessionLogOf(request).bind(session, stage)`). From
 * then on:
 * - `request.app.log` is a child of the service logger carrying sessionId and tenantId, so every later log line of
 *   the request names the session, and the request's trace gets `session.id` (observability listens with onBind);
 * - with the session logger on, the request's session log, which the route hands to the services it calls, writes
 *   flow records: level, time, context, sessionId, tenantId, flowType, event, stage, msg;
 * - a request that fails after binding leaves a warn (4xx) or error (5xx) record by itself;
 * - records are kept in `session_logs` as LOG_SESSION_STORE says (off, errors: warn and error, all, verbose: all
 *   with the redacted request and response bodies and error stacks), written in one insert before the response
 *   leaves, so a later GET /api/session/{id}/logs sees them in order. `detail` is sealed with the column cipher.
 *
 * Never pass codes, tokens or tx_codes in a record; the service logger also redacts sensitive keys.
 */

declare module '@hapi/hapi' {
    interface RequestApplicationState {
        /** The request's logger; after a wallet request resolved its session, a child carrying sessionId and tenantId. */
        log?: Logger;
        /** The request's session flow log, once made (sessionLogOf). */
        sessionLog?: RequestSessionLog;
    }
    interface Server {
        /** Present when the session flow logger is on (registerSessionLogger). */
        sessionLogger?: { store: 'off' | 'errors' | 'all' | 'verbose' };
    }
}

export type FlowType = 'OID4VCI' | 'OID4VP' | 'ISO18013-7';
export type SessionLogLevel = 'info' | 'warn' | 'error';
export const SESSION_LOG_LEVELS: readonly SessionLogLevel[] = ['info', 'warn', 'error'];

export interface SessionLogFields {
    /** What happened: flow_start, token_issued, credential_issued, notification, request_failed, … */
    event: string;
    /** Defaults to the stage the session was bound with. */
    stage?: string;
    /** Defaults to the flow (oid4vci, oid4vp). */
    context?: string;
    /** Further non-secret facts; kept in `detail`. */
    [key: string]: unknown;
}

export interface SessionLogger {
    info(fields: SessionLogFields, msg: string): void;
    warn(fields: SessionLogFields, msg: string): void;
    error(fields: SessionLogFields, msg: string): void;
}

export interface SessionRef {
    id: string;
    tenantId: string;
    type: SessionType;
}

export interface SessionLogEntry {
    timestamp: string;
    level: SessionLogLevel;
    stage?: string;
    message: string;
    detail?: Record<string, unknown>;
}

interface PendingEntry {
    level: SessionLogLevel;
    context: string;
    event: string;
    stage: string | undefined;
    message: string;
    extra: Record<string, unknown>;
    at: string;
}

/** What a request keeps once it bound its session while the session logger is on. */
interface Binding {
    session: SessionRef;
    flowType: FlowType;
    stage: string;
    log: Logger;
    store: 'off' | 'errors' | 'all' | 'verbose';
    pending: PendingEntry[];
}

export const flowTypeOf = (type: SessionType): FlowType => (type === 'issuance' ? 'OID4VCI' : 'OID4VP');

/**
 * The session flow log of one request (`sessionLogOf(request)`). The route binds the session once it has resolved
 * it and hands this object, as a SessionLogger, to the services that write flow records; before binding, and with
 * the session logger off, records go nowhere.
 */
export class RequestSessionLog implements SessionLogger {
    private binding?: Binding;
    private readonly bindListeners: Array<(session: SessionRef) => void> = [];

    constructor(private readonly request: Hapi.Request) {}

    /** Calls `listener` with each session the request binds (the observability plugin tags the trace with it). */
    onBind(listener: (session: SessionRef) => void): void {
        this.bindListeners.push(listener);
    }

    /**
     * The request has resolved its session: later log lines of the request carry sessionId and tenantId, the
     * bind listeners hear of it, and flow records of the request go to this session. Tolerates a missing session
     * (nothing happens). Returns this log.
     */
    bind(session: SessionRef | undefined | null, stage: string, options: { flowType?: FlowType } = {}): SessionLogger {
        if (!session) {
            return this;
        }
        if (this.binding && this.binding.session.id === session.id) {
            this.binding.stage = stage;
            return this;
        }
        const { request } = this;
        const base = request.server.app.log;
        const log = base.child({ sessionId: session.id, tenantId: session.tenantId });
        request.app.log = log;
        for (const listener of this.bindListeners) {
            listener(session);
        }

        const settings = request.server.sessionLogger;
        if (!settings) {
            return this;
        }
        this.binding = {
            session,
            flowType: options.flowType ?? flowTypeOf(session.type),
            stage,
            log,
            store: settings.store,
            pending: []
        };
        return this;
    }

    info(fields: SessionLogFields, msg: string): void {
        this.write('info', fields, msg);
    }

    warn(fields: SessionLogFields, msg: string): void {
        this.write('warn', fields, msg);
    }

    error(fields: SessionLogFields, msg: string): void {
        this.write('error', fields, msg);
    }

    private write(level: SessionLogLevel, fields: SessionLogFields, msg: string): void {
        if (this.binding) {
            record(this.binding, level, fields, msg);
        }
    }

    /** Whether records of a bound session wait for settle(). */
    get unsettled(): boolean {
        return !!this.binding;
    }

    /**
     * Before the response leaves (and before errors are mapped to their bodies): a failure after binding becomes a
     * warn or error record, then the kept records of the request are written in one insert.
     */
    async settle(): Promise<void> {
        const { binding, request } = this;
        if (!binding) {
            return;
        }
        const err = errorOf(request);
        if (err) {
            const status = statusOf(err);
            const message = err instanceof DomainError ? err.message : (err.output.payload.message ?? err.message);
            this.write(status >= 500 ? 'error' : 'warn', {
                event: 'request_failed',
                status,
                ...(err.oauthError ? { error: err.oauthError } : {})
            }, message);
        }
        this.binding = undefined;
        if (binding.pending.length) {
            await insertRecords(request, binding);
        }
    }
}

/** The session flow log of a request, made on first use. */
export const sessionLogOf = (request: Hapi.Request): RequestSessionLog => (request.app.sessionLog ??= new RequestSessionLog(request));

const stores = (mode: Binding['store'], level: SessionLogLevel): boolean =>
    mode === 'all' || mode === 'verbose' || (mode === 'errors' && level !== 'info');

const record = (binding: Binding, level: SessionLogLevel, fields: SessionLogFields, msg: string): void => {
    const { event, stage = binding.stage, context = binding.flowType.toLowerCase(), ...extra } = fields;
    binding.log[level]({ context, flowType: binding.flowType, event, stage, ...extra }, msg);
    if (stores(binding.store, level)) {
        binding.pending.push({ level, context, event, stage, message: msg, extra, at: new Date().toISOString() });
    }
};

const errorOf = (request: Hapi.Request): (Boom & Partial<DomainError>) | undefined => {
    const response = request.response as (Boom & Partial<DomainError>) | null;
    return response && response.isBoom ? response : undefined;
};

const statusOf = (err: Boom & Partial<DomainError>): number => (err instanceof DomainError ? err.status! : err.output.statusCode);

/** A body as it may be kept: JSON-like values redacted, text as is, streams and buffers not at all. */
const keepBody = (body: unknown): unknown => {
    if (body === null || body === undefined || Buffer.isBuffer(body) || typeof (body as NodeJS.ReadableStream).pipe === 'function') {
        return undefined;
    }
    return typeof body === 'object' ? redactSensitive(body) : body;
};

/** verbose: what the request sent, what it answered, and the error with its stack. */
const verboseDetail = (request: Hapi.Request): Record<string, unknown> => {
    const err = errorOf(request);
    const response = request.response as Hapi.ResponseObject | null;
    return {
        request: {
            method: request.method.toUpperCase(),
            path: request.path,
            ...(Object.keys(request.query ?? {}).length ? { query: redactSensitive({ ...request.query }) } : {}),
            ...(keepBody(request.payload) !== undefined ? { body: keepBody(request.payload) } : {})
        },
        ...(err
            ? { error: { status: statusOf(err), ...(err.oauthError ? { error: err.oauthError } : {}), message: err.message, stack: err.stack } }
            : { response: { status: response?.statusCode, ...(keepBody(response?.source) !== undefined ? { body: keepBody(response?.source) } : {}) } })
    };
};

/** Writes the kept records of a settled binding in one insert. */
const insertRecords = async (request: Hapi.Request, binding: Binding): Promise<void> => {
    const entries = binding.pending.splice(0);
    const verbose = binding.store === 'verbose' ? verboseDetail(request) : undefined;
    const { db } = request.server;
    const rows = entries.map((e) => {
        const detail = { ...e.extra, ...verbose };
        return {
            tenantId: binding.session.tenantId,
            sessionId: binding.session.id,
            level: e.level,
            flowType: binding.flowType,
            context: e.context.slice(0, 64),
            event: e.event.slice(0, 64),
            stage: e.stage?.slice(0, 64) ?? null,
            message: e.message,
            detail: Object.keys(detail).length ? db.cipher.encrypt(JSON.stringify(detail)) : null,
            createdAt: e.at
        };
    });
    try {
        await db.knex('session_logs').insert(rows);
    }
    catch (error) {
        binding.log.error({ err: error }, 'session log entries could not be stored');
    }
};

/**
 * Installs the session flow logger on a server: nothing when it is not enabled. Call once, from a
 * plugin registered after hallmark-core.
 */
export const registerSessionLogger = (server: Hapi.Server, options: { enabled: boolean; store: Binding['store'] }): void => {
    if (!options.enabled) {
        return;
    }
    server.decorate('server', 'sessionLogger', { store: options.store });
    server.ext('onPreResponse', async (request, h) => {
        await request.app.sessionLog?.settle();
        return h.continue;
    }, { before: ['hallmark-core'] });
    // A request that ends without onPreResponse (a closed connection) still keeps its records.
    server.events.on('response', (request) => {
        if (request.app.sessionLog?.unsettled) {
            void request.app.sessionLog.settle();
        }
    });
};

/** The kept records of a session, oldest first, with `detail` opened. */
export const readSessionLogs = async (db: Database, sessionId: string): Promise<SessionLogEntry[]> => {
    const rows = await db.knex('session_logs').where({ sessionId }).orderBy('id', 'asc')
        .select('level', 'flowType', 'context', 'event', 'stage', 'message', 'detail', 'createdAt');
    return rows.map((row: Record<string, unknown>) => {
        const stored = typeof row.detail === 'string' && row.detail ? JSON.parse(db.cipher.decrypt(row.detail)) as Record<string, unknown> : {};
        const createdAt = row.createdAt instanceof Date ? row.createdAt.toISOString() : new Date(String(row.createdAt)).toISOString();
        return {
            timestamp: createdAt,
            level: row.level as SessionLogLevel,
            ...(row.stage ? { stage: row.stage as string } : {}),
            message: row.message as string,
            detail: {
                ...(row.event ? { event: row.event } : {}),
                ...(row.flowType ? { flowType: row.flowType } : {}),
                ...(row.context ? { context: row.context } : {}),
                ...stored
            }
        };
    });
};
