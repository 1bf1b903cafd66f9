import { ResourceModel, SealedResourceModel } from '../db/models/resource';
import { tenantOf, type ResourceStore, type StoreScope, type StoredResource } from './kind';

/**
 * The default store: the shared `resources` table, keyed by (tenant, kind, id). A kind that declares secrets is
 * stored through the sealed model, which encrypts the whole spec column.
 */
const modelFor = (scope: StoreScope) =>
    scope.db.model(scope.kind.secrets?.length ? SealedResourceModel : ResourceModel);

// Reads always go through the sealed model, which leaves plaintext specs as they are, so a reader need not know
// whether the kind has secrets.
const reader = (scope: StoreScope) => scope.db.model(SealedResourceModel);

const toStored = (row: ResourceModel): StoredResource<any> => ({
    spec: row.spec,
    version: row.version,
    generation: row.generation,
    ownership: row.ownership,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt
});

export const tableResourceStore: ResourceStore<any> = {
    async get(scope, id) {
        const row = await reader(scope).query(scope.trx).findById([tenantOf(scope), scope.kind.kind, id]);
        return row ? toStored(row) : undefined;
    },

    async list(scope) {
        const rows = await reader(scope).query(scope.trx)
            .where({ tenantId: tenantOf(scope), kind: scope.kind.kind })
            .orderBy('id');
        return rows.map(toStored);
    },

    async put(scope, id, resource, existing) {
        const now = new Date().toISOString();
        const Model = modelFor(scope);
        if (existing) {
            await Model.query(scope.trx).findById([tenantOf(scope), scope.kind.kind, id])
                .patch({ ...resource, updatedAt: now });
            return;
        }
        await Model.query(scope.trx).insert({ tenantId: tenantOf(scope), kind: scope.kind.kind, id, ...resource, createdAt: now, updatedAt: now });
    },

    async delete(scope, id) {
        await modelFor(scope).query(scope.trx).deleteById([tenantOf(scope), scope.kind.kind, id]);
    }
};
