import type { ServerRoute } from '@hapi/hapi';
import { tenantContext } from '../../../lib/auth/context';
import { NotFoundError } from '../../../lib/errors';
import { statusListDefaultsSchema, tenantKind, type StatusListDefaults } from '../../../resources/tenant';
import { DEFAULT_STATUS_LIST_CONFIG } from '../services/status-lists';

const CONFIG = ['issuance:config'];
const READ = [...CONFIG, 'tenant:read'];
const tags = ['api', 'issuance'];

/** GET/PUT /api/status-list-config: the tenant's statusListConfig, a field of its Tenant document. */
export const statusListConfigRoutes: ServerRoute[] = [
    {
        method: 'GET',
        path: '/api/status-list-config',
        options: {
            tags,
            description: 'Get the tenant\'s status list defaults (bits, capacity, ttlSeconds, immediateUpdate; the service defaults when never set)',
            auth: { access: { scope: READ } },
            response: { status: { 200: statusListDefaultsSchema } }
        },
        handler: async (request) => {
            const ctx = tenantContext(request);
            const tenant = await request.server.registry.get(ctx, tenantKind, ctx.tenantId);
            return tenant?.spec.statusListConfig ?? DEFAULT_STATUS_LIST_CONFIG;
        }
    },
    {
        method: 'PUT',
        path: '/api/status-list-config',
        options: {
            tags,
            description: 'Set the tenant\'s status list defaults: layout of new lists, token ttl, and whether changes are published at the next GET (immediateUpdate) or by the publishing job',
            auth: { access: { scope: CONFIG } },
            validate: { payload: statusListDefaultsSchema },
            response: { status: { 200: statusListDefaultsSchema } }
        },
        handler: async (request) => {
            const { registry } = request.server;
            const ctx = tenantContext(request);
            const tenant = await registry.get(ctx, tenantKind, ctx.tenantId);
            if (!tenant) {
                throw new NotFoundError('Tenant not found');
            }
            const statusListConfig = request.payload as StatusListDefaults;
            const result = await registry.write(ctx, tenantKind, { ...tenant.spec, statusListConfig }, { mode: 'update' });
            return result.resource.spec.statusListConfig;
        }
    }
];
