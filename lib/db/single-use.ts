import type { Database } from './database';

const isUniqueViolation = (err: unknown): boolean => {
    const e = err as { code?: string };
    return e.code === '23505' || e.code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || e.code === 'SQLITE_CONSTRAINT_UNIQUE';
};

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
        await this.table().insert({ key, tenantId, expiresAt: new Date(Date.now() + ttlSeconds * 1000).toISOString() });
    }

    /** True for the first use of an issued, unexpired value of this tenant; false otherwise. */
    async consume(tenantId: string, key: string): Promise<boolean> {
        const now = new Date().toISOString();
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
        try {
            await this.table().insert({ key, tenantId, expiresAt: new Date(now.getTime() + ttlSeconds * 1000).toISOString(), usedAt: now.toISOString() });
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
