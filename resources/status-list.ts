import Joi from 'joi';
import { ValidationError } from '../lib/errors';
import { kindRef, type ResourceKind, type ResourceStore } from '../lib/registry/kind';

/** Bits per entry (IETF Token Status List): entry values 0 … 2^bits - 1. */
export const STATUS_LIST_BITS = [1, 2, 4, 8] as const;
export type StatusListBits = (typeof STATUS_LIST_BITS)[number];

/** Most entries one list holds, as the tenant's statusListConfig allows. */
export const STATUS_LIST_MAX_CAPACITY = 10_000_000;

export interface StatusList {
    id: string;
    bits: StatusListBits;
    capacity: number;
    /** Bound lists hold only credentials of this configuration; absent: shared in the tenant. */
    credentialConfigurationId?: string;
    /** Signs the token; absent: the tenant's statusList key chain, else its attestation chain. */
    keyChainId?: string;
}

export const statusListIdSchema = Joi.string().pattern(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, 'status list id');

export const statusListSchema = Joi.object<StatusList, true>({
    id: statusListIdSchema.required().description('Identifier within the tenant; part of the list URI'),
    bits: Joi.number().valid(...STATUS_LIST_BITS).required().description('Bits per entry; fixed once the list exists'),
    capacity: Joi.number().integer().min(1).max(STATUS_LIST_MAX_CAPACITY).required().description('Number of entries; fixed once the list exists'),
    credentialConfigurationId: Joi.string().max(255).description('Bound lists hold only credentials of this configuration'),
    keyChainId: Joi.string().max(255).description('Key chain that signs the token; default: the tenant\'s statusList chain, else its attestation chain')
}).label('StatusList');

/** Names the StatusList kind; its definition is made by the status plugin (its store keeps the entries). */
export const statusListKind = kindRef<StatusList>('StatusList');

export const defineStatusListKind = (store: ResourceStore<StatusList>): ResourceKind<StatusList> => ({
    kind: statusListKind.kind,
    file: 'StatusListConfigFile',
    version: 1,
    schema: statusListSchema,
    dependsOn: ['Tenant', 'KeyChain', 'CredentialConfig'],
    references: { keyChainId: 'KeyChain', credentialConfigurationId: 'CredentialConfig' },
    id: (spec) => spec.id,
    location: { dir: 'issuance/status-lists' },
    store,
    async check(scope, spec) {
        const existing = await scope.get(statusListKind, spec.id);
        // Issued credentials point at indexes of this layout: a different one needs a new list id.
        const changed = existing && (['bits', 'capacity'] as const).filter((field) => existing.spec[field] !== spec[field]);
        if (changed && changed.length) {
            throw new ValidationError(`Status list ${spec.id}: bits and capacity cannot change; a different layout needs a new list id`,
                changed.map((path) => ({ path, message: `STATUS_LIST_LAYOUT_IMMUTABLE: ${path} stays ${existing.spec[path]}` })));
        }
    }
});
