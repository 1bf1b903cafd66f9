import Crypto from 'node:crypto';
import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { tenantContext } from '../../../lib/auth/context';
import { NotFoundError } from '../../../lib/errors';
import { pageOf, pageQuery, paginate, type Page } from '../../../lib/http/pagination';
import { statusListIdSchema, statusListKind, statusListSchema, type StatusList } from '../../../resources/status-list';
import { tenantIdSchema } from '../../../resources/tenant';
import type { StatusListService } from '../services/status-lists';
import { CWT_MEDIA_TYPE, JWT_MEDIA_TYPE, preferredForm } from '../services/token-forms';

const CONFIG = ['issuance:config'];
const READ = [...CONFIG, 'tenant:read'];
const tags = ['api', 'issuance'];

const view = Joi.object({
    id: Joi.string().required(),
    uri: Joi.string().uri().required(),
    bits: Joi.number().required(),
    capacity: Joi.number().required(),
    used: Joi.number().integer().required(),
    credentialConfigurationId: Joi.string(),
    keyChainId: Joi.string(),
    createdAt: Joi.string().isoDate().required()
}).label('StatusListView');

const idParams = Joi.object({ id: statusListIdSchema.required() });

/** /api/status-lists (contract "Token status lists") and the public token. */
export const statusListRoutes = (lists: StatusListService): ServerRoute[] => [
    {
        method: 'GET',
        path: '/api/status-lists',
        options: { tags, description: 'List status lists', auth: { access: { scope: READ } }, validate: { query: Joi.object(pageQuery) }, response: { status: { 200: pageOf(view, 'StatusListPage') } } },
        handler: async (request) => {
            const ctx = tenantContext(request);
            const page = paginate(await request.server.registry.list(ctx, statusListKind), request.query as unknown as Page);
            return { ...page, items: await Promise.all(page.items.map((stored) => lists.view(ctx.tenantId, stored))) };
        }
    },
    {
        method: 'POST',
        path: '/api/status-lists',
        options: {
            tags,
            description: 'Create a status list (bits and capacity default to the tenant\'s statusListConfig)',
            auth: { access: { scope: CONFIG } },
            validate: { payload: statusListSchema.fork(['id', 'bits', 'capacity'], (field) => field.optional()) },
            response: { status: { 201: view } }
        },
        handler: async (request, h) => {
            const ctx = tenantContext(request);
            const body = request.payload as Partial<StatusList>;
            const defaults = await lists.tenantDefaults(ctx.tenantId);
            const keyChainId = body.keyChainId ?? await lists.defaultKeyChain(ctx.tenantId);
            const spec: StatusList = {
                ...body,
                id: body.id ?? Crypto.randomUUID(),
                bits: body.bits ?? defaults.bits,
                capacity: body.capacity ?? defaults.capacity,
                ...(keyChainId ? { keyChainId } : {})
            };
            const result = await request.server.registry.write(ctx, statusListKind, spec, { mode: 'create' });
            return h.response(await lists.view(ctx.tenantId, result.resource)).code(201);
        }
    },
    {
        method: 'GET',
        path: '/api/status-lists/{id}',
        options: { tags, description: 'Get a status list', auth: { access: { scope: READ } }, validate: { params: idParams }, response: { status: { 200: view } } },
        handler: async (request) => {
            const ctx = tenantContext(request);
            const found = await request.server.registry.get(ctx, statusListKind, request.params.id as string);
            if (!found) {
                throw new NotFoundError('StatusList not found');
            }
            return lists.view(ctx.tenantId, found);
        }
    },
    {
        method: 'DELETE',
        path: '/api/status-lists/{id}',
        options: { tags, description: 'Delete a status list (409 while any entry is allocated)', auth: { access: { scope: CONFIG } }, validate: { params: idParams } },
        handler: async (request, h) => {
            await request.server.registry.remove(tenantContext(request), statusListKind, request.params.id as string);
            return h.response().code(204);
        }
    },
    {
        method: 'GET',
        path: '/issuers/{tenant}/status-management/status-list/{listId}',
        options: {
            auth: false,
            app: { protocol: true },
            tags,
            description: 'The status list token: statuslist+jwt, or statuslist+cwt (COSE_Sign1) when Accept ranks it first',
            validate: { params: Joi.object({ tenant: tenantIdSchema.required(), listId: statusListIdSchema.required() }) }
        },
        handler: async (request, h) => {
            const token = await lists.token(request.params.tenant as string, request.params.listId as string);
            if (!token) {
                throw new NotFoundError('Unknown status list');
            }
            const form = preferredForm(request.headers.accept as string | undefined);
            const { body, etag } = token[form];
            // A relying party's copy never outlives the token: max-age is the ttl, or less when it expires sooner.
            const maxAge = Math.max(0, Math.min(token.ttl, Math.floor((token.expiresAt - Date.now()) / 1000)));
            return h.response(body)
                .type(form === 'cwt' ? CWT_MEDIA_TYPE : JWT_MEDIA_TYPE)
                .etag(etag)
                .vary('accept')
                .header('Cache-Control', `max-age=${maxAge}`);
        }
    }
];
