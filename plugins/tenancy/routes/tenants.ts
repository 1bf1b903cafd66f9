import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { callerContext } from '../../../lib/auth/context';
import { NotFoundError } from '../../../lib/errors';
import { pageOf, pageQuery, paginate, type Page } from '../../../lib/http/pagination';
import type { StoredResource } from '../../../lib/registry/kind';
import { tenantKind, tenantIdSchema, tenantSchema, type Tenant } from '../../../resources/tenant';

const MANAGE = ['tenant:manage'];

const tenantView = (tenantSchema as Joi.ObjectSchema).keys({
    createdAt: Joi.string().isoDate(),
    updatedAt: Joi.string().isoDate()
}).label('TenantView');

const patchBody = (tenantSchema as Joi.ObjectSchema).fork(['id', 'name'], (s) => s.optional())
    .keys({ id: Joi.forbidden() }).min(1).label('TenantPatch');

const params = Joi.object({ id: tenantIdSchema.required() });

const view = (t: StoredResource<Tenant>) => ({ ...t.spec, createdAt: t.createdAt, updatedAt: t.updatedAt });

export const tenantRoutes: ServerRoute[] = [
    {
        method: 'GET',
        path: '/api/tenants',
        options: {
            tags: ['api', 'tenants'],
            description: 'List tenants',
            auth: { access: { scope: MANAGE } },
            validate: { query: Joi.object(pageQuery) },
            response: { status: { 200: pageOf(tenantView, 'TenantPage') } }
        },
        handler: async (request) => {
            const all = await request.server.registry.list(callerContext(request), tenantKind);
            return paginate(all.map(view), request.query as unknown as Page);
        }
    },
    {
        method: 'POST',
        path: '/api/tenants',
        options: {
            tags: ['api', 'tenants'],
            description: 'Create a tenant',
            auth: { access: { scope: MANAGE } },
            validate: { payload: tenantSchema },
            response: { status: { 201: tenantView } }
        },
        handler: async (request, h) => {
            const result = await request.server.registry.write(callerContext(request), tenantKind, request.payload, { mode: 'create' });
            return h.response(view(result.resource)).code(201);
        }
    },
    {
        method: 'GET',
        path: '/api/tenants/{id}',
        options: {
            tags: ['api', 'tenants'],
            description: 'Get a tenant',
            auth: { access: { scope: MANAGE } },
            validate: { params },
            response: { status: { 200: tenantView } }
        },
        handler: async (request) => {
            const found = await request.server.registry.get(callerContext(request), tenantKind, request.params.id as string);
            if (!found) {
                throw new NotFoundError('Tenant not found');
            }
            return view(found);
        }
    },
    {
        method: 'PATCH',
        path: '/api/tenants/{id}',
        options: {
            tags: ['api', 'tenants'],
            description: 'Update a tenant',
            auth: { access: { scope: MANAGE } },
            validate: { params, payload: patchBody },
            response: { status: { 200: tenantView } }
        },
        handler: async (request) => {
            const { registry } = request.server;
            const ctx = callerContext(request);
            const found = await registry.get(ctx, tenantKind, request.params.id as string);
            if (!found) {
                throw new NotFoundError('Tenant not found');
            }
            const result = await registry.write(ctx, tenantKind, { ...found.spec, ...(request.payload as Partial<Tenant>) }, { mode: 'update' });
            return view(result.resource);
        }
    },
    {
        method: 'DELETE',
        path: '/api/tenants/{id}',
        options: {
            tags: ['api', 'tenants'],
            description: 'Delete a tenant and everything it owns',
            auth: { access: { scope: MANAGE } },
            validate: { params }
        },
        handler: async (request, h) => {
            await request.server.registry.remove(callerContext(request), tenantKind, request.params.id as string);
            return h.response().code(204);
        }
    }
];
