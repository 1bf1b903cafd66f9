import type { ServerRoute } from '@hapi/hapi';
import { tenantContext } from '../../../lib/auth/context';
import { NotFoundError } from '../../../lib/errors';
import type { Registry } from '../../../lib/registry/registry';
import type { Database } from '../../../lib/db/database';
import type { TenantContext } from '../../../lib/registry/kind';
import { sessionConfigSchema, type SessionConfig, type Tenant } from '../../../resources/tenant';

// spec 4.6: issuance:manage or presentation:manage (aliases of the *:config roles), and tenant:admin.
const MANAGE = ['issuance:config', 'presentation:config', 'tenant:admin'];

/** Session settings live on the tenant document, so changes go through the Tenant kind's write path and audit. */
const updateTenant = async (registry: Registry, db: Database, ctx: TenantContext & { tenantId: string }, sessionConfig: SessionConfig | null) => {
    const tenant = await registry.get<Tenant>(db, ctx, 'Tenant', ctx.tenantId);
    if (!tenant) {
        throw new NotFoundError('Tenant not found');
    }
    await registry.write<Tenant>(db, ctx, 'Tenant', { ...tenant.spec, sessionConfig }, { mode: 'update' });
};

export const sessionConfigRoutes: ServerRoute[] = [
    {
        method: 'PUT',
        path: '/api/session-config',
        options: {
            tags: ['api', 'sessions'],
            description: 'Set the tenant\'s session retention and cleanup mode',
            auth: { access: { scope: MANAGE } },
            validate: { payload: sessionConfigSchema },
            response: { status: { 200: sessionConfigSchema } }
        },
        handler: async (request) => {
            const config = request.payload as SessionConfig;
            await updateTenant(request.server.registry, request.server.db, tenantContext(request), config);
            return config;
        }
    },
    {
        method: 'DELETE',
        path: '/api/session-config',
        options: {
            tags: ['api', 'sessions'],
            description: 'Restore the global session defaults (SESSION_TTL, SESSION_CLEANUP_MODE)',
            auth: { access: { scope: MANAGE } }
        },
        handler: async (request, h) => {
            await updateTenant(request.server.registry, request.server.db, tenantContext(request), null);
            return h.response().code(204);
        }
    }
];
