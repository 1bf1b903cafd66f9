import type { Request, RouteOptionsResponseSchema, ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { tenantContext } from '../auth/context';
import { NotFoundError } from '../errors';
import type { KindRef, ResourceKind, StoredResource } from '../registry/kind';
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

/** A route's OpenAPI text. */
export interface RouteText {
    description: string;
    notes?: string;
}

export interface SingletonRoutesOptions<T> {
    /**
     * The kind, or the ref of a kind its plugin defines at registration: that schema is built after the routes, so
     * its routes take `validatePayload` and document no answer.
     */
    kind: ResourceKind<T> | KindRef<T>;
    /** e.g. /api/issuer/config */
    path: string;
    tag: string;
    /** Roles that may write; reads also allow `readRoles` and tenant:read. */
    roles: string[];
    readRoles?: string[];
    /** What the resource is (`the tenant's issuance settings`), which each route's text names; or each route's text. */
    description: string | { get: RouteText; put: RouteText };
    /** GET of a tenant that never set the resource: 404 with this message; without it, the schema's defaults. */
    notFound?: string;
    /** Validates a PUT body in place of the kind's schema. */
    validatePayload?: RouteOptionsResponseSchema;
    /** Refuses a PUT before it is written: sees the body with the stored secrets restored. */
    beforeWrite?: (spec: T, request: Request) => Promise<void>;
    /** Adds DELETE, which removes the tenant's resource (204). */
    delete?: RouteText;
}

const isResourceKind = <T>(kind: ResourceKind<T> | KindRef<T>): kind is ResourceKind<T> => 'schema' in kind;

/**
 * GET and PUT (and DELETE when asked) of a tenant's singleton kind (e.g. /api/issuer/config): writes go through the
 * registry's write path, secrets are redacted in answers and kept when sent back redacted.
 */
export const singletonRoutes = <T>(options: SingletonRoutesOptions<T>): ServerRoute[] => {
    const { kind, path, roles } = options;
    const tags = ['api', options.tag];
    const schema = isResourceKind(kind) ? (kind.schema as Joi.ObjectSchema).label(kind.kind) : undefined;
    const response = schema && { status: { 200: schema } };
    const text = typeof options.description === 'string'
        ? {
            get: { description: `Get ${options.description}${options.notFound ? '' : ' (defaults when never set)'}` },
            put: { description: `Set ${options.description}` }
        }
        : options.description;
    const routes: ServerRoute[] = [
        {
            method: 'GET',
            path,
            options: {
                tags,
                ...text.get,
                auth: { access: { scope: [...roles, ...options.readRoles ?? [], 'tenant:read'] } },
                response
            },
            handler: async (request) => {
                const { registry } = request.server;
                const { secrets, schema: current } = registry.kind(kind);
                const found = await registry.get(tenantContext(request), kind);
                if (found) {
                    return redactSecrets(found.spec, secrets);
                }
                if (options.notFound) {
                    throw new NotFoundError(options.notFound);
                }
                return current.validate({}).value;
            }
        },
        {
            method: 'PUT',
            path,
            options: {
                tags,
                ...text.put,
                auth: { access: { scope: roles } },
                validate: { payload: options.validatePayload ?? schema },
                response
            },
            handler: async (request) => {
                const { registry } = request.server;
                const ctx = tenantContext(request);
                const resolved = registry.kind(kind);
                const stored = await registry.get(ctx, kind);
                const spec = restoreRedacted(request.payload as T, stored?.spec, resolved);
                await options.beforeWrite?.(spec, request);
                const result = await registry.write(ctx, kind, spec);
                return redactSecrets(result.spec, resolved.secrets);
            }
        }
    ];
    if (options.delete) {
        routes.push({
            method: 'DELETE',
            path,
            options: { tags, ...options.delete, auth: { access: { scope: roles } } },
            handler: async (request, h) => {
                await request.server.registry.remove(tenantContext(request), kind);
                return h.response().code(204);
            }
        });
    }
    return routes;
};
