import type { Request, ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { callerContext } from '../../../lib/auth/context';
import { grantableRoles } from '../../../lib/auth/roles';
import { generateClientSecret } from '../../../lib/crypto/secret-hash';
import { ForbiddenError, NotFoundError, ValidationError } from '../../../lib/errors';
import { pageOf, pageQuery, paginate, type Page } from '../../../lib/http/pagination';
import { GENERATE, type TenantContext } from '../../../lib/registry/kind';
import { tenantKind, tenantIdSchema } from '../../../resources/tenant';
import { clientKind, clientIdSchema, clientSchema, tenantOfClient, type Client } from '../../../resources/client';

const MANAGE = ['tenant:admin', 'tenant:manage'];
const READ = [...MANAGE, 'tenant:read'];

/** A client as answered: its configuration plus the tenant it belongs to. Never the secret or its hash. */
const clientView = Joi.object({
    clientId: Joi.string().required(),
    tenantId: Joi.string().allow(null).required(),
    description: Joi.string().allow(null),
    roles: Joi.array().items(Joi.string()).required(),
    allowedPresentationConfigs: Joi.array().items(Joi.string()).required(),
    allowedIssuanceConfigs: Joi.array().items(Joi.string()).required(),
    createdAt: Joi.string().isoDate(),
    updatedAt: Joi.string().isoDate()
}).label('ClientView');

const createdClient = clientView.keys({ clientSecret: Joi.string().required() }).label('CreatedClient');

// The service always makes the secret of a client created here; `!generate` (spec 2.3) says so explicitly.
const createBody = (clientSchema as Joi.ObjectSchema).keys({
    tenantId: tenantIdSchema.allow(null),
    secret: Joi.string().valid(GENERATE).description('Optional: !generate, the default. The answer shows the new secret once')
}).label('ClientCreate');
const patchBody = (clientSchema as Joi.ObjectSchema).fork(['clientId', 'roles'], (s) => s.optional())
    .keys({ clientId: Joi.forbidden(), secret: Joi.forbidden() }).min(1).label('ClientPatch');

const view = (spec: Client, tenantId: string | undefined, meta: { createdAt: string; updatedAt: string }) => ({
    clientId: spec.clientId,
    tenantId: tenantId ?? null,
    ...(spec.description ? { description: spec.description } : {}),
    roles: spec.roles,
    allowedPresentationConfigs: spec.allowedPresentationConfigs ?? [],
    allowedIssuanceConfigs: spec.allowedIssuanceConfigs ?? [],
    createdAt: meta.createdAt,
    updatedAt: meta.updatedAt
});

/**
 * Which tenant a client request acts on. A tenant client: its own tenant, always. A tenant:manage client: the
 * tenant it names (query or body), or none for tenant-less clients.
 */
const targetContext = (caller: TenantContext, tenantId: string | null | undefined): TenantContext => {
    if (caller.tenantId) {
        if (tenantId && tenantId !== caller.tenantId) {
            throw new NotFoundError('Tenant not found');
        }
        return caller;
    }
    return { ...caller, tenantId: tenantId ?? undefined };
};

const checkGrant = (caller: TenantContext, roles: string[]) => {
    const grantable = grantableRoles(caller.roles);
    const refused = roles.filter((r) => !grantable.has(r));
    if (refused.length) {
        throw new ForbiddenError(`You may not grant ${refused.join(', ')}`);
    }
};

const tenantQuery = Joi.object({
    tenantId: tenantIdSchema.description('tenant:manage only: the tenant whose clients to list (omit for tenant-less clients)')
});

const byIdQuery = Joi.object({
    tenantId: tenantIdSchema.description('Optional: when given, the client must belong to this tenant (404 otherwise)')
});

/**
 * The context a request on one client acts in. Client ids are global (the token endpoint names no tenant), so a
 * tenant:manage client reaches any client by its id, in the client's own tenant; a tenant client only those of its
 * tenant. Another tenant's client answers 404 like a missing one.
 */
const clientContext = async (request: Request): Promise<TenantContext> => {
    const caller = callerContext(request);
    const named = (request.query as { tenantId?: string }).tenantId;
    if (caller.tenantId) {
        return targetContext(caller, named);
    }
    const owner = await tenantOfClient(request.server.db, request.params.clientId as string);
    if (owner === undefined || (named !== undefined && owner !== named)) {
        throw new NotFoundError('Client not found');
    }
    return { ...caller, tenantId: owner ?? undefined };
};

export const clientRoutes: ServerRoute[] = [
    {
        method: 'GET',
        path: '/api/clients',
        options: {
            tags: ['api', 'clients'],
            description: 'List clients',
            notes: 'A tenant client sees the clients of its tenant; a tenant:manage client the tenant-less ones, or those of ?tenantId.',
            auth: { access: { scope: READ } },
            validate: { query: tenantQuery.keys(pageQuery) },
            response: { status: { 200: pageOf(clientView, 'ClientPage') } }
        },
        handler: async (request) => {
            const query = request.query as unknown as Page & { tenantId?: string };
            const ctx = targetContext(callerContext(request), query.tenantId);
            const all = await request.server.registry.list(ctx, clientKind);
            return paginate(all.map((c) => view(c.spec, ctx.tenantId, c)), query);
        }
    },
    {
        method: 'POST',
        path: '/api/clients',
        options: {
            tags: ['api', 'clients'],
            description: 'Create a client; the answer shows its secret once',
            auth: { access: { scope: MANAGE } },
            validate: { payload: createBody },
            response: { status: { 201: createdClient } }
        },
        handler: async (request, h) => {
            const { tenantId, ...spec } = request.payload as Client & { tenantId?: string | null };
            const caller = callerContext(request);
            checkGrant(caller, spec.roles);
            const ctx = targetContext(caller, tenantId);
            if (!ctx.tenantId && !spec.roles.includes('tenant:manage')) {
                throw new ValidationError('tenantId is required for a client without tenant:manage', [{ path: 'tenantId', message: 'is required' }]);
            }
            if (ctx.tenantId && !(await request.server.registry.get({ ...ctx, tenantId: undefined }, tenantKind, ctx.tenantId))) {
                throw new NotFoundError(`Tenant ${ctx.tenantId} not found`);
            }
            const result = await request.server.registry.write(ctx, clientKind, { ...spec, secret: GENERATE }, { mode: 'create' });
            return h.response({ ...view(result.spec, ctx.tenantId, result.resource), clientSecret: result.generated!.secret }).code(201);
        }
    },
    {
        method: 'GET',
        path: '/api/clients/{clientId}',
        options: {
            tags: ['api', 'clients'],
            description: 'Get a client',
            auth: { access: { scope: READ } },
            validate: { params: Joi.object({ clientId: clientIdSchema.required() }), query: byIdQuery },
            response: { status: { 200: clientView } }
        },
        handler: async (request) => {
            const ctx = await clientContext(request);
            const found = await request.server.registry.get(ctx, clientKind, request.params.clientId as string);
            if (!found) {
                throw new NotFoundError('Client not found');
            }
            return view(found.spec, ctx.tenantId, found);
        }
    },
    {
        method: 'PATCH',
        path: '/api/clients/{clientId}',
        options: {
            tags: ['api', 'clients'],
            description: 'Update a client (roles, description, allowed configurations)',
            auth: { access: { scope: MANAGE } },
            validate: { params: Joi.object({ clientId: clientIdSchema.required() }), query: byIdQuery, payload: patchBody },
            response: { status: { 200: clientView } }
        },
        handler: async (request) => {
            const caller = callerContext(request);
            const ctx = await clientContext(request);
            const { registry } = request.server;
            const found = await registry.get(ctx, clientKind, request.params.clientId as string);
            if (!found) {
                throw new NotFoundError('Client not found');
            }
            const patch = request.payload as Partial<Client>;
            if (patch.roles) {
                checkGrant(caller, patch.roles);
            }
            const result = await registry.write(ctx, clientKind, { ...found.spec, ...patch }, { mode: 'update' });
            return view(result.spec, ctx.tenantId, result.resource);
        }
    },
    {
        method: 'DELETE',
        path: '/api/clients/{clientId}',
        options: {
            tags: ['api', 'clients'],
            description: 'Delete a client',
            auth: { access: { scope: MANAGE } },
            validate: { params: Joi.object({ clientId: clientIdSchema.required() }), query: byIdQuery }
        },
        handler: async (request, h) => {
            const ctx = await clientContext(request);
            await request.server.registry.remove(ctx, clientKind, request.params.clientId as string);
            return h.response().code(204);
        }
    },
    {
        method: 'POST',
        path: '/api/clients/{clientId}/rotate-secret',
        options: {
            tags: ['api', 'clients'],
            description: 'Replace a client\'s secret; the answer shows the new secret once',
            auth: { access: { scope: MANAGE } },
            validate: { params: Joi.object({ clientId: clientIdSchema.required() }), query: byIdQuery },
            response: { status: { 200: Joi.object({ clientSecret: Joi.string().required() }).label('RotatedSecret') } }
        },
        handler: async (request) => {
            const ctx = await clientContext(request);
            const { registry } = request.server;
            const found = await registry.get(ctx, clientKind, request.params.clientId as string);
            if (!found) {
                throw new NotFoundError('Client not found');
            }
            const clientSecret = generateClientSecret();
            await registry.write(ctx, clientKind, { ...found.spec, secret: clientSecret }, { mode: 'update' });
            return { clientSecret };
        }
    }
];
