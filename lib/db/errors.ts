import { UniqueViolationError } from 'objection';

/**
 * A write refused by a unique index or primary key, on either database: objection wraps the driver's error
 * (UniqueViolationError) on PostgreSQL; SQLite's may come through as is, and prepared statements (direct.ts) never
 * pass through objection.
 */
export const isUniqueViolation = (err: unknown): boolean => {
    if (err instanceof UniqueViolationError) {
        return true;
    }
    const code = (err as { code?: string } | undefined)?.code;
    return code === '23505' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE';
};
