import type { ServerRoute } from '@hapi/hapi';
import { tenantContext } from '../../../lib/auth/context';
import { NotFoundError } from '../../../lib/errors';
import type { Registry } from '../../../lib/registry/registry';
import type { TenantContext } from '../../../lib/registry/kind';
import { tenantKind, sessionConfigSchema, type SessionConfig } from '../../../resources/tenant';

// spec 4.6: issuance:manage or presentation:manage (aliases of the *:config roles), and tenant:admin.
const MANAGE = ['issuance:config', 'presentation:config', 'tenant:admin'];

/** Session settings live on the tenant document, so changes go through the Tenant kind's write path and audit. */
const updateTenant = async (registry: Registry, ctx: TenantContext & { tenantId: string }, sessionConfig: SessionConfig | null) => {
    const tenant = await registry.get(ctx, tenantKind, ctx.tenantId);
    if (!tenant) {
        throw new NotFoundError('Tenant not found');
    }
    await registry.write(ctx, tenantKind, { ...tenant.spec, sessionConfig }, { mode: 'update' });
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
            await updateTenant(request.server.registry, tenantContext(request), config);
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
            await updateTenant(request.server.registry, tenantContext(request), null);
            return h.response().code(204);
        }
    }
];
