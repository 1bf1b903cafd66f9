import { ChangeCache, changedTenant } from '../../../lib/cache';
import type { Database } from '../../../lib/db/database';
import { UnavailableError, ValidationError } from '../../../lib/errors';
import { KmsUnavailableError, type KeyAlgorithm, type KeyStore, type KmsProviderType, type PublicJwk } from '../../../lib/kms/types';
import type { Logger } from '../../../lib/logging';
import type { OutboundPolicy } from '../../../lib/outbound';
import type { Registry } from '../../../lib/registry/registry';
import { canonicalJson } from '../../../lib/registry/diff';
import { kmsConfigKind, mergeKmsConfigs, type KmsConfig, type KmsProviderEntry } from '../../../resources/kms-config';
import type { JWK } from 'jose';

export interface ProviderHealth {
    id: string;
    type: string;
    description?: string;
    default: boolean;
    status: 'up' | 'down';
    error?: string;
}

interface OpenStore {
    fingerprint: string;
    store: Promise<KeyStore>;
}

interface TenantKmsConfig {
    config: KmsConfig;
    guarded: ReadonlySet<string>;
}

const CONFIG_TTL_MS = 30_000;

/**
 * Opens and caches the key stores of each tenant's providers (global kms.json merged with the tenant's), and puts
 * a deadline on every provider call: a provider that is down answers 503 naming it, never a hang.
 */
export class KmsService {
    private readonly stores = new Map<string, OpenStore>();
    private readonly configs: ChangeCache<[tenantId: string], TenantKmsConfig>;

    constructor(private readonly deps: {
        db: Database;
        registry: Registry;
        log: Logger;
        outbound: OutboundPolicy;
        timeoutMs: number;
        types: ReadonlyMap<string, KmsProviderType<any>>;
        globalConfig: () => KmsConfig | undefined;
        /** The tenant folder's kms.json of the operator's configuration folder, if any (TENANT_ID_PATTERN ids only). */
        operatorTenantConfig?: (tenantId: string) => KmsConfig | undefined;
    }) {
        this.configs = new ChangeCache({ ttlMs: CONFIG_TTL_MS, load: (tenantId: string) => this.loadConfig(tenantId) })
            .dropOnChange(deps.registry, [kmsConfigKind], changedTenant);
    }

    async effectiveConfig(tenantId: string): Promise<KmsConfig> {
        return (await this.configs.get(tenantId)).config;
    }

    /**
     * The merged configuration, and the tenant's providers whose connections follow the outbound policy, like
     * webhooks: every one the operator's folder does not hold exactly as stored. Ownership does not tell: a tenant's
     * bundle import records its configuration file-managed like the operator's folder import does.
     */
    private async loadConfig(tenantId: string): Promise<TenantKmsConfig> {
        const tenant = await this.deps.registry.get({ tenantId, clientId: 'system:kms', roles: [] }, kmsConfigKind);
        const config = mergeKmsConfigs(this.deps.globalConfig(), tenant?.spec);
        const operator = new Map((this.deps.operatorTenantConfig?.(tenantId)?.providers ?? []).map((p) => [p.id, canonicalJson(p)]));
        const guarded = new Set((tenant?.spec.providers ?? []).filter((p) => operator.get(p.id) !== canonicalJson(p)).map((p) => p.id));
        return { config, guarded };
    }

    /** Whether a provider comes from the tenant's own configuration (not the shared global kms.json or db). */
    async isTenantProvider(tenantId: string, providerId: string): Promise<boolean> {
        const own = await this.deps.registry.get({ tenantId, clientId: 'system:kms', roles: [] }, kmsConfigKind);
        return !!own?.spec.providers.some((p) => p.id === providerId) || providerId === 'db';
    }

    async provider(tenantId: string, providerId?: string): Promise<{ entry: KmsProviderEntry; store: KeyStore }> {
        const { config, guarded } = await this.configs.get(tenantId);
        const id = providerId ?? config.defaultProvider ?? 'db';
        const entry = config.providers.find((p) => p.id === id);
        if (!entry) {
            throw new ValidationError(`KMS provider ${id} is not configured for this tenant`, [{ path: 'kmsProvider', message: `unknown provider ${id}` }]);
        }
        return { entry, store: await this.open(tenantId, entry, guarded.has(entry.id)) };
    }

    private open(tenantId: string, entry: KmsProviderEntry, guarded: boolean): Promise<KeyStore> {
        const key = `${tenantId}\u0000${entry.id}`;
        const fingerprint = `${guarded ? 'guarded:' : ''}${canonicalJson(entry)}`;
        const cached = this.stores.get(key);
        if (cached && cached.fingerprint === fingerprint) {
            return cached.store;
        }
        if (cached) {
            cached.store.then((s) => s.close?.()).catch(() => undefined);
        }
        const store = this.openFresh(tenantId, entry, guarded ? this.deps.outbound : undefined).then((s) => this.guard(entry.id, s));
        store.catch(() => this.stores.delete(key));
        this.stores.set(key, { fingerprint, store });
        return store;
    }

