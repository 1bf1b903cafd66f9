import { ChangeCache, changedTenant } from '../../lib/cache';
import { ValidationError } from '../../lib/errors';
import type { TenantContext } from '../../lib/registry/kind';
import type { Registry } from '../../lib/registry/registry';
import { credentialConfigKind, type CredentialConfig } from '../../resources/credential-config';
import { issuanceConfigKind, type IssuanceConfig } from '../../resources/issuance-config';
import { keyChainOfUsage } from '../../resources/key-chain';
import { tenantKind, type Tenant } from '../../resources/tenant';

/** The credential issuer identifier (and authorization server issuer) of a tenant: `{PUBLIC_URL}/issuers/{tenant}`. */
export const tenantUrl = (publicUrl: string, tenantId: string): string => `${publicUrl}/issuers/${tenantId}`;

export const systemContext = (tenantId: string): TenantContext => ({ tenantId, clientId: 'system:oid4vci', roles: [] });

export interface IssuerDeps {
    registry: Registry;
}

const DEFAULTS = { batchSize: 1, dPopRequired: false, walletAttestationRequired: false, refreshTokenEnabled: false, txCodeMaxAttempts: 5 };

export interface TenantIssuance {
    tenant?: Tenant;
    settings: IssuanceConfig & typeof DEFAULTS;
    credentials: Map<string, CredentialConfig>;
}

/** How long another replica's configuration change may go unseen here; this process's own changes apply at once. */
const CACHE_TTL_MS = 10_000;

/**
 * What the issuer side of a tenant needs on every wallet request (the tenant, its issuance settings with defaults,
 * its credential configurations), read once and cached until a change of those kinds (registry.onChange).
 */
export class Issuer {
    private readonly cache: ChangeCache<[tenantId: string], TenantIssuance>;

    constructor(private readonly deps: IssuerDeps) {
        this.cache = new ChangeCache({ ttlMs: CACHE_TTL_MS, load: (tenantId: string) => this.load(tenantId) })
            .dropOnChange(deps.registry, [tenantKind, issuanceConfigKind, credentialConfigKind], changedTenant);
    }

    private async load(tenantId: string): Promise<TenantIssuance> {
        const ctx = systemContext(tenantId);
        const { registry } = this.deps;
        const [tenant, settings, credentials] = await Promise.all([
            registry.get(ctx, tenantKind, tenantId),
            registry.get(ctx, issuanceConfigKind),
            registry.list(ctx, credentialConfigKind)
        ]);
        return {
            tenant: tenant?.spec,
            settings: { ...DEFAULTS, ...settings?.spec },
            credentials: new Map(credentials.map((c) => [c.spec.id, c.spec]))
        };
    }

    /** Everything at once, as one snapshot: a new object after every reload (what depends on it may key on it). */
    snapshot(tenantId: string): Promise<TenantIssuance> {
        return this.cache.get(tenantId);
    }

    async tenant(tenantId: string): Promise<Tenant | undefined> {
        return (await this.snapshot(tenantId)).tenant;
    }

    async settings(tenantId: string): Promise<IssuanceConfig & typeof DEFAULTS> {
        return (await this.snapshot(tenantId)).settings;
    }

    async credentialConfigs(tenantId: string): Promise<CredentialConfig[]> {
        return [...(await this.snapshot(tenantId)).credentials.values()];
    }

    async credentialConfig(tenantId: string, id: string): Promise<CredentialConfig | undefined> {
        return (await this.snapshot(tenantId)).credentials.get(id);
    }

    /** The key chain that signs a configuration's credentials: its own, else the tenant's first attestation chain. */
    async signingKeyChain(tenantId: string, credential: CredentialConfig): Promise<string> {
        if (credential.keyChainId) {
            return credential.keyChainId;
        }
        const chain = await keyChainOfUsage(this.deps.registry, systemContext(tenantId), 'attestation');
        if (!chain) {
            throw new ValidationError(`Credential configuration ${credential.id} has no keyChainId and the tenant has no attestation key chain`);
        }
        return chain;
    }
}
