import { AsyncLocalStorage } from 'node:async_hooks';
import type { Knex } from 'knex';
import type { ColumnCipher } from '../crypto/column-cipher';
import type { SecretHasher } from '../crypto/secret-hash';
import type { BaseModel } from './model';
import { DirectStatements } from './direct';
import { createKnex, dialectOf, ping, stopCheckpointer, type Dialect } from './knex';
import type { DatabaseConfig } from './config';

/** The variables that say where the PostgreSQL database is and how to log in: what to check when it cannot be reached. */
const CONNECTION_VARIABLES = 'DB_HOST, DB_PORT, DB_USERNAME, DB_PASSWORD, DB_DATABASE and DB_SSL';

/** The database could not be reached or refused the login; the message is one line, without the password. */
export class DatabaseUnreachableError extends Error {
    constructor(db: Extract<DatabaseConfig, { type: 'postgres' }>, cause: unknown) {
        super(`Cannot connect to PostgreSQL database "${db.database}" at ${db.host}:${db.port} as "${db.user}": ${describeCause(cause)}. Check ${CONNECTION_VARIABLES}.`, { cause });
        this.name = 'DatabaseUnreachableError';
    }
}

/** One line: a connection refused on every address of a name comes as an AggregateError whose own message is empty. */
const describeCause = (err: unknown): string => {
    const first = err instanceof AggregateError && !err.message ? err.errors[0] : err;
    const text = first instanceof Error ? first.message || (first as { code?: string }).code || first.name : String(first);
    return text.replace(/\s+/g, ' ').trim();
};

export type Transaction = Knex.Transaction;

const ambientTransaction = new AsyncLocalStorage<Transaction>();

/**
 * Transactions open in this process (all databases). While an AsyncLocalStorage is enabled, node runs promise hooks
 * for every promise of the process (about 0.4 ms of CPU per issuance flow); the configuration import at start
 * would leave them on for good. So the storage is disabled again whenever the last transaction ends, and hooks only
 * run while a transaction is open.
 */
let openTransactions = 0;

/** Whether this code runs inside a `transaction()` call of any database (caches must not share or keep its reads). */
export const insideTransaction = (): boolean => ambientTransaction.getStore() !== undefined;
type ModelClass<M extends typeof BaseModel> = M;

/** A host that drops packets never refuses: give up after this long instead of waiting for TCP to. */
const REACHABLE_TIMEOUT_MS = 10_000;

/** One database: its knex, its dialect, and models bound to it and to its column cipher. */
export class Database {
    readonly dialect: Dialect;
    /** Prepared statements on SQLite's connection for the hot paths (see direct.ts); undefined on PostgreSQL. */
    readonly direct?: DirectStatements;
    private readonly bound = new Map<typeof BaseModel, typeof BaseModel>();

    constructor(readonly knex: Knex, readonly cipher: ColumnCipher, private readonly hasher?: SecretHasher) {
        this.dialect = dialectOf(knex);
        if (this.dialect === 'sqlite') {
            this.direct = new DirectStatements(knex);
        }
    }

    static open(config: DatabaseConfig, cipher: ColumnCipher, hasher?: SecretHasher): Database {
        return new Database(createKnex(config), cipher, hasher);
    }

    /**
     * Checks at start that PostgreSQL answers, so that a wrong address or login stops the process with one line
     * naming what to check instead of a stack from the first migration. SQLite opens a local file: nothing to reach.
     */
    static async assertReachable(config: DatabaseConfig): Promise<void> {
        if (config.type !== 'postgres') {
            return;
        }
        const knex = createKnex(config, { connectTimeoutMs: REACHABLE_TIMEOUT_MS });
        try {
            await knex.raw('select 1');
        }
        catch (err) {
            throw new DatabaseUnreachableError(config, err);
        }
        finally {
            await knex.destroy();
        }
    }

    /** Hashes write-only secrets (client secrets) with the service's key. */
    get secretHasher(): SecretHasher {
        if (!this.hasher) {
            throw new Error('This database was opened without a secret hasher');
        }
        return this.hasher;
    }

    /** The model class bound to this database; pass a transaction to `query(trx)` to join it. */
    model<M extends typeof BaseModel>(model: ModelClass<M>): M {
        let bound = this.bound.get(model);
        if (!bound) {
            bound = model.bindKnex(this.knex) as typeof BaseModel;
            Object.defineProperty(bound, 'cipher', { value: this.cipher });
            this.bound.set(model, bound);
        }
        return bound as M;
    }

    /**
     * Runs fn in a transaction, or inside the surrounding one when called from within `transaction()` (so a tenant's
     * whole import is one transaction however many writes it makes). Transactions travel this one way: code called
     * from fn finds the open transaction with `current()` and queries through it, also where it cannot be handed it
     * (a KMS provider storing a key while a key chain is written); on SQLite's single connection, a query outside
     * the open transaction would wait for it forever.
     */
    transaction<T>(fn: (trx: Transaction) => Promise<T>): Promise<T> {
        const outer = this.ambient();
        if (outer) {
            return fn(outer);
        }
        let opened = false;
        const done = () => {
            if (opened && --openTransactions === 0) {
                // Continuations of a finished transaction no longer see it (they would only have found it closed).
                ambientTransaction.disable();
            }
        };
        return this.knex.transaction((trx) => {
            opened = true;
            openTransactions++;
            return ambientTransaction.run(trx, () => fn(trx));
        }).then((value) => {
            done();
            return value;
        }, (err: unknown) => {
            done();
            throw err;
        });
    }

    /**
     * Runs fn outside any surrounding transaction: for what a commit sets off (change listeners and the background
     * work they start), which would otherwise inherit the finished transaction and find it closed.
     */
    detached<T>(fn: () => T): T {
        return ambientTransaction.exit(fn);
    }

    /** The transaction of the surrounding `transaction()` call on this database, if any. */
    ambient(): Transaction | undefined {
        const trx = ambientTransaction.getStore();
        // A transaction's client is a copy of its knex's client that shares the same config object.
        return trx && trx.client.config === this.knex.client.config ? trx : undefined;
    }

    /** What a query goes through: the open transaction inside `transaction()`, else the connection pool. */
    current(): Knex {
        return this.ambient() ?? this.knex;
    }

    /** Inside a transaction it asks through it (SQLite has one connection, held by the transaction). */
    isUp(): Promise<boolean> {
        return ping(this.current());
    }

    async close(): Promise<void> {
        await stopCheckpointer(this.knex);
        await this.knex.destroy();
    }
}
