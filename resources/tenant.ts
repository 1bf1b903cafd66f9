import Joi from 'joi';
import { TenantModel } from '../lib/db/models/tenant';
import type { ResourceKind, ResourceStore, StoredResource } from '../lib/registry/kind';

export const TENANT_ID_PATTERN = /^[a-z0-9][a-z0-9_-]{1,62}$/;

export interface SessionConfig {
    ttlSeconds: number;
    cleanupMode: 'full' | 'anonymize';
}

export interface StatusListDefaults {
    bits: 1 | 2 | 4 | 8;
    capacity: number;
    ttlSeconds: number;
    immediateUpdate: boolean;
}

export interface Tenant {
    id: string;
    name: string;
    description?: string | null;
    sessionConfig?: SessionConfig | null;
    statusListConfig?: StatusListDefaults | null;
}

export const tenantIdSchema = Joi.string().pattern(TENANT_ID_PATTERN, 'tenant id').description('Tenant id: lowercase letters, digits, _ and -, 2 to 63 characters');

export const sessionConfigSchema = Joi.object<SessionConfig, true>({
    ttlSeconds: Joi.number().integer().min(60).required().description('Session retention in seconds, at least 60'),
    cleanupMode: Joi.string().valid('full', 'anonymize').required()
}).label('SessionConfig');

export const statusListDefaultsSchema = Joi.object<StatusListDefaults, true>({
    bits: Joi.number().valid(1, 2, 4, 8).required(),
    capacity: Joi.number().integer().min(16).max(10_000_000).required(),
    // The token's exp is iat + 2 ttl: a year keeps every date it derives far inside what dates can hold.
    ttlSeconds: Joi.number().integer().min(1).max(31_536_000).required(),
    immediateUpdate: Joi.boolean().required()
}).label('StatusListDefaults');

export const tenantSchema = Joi.object<Tenant, true>({
    id: tenantIdSchema.required(),
    name: Joi.string().min(1).max(255).required(),
    description: Joi.string().max(2000).allow(null),
    sessionConfig: sessionConfigSchema.allow(null),
    statusListConfig: statusListDefaultsSchema.allow(null)
}).label('Tenant');

const toStored = (row: TenantModel): StoredResource<Tenant> => ({
    spec: {
        id: row.id,
        name: row.name,
        ...(row.description !== null ? { description: row.description } : {}),
        ...(row.sessionConfig ? { sessionConfig: row.sessionConfig } : {}),
        ...(row.statusListConfig ? { statusListConfig: row.statusListConfig } : {})
    },
    version: 1,
    generation: row.generation,
    ownership: row.ownership,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt
});

/** Tenants have a table of their own: every tenant-owned row references it and goes with it on delete. */
const tenantStore: ResourceStore<Tenant> = {
    async get(scope, id) {
        const row = await scope.db.model(TenantModel).query(scope.trx).findById(id);
        return row ? toStored(row) : undefined;
    },
    async list(scope) {
        const rows = await scope.db.model(TenantModel).query(scope.trx).orderBy('id');
        return rows.map(toStored);
    },
    async put(scope, id, resource, existing) {
        const now = new Date().toISOString();
        const row = {
            name: resource.spec.name,
            description: resource.spec.description ?? null,
            sessionConfig: resource.spec.sessionConfig ?? null,
            statusListConfig: resource.spec.statusListConfig ?? null,
            generation: resource.generation,
            ownership: resource.ownership,
            updatedAt: now
        };
        const Tenants = scope.db.model(TenantModel);
        if (existing) {
            await Tenants.query(scope.trx).findById(id).patch(row);
        }
        else {
            await Tenants.query(scope.trx).insert({ id, ...row, createdAt: now });
        }
    },
    async delete(scope, id) {
        await scope.db.model(TenantModel).query(scope.trx).deleteById(id);
    }
};

export const tenantKind: ResourceKind<Tenant> = {
    kind: 'Tenant',
    file: 'TenantConfigFile',
    version: 1,
    schema: tenantSchema,
    singleton: false,
    isTenant: true,
    id: (spec) => spec.id,
    location: { file: 'info.json' },
    fromFolder: (spec, tenantId) => ({ ...spec, id: tenantId }),
    store: tenantStore
};