    /** Opens a store without caching it: to check a configuration before it is saved. */
    async openFresh(tenantId: string, entry: KmsProviderEntry, outbound?: OutboundPolicy): Promise<KeyStore> {
        const type = this.deps.types.get(entry.type);
        if (!type) {
            throw new ValidationError(`Unknown KMS provider type ${entry.type}`, [{ path: 'type', message: `must be one of ${[...this.deps.types.keys()].join(', ')}` }]);
        }
        const { id: _id, type: _type, description: _description, ...raw } = entry;
        // Placeholders were resolved when the operator's files were read; a value from the API is taken literally:
        // resolving ${VAR} there would hand a tenant the service's own environment (MASTER_SECRET, DB_PASSWORD).
        const { value: options, error } = type.optionsSchema.validate(raw);
        if (error) {
            throw new ValidationError(`KMS provider ${entry.id}: ${error.message}`);
        }
        return this.deadline(entry.id, 'open', type.open(options, {
            tenantId,
            providerId: entry.id,
            log: this.deps.log.child({ kmsProvider: entry.id }),
            timeoutMs: this.deps.timeoutMs,
            ...(outbound ? { outbound } : {}),
            services: { db: this.deps.db }
        }));
    }

    /** Every call through the store gets the deadline and the 503 mapping. */
    private guard(providerId: string, store: KeyStore): KeyStore {
        const call = <T>(op: string, p: Promise<T>) => this.deadline(providerId, op, p);
        return {
            create: (kid: string, alg: KeyAlgorithm) => call('create', store.create(kid, alg)),
            sign: (kid: string, data: Uint8Array, alg: KeyAlgorithm) => call('sign', store.sign(kid, data, alg)),
            publicJwk: (kid: string) => call('publicJwk', store.publicJwk(kid)),
            delete: (kid: string) => call('delete', store.delete(kid)),
            import: store.import ? (kid: string, jwk: JWK, alg: KeyAlgorithm): Promise<PublicJwk> => call('import', store.import!(kid, jwk, alg)) : undefined,
            health: () => call('health', store.health()),
            close: store.close ? () => store.close!() : undefined
        };
    }

    private async deadline<T>(providerId: string, op: string, work: Promise<T>): Promise<T> {
        const ms = this.deps.timeoutMs;
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new UnavailableError(`KMS provider ${providerId} did not answer ${op} within ${ms} ms`)), ms);
        });
        try {
            return await Promise.race([work, timeout]);
        }
        catch (err) {
            if (err instanceof KmsUnavailableError) {
                throw new UnavailableError(`KMS provider ${providerId} is unavailable: ${err.message}`);
            }
            throw err;
        }
        finally {
            clearTimeout(timer);
        }
    }

    async health(tenantId: string): Promise<ProviderHealth[]> {
        const { config, guarded } = await this.configs.get(tenantId);
        return Promise.all(config.providers.map(async (entry) => {
            const base = { id: entry.id, type: entry.type, ...(entry.description ? { description: entry.description } : {}), default: entry.id === (config.defaultProvider ?? 'db') };
            try {
                const store = await this.open(tenantId, entry, guarded.has(entry.id));
                await store.health();
                return { ...base, status: 'up' as const };
            }
            catch (err) {
                return { ...base, status: 'down' as const, error: (err as Error).message };
            }
        }));
    }

    /**
     * Opens and health-checks every provider of a configuration before it is saved (a wrong PIN fails here); the
     * providers `guard` names connect under its outbound policy, as they will at use.
     */
    async check(tenantId: string, config: KmsConfig, guard?: { outbound: OutboundPolicy; providerIds: ReadonlySet<string> }): Promise<void> {
        const own = new Set(config.providers.map((p) => p.id));
        for (const entry of mergeKmsConfigs(this.deps.globalConfig(), config).providers) {
            let store: KeyStore | undefined;
            try {
                store = await this.openFresh(tenantId, entry, guard && own.has(entry.id) && guard.providerIds.has(entry.id) ? guard.outbound : undefined);
                await this.deadline(entry.id, 'health', store.health());
            }
            catch (err) {
                // At save time every failure, an unreachable provider included, makes the configuration unusable: 400.
                throw new ValidationError(`KMS provider ${entry.id} cannot be used: ${(err as Error).message}`, [{ path: 'providers', message: `provider ${entry.id}: ${(err as Error).message}` }]);
            }
            finally {
                await store?.close?.().catch(() => undefined);
            }
        }
    }

    async close(): Promise<void> {
        const stores = [...this.stores.values()];
        this.stores.clear();
        await Promise.all(stores.map((s) => s.store.then((x) => x.close?.()).catch(() => undefined)));
    }
}
