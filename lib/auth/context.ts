import type Hapi from '@hapi/hapi';
import { ForbiddenError, UnauthorizedError } from '../errors';
import type { TenantContext } from '../registry/kind';

declare module '@hapi/hapi' {
    interface AppCredentials {
        clientId: string;
        /** Absent for tenant-less clients (tenant:manage). */
        tenantId?: string;
        /** Roles as the token states them; `scope` holds the effective ones used for route access. */
        roles: string[];
    }
}

/** The caller's context, from the verified token only: never from a path, query or body. */
export const callerContext = (request: Hapi.Request): TenantContext => {
    const app = request.auth.credentials?.app;
    if (!request.auth.isAuthenticated || !app) {
        throw new UnauthorizedError();
    }
    return { tenantId: app.tenantId, clientId: app.clientId, roles: request.auth.credentials.scope ?? [] };
};

/** The caller's context for a route that acts inside the caller's tenant. */
export const tenantContext = (request: Hapi.Request): TenantContext & { tenantId: string } => {
    const ctx = callerContext(request);
    if (!ctx.tenantId) {
        throw new ForbiddenError('This route acts on a tenant, and the client belongs to none');
    }
    return ctx as TenantContext & { tenantId: string };
};

export const hasScope = (ctx: TenantContext, scope: string): boolean => ctx.roles.includes(scope);
