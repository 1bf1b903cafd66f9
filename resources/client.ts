import Joi from 'joi';
import { roleSchema } from '../lib/auth/roles';
import { generateClientSecret } from '../lib/crypto/secret-hash';
import { ClientModel } from '../plugins/oauth2/models/client';
import { ConflictError, ValidationError } from '../lib/errors';
import type { Database } from '../lib/db/database';
import { GENERATE, type ResourceKind, type ResourceStore, type StoreScope, type StoredResource } from '../lib/registry/kind';

export interface Client {
    clientId: string;
    description?: string | null;
    roles: string[];
    allowedPresentationConfigs?: string[] | null;
    allowedIssuanceConfigs?: string[] | null;
    /** Write-only: a value, a placeholder resolved before import, or `!generate`. Stored as a keyed hash. */
    secret?: string;
}

export const clientIdSchema = Joi.string().pattern(/^[A-Za-z0-9][A-Za-z0-9._:@-]{0,254}$/, 'client id')
    .description('Letters, digits and . _ : @ -, up to 255 characters');

export const clientSchema = Joi.object<Client, true>({
    clientId: clientIdSchema.required(),
    description: Joi.string().max(2000).allow(null),
    roles: Joi.array().items(roleSchema).min(1).unique().required(),
    allowedPresentationConfigs: Joi.array().items(Joi.string().max(255)).unique().allow(null)
        .description('When non-empty, only these presentation configurations may be used'),
    allowedIssuanceConfigs: Joi.array().items(Joi.string().max(255)).unique().allow(null)
        .description('When non-empty, only these credential configurations may be offered'),
    secret: Joi.string().min(16).max(512).allow(GENERATE)
        .description('Write-only. At least 16 characters, or !generate: a new client gets a generated secret, shown once; an existing one keeps its secret')
}).label('Client');

const toStored = (row: ClientModel): StoredResource<Client> => ({
    spec: {
        clientId: row.clientId,
        ...(row.description !== null ? { description: row.description } : {}),
        roles: row.roles,
        ...(row.allowedPresentationConfigs?.length ? { allowedPresentationConfigs: row.allowedPresentationConfigs } : {}),
        ...(row.allowedIssuanceConfigs?.length ? { allowedIssuanceConfigs: row.allowedIssuanceConfigs } : {})
    },
    version: 1,
    generation: row.generation,
    ownership: row.ownership,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt
});

const inScope = (scope: StoreScope, id: string) => {
    const query = scope.db.model(ClientModel).query(scope.trx).findById(id);
    return scope.tenantId ? query.where('tenantId', scope.tenantId) : query.whereNull('tenantId');
};

const checkRolesFitScope = (scope: StoreScope, spec: Client) => {
    if (scope.tenantId && spec.roles.includes('tenant:manage')) {
        throw new ValidationError('A client of a tenant cannot hold tenant:manage', [{ path: 'roles', message: 'tenant:manage is only for clients without a tenant' }]);
    }
    if (!scope.tenantId && !spec.roles.includes('tenant:manage')) {
        throw new ValidationError('A client without a tenant must hold tenant:manage', [{ path: 'tenantId', message: 'is required for clients without tenant:manage' }]);
    }
};

/** Clients have their own table: the token endpoint finds them by id alone, and their secret is only a hash. */
const clientStore: ResourceStore<Client> = {
    async get(scope, id) {
        const row = await inScope(scope, id);
        return row ? toStored(row) : undefined;
    },
    async list(scope) {
        const query = scope.db.model(ClientModel).query(scope.trx).orderBy('clientId');
        const rows = await (scope.tenantId ? query.where('tenantId', scope.tenantId) : query.whereNull('tenantId'));
        return rows.map(toStored);
    },
    async put(scope, id, resource, existing) {
        const spec = resource.spec;
        checkRolesFitScope(scope, spec);
        const now = new Date().toISOString();
        const Clients = scope.db.model(ClientModel);
        const row = {
            description: spec.description ?? null,
            roles: spec.roles,
            allowedPresentationConfigs: spec.allowedPresentationConfigs ?? null,
            allowedIssuanceConfigs: spec.allowedIssuanceConfigs ?? null,
            generation: resource.generation,
            ownership: resource.ownership,
            updatedAt: now
        };
        // The registry replaced !generate with a new secret on create; on an existing client it means "keep it".
        const secretHash = spec.secret && spec.secret !== GENERATE ? scope.db.secretHasher.hash(spec.secret) : undefined;
        if (existing) {
            await Clients.query(scope.trx).findById(id).patch({ ...row, ...(secretHash ? { secretHash } : {}) });
            return;
        }
        if (await Clients.query(scope.trx).findById(id)) {
            // Client ids are global (the token request names no tenant); say no more than that the id is taken.
            throw new ConflictError(`Client id ${id} is not available`);
        }
        await Clients.query(scope.trx).insert({
            clientId: id,
            tenantId: scope.tenantId,
            ...row,
            secretHash: secretHash ?? scope.db.secretHasher.hash(generateClientSecret()),
            createdAt: now
        });
    },
    async delete(scope, id) {
        await inScope(scope, id).delete();
    },
    async writeOnlyUnchanged(scope, id, spec) {
        if (spec.secret === GENERATE) {
            return true;
        }
        const row = await inScope(scope, id);
        return !!row && !!spec.secret && scope.db.secretHasher.verify(spec.secret, row.secretHash);
    }
};

/**
 * The tenant a client belongs to (null: tenant-less), or undefined when no client has this id. Client ids are global,
 * so a tenant:manage caller reaches any client through its id alone.
 */
export const tenantOfClient = async (db: Database, clientId: string): Promise<string | null | undefined> =>
    (await db.model(ClientModel).query().findById(clientId).select('tenantId'))?.tenantId;

export const clientKind: ResourceKind<Client> = {
    kind: 'Client',
    file: 'ClientConfigFile',
    version: 1,
    schema: clientSchema,
    dependsOn: ['Tenant'],
    writeOnly: ['secret'],
    secrets: ['secret'],
    generated: { secret: generateClientSecret },
    // The secret is stored as a hash: an export asks for one (spec 2.9).
    exportFields: async (_scope, _id, _spec, placeholder) => ({
        fields: { secret: placeholder('secret') },
        requirements: [{ code: 'CLIENT_SECRET_REQUIRED', path: 'secret', message: 'Supply the client\'s secret, or !generate for a new one (shown once)', placeholder: placeholder('secret') }]
    }),
    allowsTenantless: true,
    id: (spec) => spec.clientId,
    location: { dir: 'clients' },
    store: clientStore
};
