import type { Config } from '../../../lib/config';
import type { Database } from '../../../lib/db/database';
import type { JobDefinition } from '../../../lib/jobs';

/** Deletes audit entries past AUDIT_LOG_RETENTION_DAYS and beyond the newest AUDIT_LOG_MAX_ENTRIES_PER_TENANT. */
export const pruneAuditLog = async (db: Database, audit: Config['audit']): Promise<number> => {
    let deleted = 0;
    if (audit.retentionDays > 0) {
        const cutoff = new Date(Date.now() - audit.retentionDays * 86_400_000).toISOString();
        deleted += await db.knex('audit_logs').where('created_at', '<', cutoff).delete();
    }
    if (audit.maxEntriesPerTenant > 0) {
        const ranked = db.knex('audit_logs')
            .select('id', db.knex.raw('row_number() over (partition by tenant_id order by id desc) as rank'))
            .as('ranked');
        deleted += await db.knex('audit_logs')
            .whereIn('id', db.knex.select('id').from(ranked).where('rank', '>', audit.maxEntriesPerTenant))
            .delete();
    }
    return deleted;
};

export const auditPruneJob = (db: Database, audit: Config['audit']): JobDefinition => ({
    name: 'audit-log.prune',
    schedule: { cron: '0 3 * * *' },
    async run({ log }) {
        if (audit.retentionDays <= 0 && audit.maxEntriesPerTenant <= 0) {
            return;
        }
        const deleted = await pruneAuditLog(db, audit);
        log.info({ deleted }, 'audit log pruned');
    }
});
