import { Model, type Pojo } from 'objection';
import type { ColumnCipher } from '../crypto/column-cipher';

/**
 * Base model: camelCase properties over snake_case columns (the knex instance maps identifiers), ISO-8601 timestamps on both dialects, JSON text
 * columns and encrypted columns. `encryptedColumns` name properties whose values are sealed with the column cipher
 * of the database the model is bound to (see Database.model), so two servers in one process never share a key.
 */
export class BaseModel extends Model {
    static encryptedColumns: string[] = [];
    static jsonColumns: string[] = [];
    static cipher?: ColumnCipher;

    private static cipherOrThrow(): ColumnCipher {
        if (!this.cipher) {
            throw new Error(`${this.name} has encrypted columns but is not bound to a database`);
        }
        return this.cipher;
    }

    override $formatDatabaseJson(json: Pojo): Pojo {
        const ctor = this.constructor as typeof BaseModel;
        const out: Pojo = {};
        for (const [key, value] of Object.entries(json)) {
            let v = value instanceof Date ? value.toISOString() : value;
            if (ctor.jsonColumns.includes(key) && v !== null && v !== undefined) {
                v = JSON.stringify(v);
            }
            if (ctor.encryptedColumns.includes(key) && v !== null && v !== undefined) {
                v = ctor.cipherOrThrow().encrypt(typeof v === 'string' ? v : JSON.stringify(v));
            }
            out[key] = v;
        }
        return super.$formatDatabaseJson(out);
    }

    override $parseDatabaseJson(raw: Pojo): Pojo {
        const ctor = this.constructor as typeof BaseModel;
        const json = super.$parseDatabaseJson(raw);
        for (const [key, value] of Object.entries(json)) {
            let v = value instanceof Date ? value.toISOString() : value;
            // A value written before its column was sealed (e.g. a kind that gained secret fields) reads as is.
            if (ctor.encryptedColumns.includes(key) && typeof v === 'string' && ctor.cipherOrThrow().isEncrypted(v)) {
                v = ctor.cipherOrThrow().decrypt(v);
            }
            if (ctor.jsonColumns.includes(key) && typeof v === 'string') {
                v = JSON.parse(v);
            }
            json[key] = v;
        }
        return json;
    }
}
