import type { Database } from './database';
import { isUniqueViolation } from './errors';

/**
 * Values that may be used once: credential proof nonces (issued, then consumed) and DPoP proof ids (claimed on
 * first sight). Each use is one atomic statement, so concurrent requests cannot both succeed, on any replica.
 */
export class SingleUseStore {
    constructor(private readonly db: Database) {}

    private table() {
        return this.db.knex('single_use_values');
    }

    /** Records a fresh value that `consume` may later use once. */
    async issue(tenantId: string, key: string, ttlSeconds: number): Promise<void> {
        const expiresAt = new Date(Date.now() + ttlSeconds * 1000).toISOString();
        // A prepared statement on SQLite's connection when it may run there now (see direct.ts), else knex.
        if (this.db.direct?.run('insert into single_use_values (key, tenant_id, expires_at) values (?, ?, ?)', [key, tenantId, expiresAt]) === undefined) {
            await this.table().insert({ key, tenantId, expiresAt });
        }
    }

    /** True for the first use of an issued, unexpired value of this tenant; false otherwise. */
    async consume(tenantId: string, key: string): Promise<boolean> {
        const now = new Date().toISOString();
        const direct = this.db.direct?.run('update single_use_values set used_at = ? where key = ? and tenant_id = ? and used_at is null and expires_at > ?', [now, key, tenantId, now]);
        if (direct !== undefined) {
            return direct === 1;
        }
        const updated = await this.table()
            .where({ key, tenantId })
            .whereNull('usedAt')
            .where('expiresAt', '>', now)
            .update({ usedAt: now });
        return updated === 1;
    }

    /** True the first time a value is seen (kept until it expires); false for a replay. */
    async claim(tenantId: string, key: string, ttlSeconds: number): Promise<boolean> {
        const now = new Date();
        const row = { key, tenantId, expiresAt: new Date(now.getTime() + ttlSeconds * 1000).toISOString(), usedAt: now.toISOString() };
        try {
            if (this.db.direct?.run('insert into single_use_values (key, tenant_id, expires_at, used_at) values (?, ?, ?, ?)', [row.key, row.tenantId, row.expiresAt, row.usedAt]) === undefined) {
                await this.table().insert(row);
            }
            return true;
        }
        catch (err) {
            if (isUniqueViolation(err)) {
                return false;
            }
            throw err;
        }
    }

    /** Deletes expired values; run by the session maintenance job. */
    async prune(): Promise<number> {
        return this.table().where('expiresAt', '<', new Date().toISOString()).delete();
    }
}
