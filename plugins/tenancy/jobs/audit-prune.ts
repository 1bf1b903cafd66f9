import type { Database } from '../../../lib/db/database';
import type { JobDefinition } from '../../../lib/jobs';
import type { AuditRetention } from '../options';

/** Deletes audit entries past `retentionDays` and beyond the newest `maxEntriesPerTenant` of each tenant. */
export const pruneAuditLog = async (db: Database, audit: AuditRetention): Promise<number> => {
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

export const auditPruneJob = (db: Database, audit: AuditRetention): JobDefinition => ({
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
