import type Hapi from '@hapi/hapi';
import type { Config } from '../../lib/config';
import type { Database } from '../../lib/db/database';
import { ValidationError } from '../../lib/errors';
import type { TenantContext } from '../../lib/registry/kind';
import type { Registry } from '../../lib/registry/registry';
import type { CredentialConfig } from '../../resources/credential-config';
import type { IssuanceConfig } from '../../resources/issuance-config';
import type { KeyChain } from '../../resources/key-chain';
import type { Tenant } from '../../resources/tenant';

/** The credential issuer identifier (and authorization server issuer) of a tenant: `{PUBLIC_URL}/issuers/{tenant}`. */
export const tenantUrl = (config: Config, tenantId: string): string => `${config.publicUrl}/issuers/${tenantId}`;

export const systemContext = (tenantId: string): TenantContext => ({ tenantId, clientId: 'system:oid4vci', roles: [] });

export interface IssuerDeps {
    config: Config;
    db: Database;
    registry: Registry;
    server: Hapi.Server;
}

const DEFAULTS = { batchSize: 1, dPopRequired: false, walletAttestationRequired: false, refreshTokenEnabled: false, txCodeMaxAttempts: 5 };

/** What the issuer side of a tenant needs per request: its settings with defaults, and its configurations. */
export class Issuer {
    constructor(private readonly deps: IssuerDeps) {}

    async tenant(tenantId: string): Promise<Tenant | undefined> {
        return (await this.deps.registry.get<Tenant>(this.deps.db, systemContext(tenantId), 'Tenant', tenantId))?.spec;
    }

    async settings(tenantId: string): Promise<IssuanceConfig & typeof DEFAULTS> {
        const stored = await this.deps.registry.get<IssuanceConfig>(this.deps.db, systemContext(tenantId), 'IssuanceConfig');
        return { ...DEFAULTS, ...stored?.spec };
    }

    async credentialConfigs(tenantId: string): Promise<CredentialConfig[]> {
        return (await this.deps.registry.list<CredentialConfig>(this.deps.db, systemContext(tenantId), 'CredentialConfig')).map((r) => r.spec);
    }

    async credentialConfig(tenantId: string, id: string): Promise<CredentialConfig | undefined> {
        return (await this.deps.registry.get<CredentialConfig>(this.deps.db, systemContext(tenantId), 'CredentialConfig', id))?.spec;
    }

    /** The key chain that signs a configuration's credentials: its own, else the tenant's first attestation chain. */
    async signingKeyChain(tenantId: string, credential: CredentialConfig): Promise<string> {
        if (credential.keyChainId) {
            return credential.keyChainId;
        }
        const chains = await this.deps.registry.list<KeyChain>(this.deps.db, systemContext(tenantId), 'KeyChain');
        const chain = chains.find((c) => c.spec.usageType === 'attestation');
        if (!chain) {
            throw new ValidationError(`Credential configuration ${credential.id} has no keyChainId and the tenant has no attestation key chain`);
        }
        return chain.spec.id;
    }
}
