import type { Knex } from 'knex';
import type { ColumnCipher } from '../crypto/column-cipher';
import type { SecretHasher } from '../crypto/secret-hash';
import type { BaseModel } from './model';
import { createKnex, dialectOf, ping, type Dialect } from './knex';
import type { DatabaseConfig } from '../config';

export type Transaction = Knex.Transaction;
type ModelClass<M extends typeof BaseModel> = M;

/** One database: its knex, its dialect, and models bound to it and to its column cipher. */
export class Database {
    readonly dialect: Dialect;
    private readonly bound = new Map<typeof BaseModel, typeof BaseModel>();

    constructor(readonly knex: Knex, readonly cipher: ColumnCipher, private readonly hasher?: SecretHasher) {
        this.dialect = dialectOf(knex);
    }

    static open(config: DatabaseConfig, cipher: ColumnCipher, hasher?: SecretHasher): Database {
        return new Database(createKnex(config), cipher, hasher);
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

    /** Runs fn in a transaction, or inside the caller's transaction when one is given. */
    transaction<T>(fn: (trx: Transaction) => Promise<T>, outer?: Transaction): Promise<T> {
        return outer ? fn(outer) : this.knex.transaction(fn);
    }

    isUp(): Promise<boolean> {
        return ping(this.knex);
    }

    close(): Promise<void> {
        return this.knex.destroy();
    }
}
