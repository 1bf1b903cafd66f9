import type Joi from 'joi';
import type { Knex } from 'knex';
import type { Database } from '../db/database';

/**
 * Names a resource kind and the type of its spec: what registry calls take (`registry.get(ctx, keyChainKind, id)`),
 * so a wrong kind does not compile and results come typed. Every ResourceKind is one; a kind whose definition is
 * made at registration (it needs the plugin's services) exports a `kindRef` under the same name instead.
 */
export interface KindRef<T> {
    readonly kind: string;
    /** Type only, never set: ties the spec type to the name. */
    readonly specType?: T;
}

export const kindRef = <T>(kind: string): KindRef<T> => ({ kind });

export type Ownership = 'unmanaged' | 'file-managed';

/** The value of a `generated` field that asks the service to make one (spec 2.3, 2.9: a client secret of `!generate`). */
export const GENERATE = '!generate';

export interface StoredResource<T> {
    spec: T;
    version: number;
    generation: number;
    ownership: Ownership;
    createdAt: string;
    updatedAt: string;
}

export interface StoreScope {
    db: Database;
    /** The write's transaction, or for reads outside one the plain connection pool. */
    trx: Knex;
    /** null only for kinds that allow tenant-less resources (clients holding tenant:manage). */
    tenantId: string | null;
    kind: ResourceKind;
    /** A resource of another kind of the same tenant, read in the same transaction (e.g. by a kind's check). */
    get<T>(kind: KindRef<T>, id: string): Promise<StoredResource<T> | undefined>;
}

/** Where a kind's documents live; the default keeps them in the shared `resources` table. */
export interface ResourceStore<T = unknown> {
    get(scope: StoreScope, id: string): Promise<StoredResource<T> | undefined>;
    list(scope: StoreScope): Promise<Array<StoredResource<T>>>;
    put(scope: StoreScope, id: string, resource: Omit<StoredResource<T>, 'createdAt' | 'updatedAt'>, existing?: StoredResource<T>): Promise<void>;
    delete(scope: StoreScope, id: string): Promise<void>;
    /** For kinds with write-only fields: whether the incoming write-only values equal what is stored (e.g. by hash). */
    writeOnlyUnchanged?(scope: StoreScope, id: string, spec: T): Promise<boolean>;
}

/** Migration warning raised by an upgrade step, e.g. PROVIDED_ATTESTATIONS_REMOVED. */
export interface UpgradeWarning {
    code: string;
    message: string;
}

/** Upgrades a spec of version n to version n + 1. */
export type Upgrade = (spec: any, warn: (warning: UpgradeWarning) => void) => any;

export interface ResourceKind<T = any> extends KindRef<T> {
    /** e.g. CredentialConfig */
    kind: string;
    /** e.g. CredentialConfigFile: names the schema URL */
    file: string;
    /** Current version; documents of older versions are upgraded, newer ones rejected. */
    version: number;
    /** Schema of the current version: validates API bodies, imports, exports and generates the docs. */
    schema: Joi.ObjectSchema<T>;
    /** upgrades[n] turns a version-n spec into version n + 1. */
    upgrades?: Record<number, Upgrade>;
    dependsOn?: string[];
    /** Fields (dot paths, `*` matching any array element or key) that hold the id of another kind's resource, e.g.
     * `{keyChainId: 'KeyChain'}`: each must exist when written (MISSING_RESOURCE_REFERENCE), and a referenced resource
     * cannot be deleted (409). */
    references?: Record<string, string>;
    /** Dot paths of secret values (`*` matches any array element or key): redacted in audit, logs and exports. */
    secrets?: string[];
    /** Dot paths of the URLs secrets are sent to: a stored secret is not kept when one on its way changes. */
    secretDestinations?: string[];
    /** Dot paths (`*` matches any array element or key) of URLs the service calls: every write refuses one the
     * outbound policy forbids (OUTBOUND_URL_*), and the service checks it again at every use. */
    outboundUrls?: string[];
    /** Fields accepted on write but never read back (a client secret, stored as a hash). */
    writeOnly?: string[];
    /** Write-only fields that may be `!generate`: when the resource is created, the registry writes a value of the
     * generator instead and answers it once (WriteResult.generated); an existing resource keeps its stored value. */
    generated?: Record<string, () => string>;
    /** Resources of this kind may belong to no tenant when the context has none. */
    allowsTenantless?: boolean;
    /** Exists once per tenant and has no id of its own. */
    singleton?: boolean;
    /** The Tenant kind: its id is the tenant id, and it is written without a tenant in the context. */
    isTenant?: boolean;
    id(spec: T): string;
    /**
     * Path in a tenant folder: a file for singletons (`bundleFile` when a bundle puts it elsewhere, spec 2.9), a
     * directory of `<id>.json` files otherwise.
     */
    location: { file: string; bundleFile?: string } | { dir: string };
    /** Checks that need other resources (inside the write's transaction); throw ValidationError to refuse. `ctx`
     * is the writer's (e.g. the operator's folder import, or an API client). */
    check?(scope: StoreScope, spec: T, ctx?: TenantContext): Promise<void>;
    /** Fills in what a tenant folder implies, e.g. the tenant id of info.json. */
    fromFolder?(spec: any, tenantId: string): any;
    /** Export (spec 2.9): top-level fields the document gets beyond the stored spec (a client's secret, a key chain's
     * key source), each with what an import must supply. Secret values of the stored spec become `${…}` placeholders
     * without this (SECRET_REQUIRED). */
    exportFields?(scope: StoreScope, id: string, spec: T, placeholder: (path: string) => string): Promise<ExportFields>;
    store?: ResourceStore<T>;
}

/** What an export leaves for the importer to supply (spec 2.9 table). */
export type RequirementCode = 'SECRET_REQUIRED' | 'CLIENT_SECRET_REQUIRED' | 'PRIVATE_KEY_REQUIRED';

export interface ExportRequirement {
    code: RequirementCode;
    /** `Kind/id`, or the kind alone for a singleton. */
    resource: string;
    /** Dot path in the document's spec. */
    path: string;
    message: string;
    /** The `${VAR}` the export wrote there, when it wrote one. */
    placeholder?: string;
}

export interface ExportFields {
    fields: Record<string, unknown>;
    requirements: Array<Omit<ExportRequirement, 'resource'>>;
}

export interface TenantContext {
    /** Absent for tenant-less clients (tenant:manage). */
    tenantId?: string;
    /** Who acts: a client id, or `system:<component>` for the service itself. */
    clientId: string;
    roles: string[];
}

/** The scope's tenant, for stores of kinds that always belong to one. */
export const tenantOf = (scope: StoreScope): string => {
    if (!scope.tenantId) {
        throw new Error(`${scope.kind.kind} always belongs to a tenant`);
    }
    return scope.tenantId;
};
