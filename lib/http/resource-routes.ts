import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { tenantContext } from '../auth/context';
import { NotFoundError } from '../errors';
import type { ResourceKind, StoredResource } from '../registry/kind';
import { redactSecrets, restoreRedacted } from '../registry/secrets';
import { pageOf, pageQuery, paginate, type Page } from './pagination';

export interface ResourceRoutesOptions {
    kind: ResourceKind;
    /** e.g. /api/issuer/credentials */
    path: string;
    tag: string;
    /** Roles that may write; reads also allow tenant:read. */
    roles: string[];
    /** The id field's name in the spec and path, default `id`. */
    idField?: string;
    description: { one: string; many: string };
}

const timestamps = { createdAt: Joi.string().isoDate(), updatedAt: Joi.string().isoDate() };

/**
 * CRUD routes of a tenant-scoped resource kind, driven by its registry entry: the kind's joi schema validates the
 * body and documents the answer; every write goes through the registry's write path (audit included); secrets are
 * redacted in answers.
 */
export const resourceRoutes = (options: ResourceRoutesOptions): ServerRoute[] => {
    const { kind, path, tag, roles, description } = options;
    const idField = options.idField ?? 'id';
    const read = [...roles, 'tenant:read'];
    const schema = kind.schema as Joi.ObjectSchema;
    const view = (schema.keys(timestamps) as Joi.ObjectSchema).label(`${kind.kind}View`);
    const answer = (stored: StoredResource<unknown>) => ({ ...redactSecrets(stored.spec as object, kind.secrets), createdAt: stored.createdAt, updatedAt: stored.updatedAt });
    const params = Joi.object({ [idField]: schema.extract(idField).required() });
    const tags = ['api', tag];
    const id = (p: Record<string, unknown>) => p[idField] as string;
    const fields = Object.keys(schema.describe().keys ?? {}).filter((k) => k !== idField);
    const patchSchema = Joi.object(Object.fromEntries(fields.map((k) => [k, schema.extract(k).optional()])))
        .keys({ [idField]: Joi.forbidden() }).min(1).label(`${kind.kind}Patch`);

    return [
        {
            method: 'GET',
            path,
            options: {
                tags,
                description: `List ${description.many}`,
                auth: { access: { scope: read } },
                validate: { query: Joi.object(pageQuery) },
                response: { status: { 200: pageOf(view, `${kind.kind}Page`) } }
            },
            handler: async (request) => {
                const all = await request.server.registry.list(tenantContext(request), kind);
                const page = paginate(all, request.query as unknown as Page);
                return { ...page, items: page.items.map(answer) };
            }
        },
        {
            method: 'POST',
            path,
            options: {
                tags,
                description: `Create ${description.one}`,
                auth: { access: { scope: roles } },
                validate: { payload: schema },
                response: { status: { 201: view } }
            },
            handler: async (request, h) => {
                const result = await request.server.registry.write(tenantContext(request), kind, request.payload, { mode: 'create' });
                return h.response(answer(result.resource)).code(201);
            }
        },
        {
            method: 'GET',
            path: `${path}/{${idField}}`,
            options: {
                tags,
                description: `Get ${description.one}`,
                auth: { access: { scope: read } },
                validate: { params },
                response: { status: { 200: view } }
            },
            handler: async (request) => {
                const found = await request.server.registry.get(tenantContext(request), kind, id(request.params));
                if (!found) {
                    throw new NotFoundError(`${kind.kind} not found`);
                }
                return answer(found);
            }
        },
        {
            method: 'PATCH',
            path: `${path}/{${idField}}`,
            options: {
                tags,
                description: `Update ${description.one}: the fields given replace the stored ones`,
                auth: { access: { scope: roles } },
                // Every field optional and no whole-object rules: the merged document is validated whole by the write path.
                validate: { params, payload: patchSchema },
                response: { status: { 200: view } }
            },
            handler: async (request) => {
                const { registry } = request.server;
                const ctx = tenantContext(request);
                const found = await registry.get(ctx, kind, id(request.params));
                if (!found) {
                    throw new NotFoundError(`${kind.kind} not found`);
                }
                // Merge the raw body: defaults of the partial schema must not overwrite stored values. Stored secrets go
                // through restoreRedacted like sent-back ones, so a PATCH of a URL alone does not carry them along.
                const raw = request.orig.payload as Record<string, unknown>;
                const merged = restoreRedacted({ ...redactSecrets(found.spec as object, kind.secrets), ...raw }, found.spec, kind);
                const result = await registry.write(ctx, kind, merged, { mode: 'update' });
                return answer(result.resource);
            }
        },
        {
            method: 'DELETE',
            path: `${path}/{${idField}}`,
            options: {
                tags,
                description: `Delete ${description.one} (409 while another configuration references it)`,
                auth: { access: { scope: roles } },
                validate: { params }
            },
            handler: async (request, h) => {
                await request.server.registry.remove(tenantContext(request), kind, id(request.params));
                return h.response().code(204);
            }
        }
    ];
};

/** GET and PUT of a tenant's singleton kind (e.g. /api/issuer/config). */
export const singletonRoutes = (options: { kind: ResourceKind; path: string; tag: string; roles: string[]; description: string; defaults?: () => object }): ServerRoute[] => {
    const { kind, path, tag, roles } = options;
    const schema = (kind.schema as Joi.ObjectSchema).label(kind.kind);
    return [
        {
            method: 'GET',
            path,
            options: {
                tags: ['api', tag],
                description: `Get ${options.description} (defaults when never set)`,
                auth: { access: { scope: [...roles, 'tenant:read'] } },
                response: { status: { 200: schema } }
            },
            handler: async (request) => {
                const found = await request.server.registry.get(tenantContext(request), kind);
                if (found) {
                    return redactSecrets(found.spec as object, kind.secrets);
                }
                return schema.validate({}).value;
            }
        },
        {
            method: 'PUT',
            path,
            options: {
                tags: ['api', tag],
                description: `Set ${options.description}`,
                auth: { access: { scope: roles } },
                validate: { payload: schema },
                response: { status: { 200: schema } }
            },
            handler: async (request) => {
                const { registry } = request.server;
                const ctx = tenantContext(request);
                const stored = await registry.get(ctx, kind);
                const result = await registry.write(ctx, kind, restoreRedacted(request.payload, stored?.spec, kind));
                return redactSecrets(result.spec as object, kind.secrets);
            }
        }
    ];
};
