import type Hapi from '@hapi/hapi';
import { requirePlugins } from '../../lib/compose';
import { tenantKind } from '../../resources/tenant';
import { auditPruneJob } from './jobs/audit-prune';
import { auditLogRoutes } from './routes/audit-logs';
import { sessionConfigRoutes } from './routes/session-config';
import { tenantRoutes } from './routes/tenants';

/**
 * Tenants and their administration. Registers: the Tenant kind; /api/tenants, /api/session-config,
 * /api/admin/audit-logs; the daily 03:00 audit pruning job.
 */
export const plugin: Hapi.Plugin<Record<string, never>> = {
    name: 'hallmark-tenancy',
    register(server) {
        requirePlugins(server, 'hallmark-tenancy', ['hallmark-core', 'hallmark-oauth2']);
        server.registerResource(tenantKind);
        server.registerJob(auditPruneJob(server.db, server.app.config.audit));
        server.route([...tenantRoutes, ...sessionConfigRoutes, ...auditLogRoutes]);
    }
};
