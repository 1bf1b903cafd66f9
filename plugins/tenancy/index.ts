import type Hapi from '@hapi/hapi';
import { pluginOptions } from '../../lib/compose';
import { auditPruneJob } from './jobs/audit-prune';
import { auditLogRoutes } from './routes/audit-logs';
import { sessionConfigRoutes } from './routes/session-config';
import { tenantRoutes } from './routes/tenants';
import { tenancyOptionsSchema, type TenancyOptions } from './options';

/**
 * Tenants and their administration (the Tenant kind itself is core's). Registers: /api/tenants, /api/session-config,
 * /api/admin/audit-logs; the daily 03:00 audit pruning job.
 */
export const plugin: Hapi.Plugin<TenancyOptions> = {
    name: 'hallmark-tenancy',
    dependencies: ['hallmark-core', 'hallmark-oauth2'],
    register(server, rawOptions) {
        const { audit } = pluginOptions('hallmark-tenancy', tenancyOptionsSchema, rawOptions);
        server.registerJob(auditPruneJob(server.db, audit));
        server.route([...tenantRoutes, ...sessionConfigRoutes, ...auditLogRoutes]);
    }
};
