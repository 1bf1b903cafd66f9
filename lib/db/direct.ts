import Crypto from 'node:crypto';
import type { EventEmitter } from 'node:events';
import type { Knex } from 'knex';

/**
 * Prepared statements on SQLite's connection for the hot session statements (issue #19): through knex's query
 * builder a statement cost about 0.11 ms of CPU more than the prepared statement itself, and a flow runs a dozen.
 *
 * Safe because better-sqlite3 is synchronous and the service has one connection: a statement run here completes
 * before any other code runs, so it can only interleave with knex's queries between them. It is not used while the
 * connection is inside a transaction (someone's `transaction()`, or knex's own): the statement would join it. Then,
 * and on PostgreSQL, callers use knex as before. Rows come back with camelCase keys, as through knex.
 */

interface Statement {
    all(...params: unknown[]): Array<Record<string, unknown>>;
    run(...params: unknown[]): { changes: number };
}

interface Connection {
    prepare(sql: string): Statement;
    readonly open: boolean;
    readonly inTransaction: boolean;
}

const camelNames = new Map<string, string>();
const snakeNames = new Map<string, string>();

/** A column name as a property (snake_case → camelCase), as objection's knexSnakeCaseMappers map it. */
export const camelCase = (column: string): string => {
    let name = camelNames.get(column);
    if (name === undefined) {
        name = column.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
        camelNames.set(column, name);
    }
    return name;
};

/** A property as a column name (camelCase → snake_case). */
export const snakeCase = (property: string): string => {
    let name = snakeNames.get(property);
    if (name === undefined) {
        name = property.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
        snakeNames.set(property, name);
    }
    return name;
};

const camelRow = (row: Record<string, unknown>): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    for (const key in row) {
        out[camelCase(key)] = row[key];
    }
    return out;
};

/** Prepared statements kept per SQL text: a handful of shapes, bounded anyway (texts with a variable list of `?`). */
const STATEMENT_CACHE_LIMIT = 200;

export class DirectStatements {
    private connection?: Connection;
    private taking?: Promise<void>;
    /** Compiled once per connection: better-sqlite3's prepare() parses and plans the SQL every time it is called. */
    private statements = new Map<string, Statement>();

    constructor(private readonly knex: Knex) {}

    /** The connection when a statement may run on it now; undefined at first (it is taken in the background). */
    private ready(): Connection | undefined {
        const connection = this.connection;
        if (connection?.open) {
            return connection.inTransaction ? undefined : connection;
        }
        this.taking ??= (async () => {
            const client = this.knex.client as { acquireConnection(): Promise<Connection>; releaseConnection(c: Connection): Promise<void> };
            const taken = await client.acquireConnection();
            await client.releaseConnection(taken);
            this.connection = taken;
            this.statements = new Map();
        })().catch(() => undefined).finally(() => {
            this.taking = undefined;
        });
        return undefined;
    }

    /** Rows of a query (camelCase keys), or undefined when the caller must use knex. */
    all(sql: string, params: unknown[]): Array<Record<string, unknown>> | undefined {
        return this.reported(sql, params, (connection) => this.prepared(connection, sql).all(...params).map(camelRow));
    }

    /** Rows changed by a statement, or undefined when the caller must use knex. */
    run(sql: string, params: unknown[]): number | undefined {
        return this.reported(sql, params, (connection) => this.prepared(connection, sql).run(...params).changes);
    }

    private prepared(connection: Connection, sql: string): Statement {
        let statement = this.statements.get(sql);
        if (!statement) {
            if (this.statements.size >= STATEMENT_CACHE_LIMIT) {
                this.statements.clear();
            }
            statement = connection.prepare(sql);
            this.statements.set(sql, statement);
        }
        return statement;
    }

    /**
     * Runs a statement and tells knex's query listeners about it as knex would (query, then query-response or
     * query-error), so tracing and query logs see these statements too; without listeners it costs nothing.
     */
    private reported<T>(sql: string, bindings: unknown[], statement: (connection: Connection) => T): T | undefined {
        const connection = this.ready();
        if (!connection) {
            return undefined;
        }
        const events = this.knex as unknown as EventEmitter;
        if (!events.listenerCount('query')) {
            return statement(connection);
        }
        const query = { sql, bindings, method: sql.trimStart().slice(0, 6).toLowerCase(), __knexQueryUid: Crypto.randomUUID() };
        events.emit('query', query);
        try {
            const result = statement(connection);
            events.emit('query-response', result, query);
            return result;
        }
        catch (err) {
            events.emit('query-error', err, query);
            throw err;
        }
    }
}
