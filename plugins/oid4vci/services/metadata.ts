import type { Registry } from '../../../lib/registry/registry';
import { PROOF_TYPES, type ClaimField, type CredentialConfig } from '../../../resources/credential-config';
import { keyChainOfUsage } from '../../../resources/key-chain';
import type { SigningService } from '../../kms/services/signing';
import { flattenFields } from '../formats/claims';
import { typeMetadataDocument, type TypeMetadataDocument } from '../formats/sd-jwt';
import { systemContext, tenantUrl, type Issuer, type TenantIssuance } from '../issuer';
import { ATTEST_JWT_CLIENT_AUTH, clientAttestationMetadata } from './client-attestation';
import { responseEncryptionMetadata, type CredentialRequestDecryption } from './encryption';
import { AUTHORIZATION_CODE_GRANT, PRE_AUTHORIZED_GRANT } from './offers';
import { PROOF_SIGNING_ALGORITHMS } from './proofs';
import { REFRESH_TOKEN_GRANT } from './tokens';

type Metadata = Record<string, unknown>;

/** The configuration's fields with their full claim paths (mso_mdoc: [namespace, element]), as the metadata lists them. */
const claimFields = (credential: CredentialConfig) =>
    flattenFields(credential.fields as never).map((field) => {
        const f = field as unknown as ClaimField & { path: Array<string | number | null> };
        const path = credential.config.format === 'mso_mdoc' && f.path.length === 1 ? [f.namespace ?? credential.config.docType!, f.path[0]!] : f.path;
        return { ...f, path };
    }).filter((f) => f.path.length);

/** The claim paths of a configuration's fields (mso_mdoc: [namespace, element]). */
export const credentialClaimPaths = (credential: CredentialConfig): Array<Array<string | number | null>> => claimFields(credential).map((f) => f.path);

const claimsMetadata = (credential: CredentialConfig) =>
    claimFields(credential).map((f) => ({ path: f.path, ...(f.mandatory ? { mandatory: true } : {}), ...(f.display?.length ? { display: f.display } : {}) }));

/**
 * The accepted proof types (both when a configuration predates the setting), each with the key attestation levels
 * the credential endpoint enforces (OpenID4VCI key_attestations_required; an empty object: any key attestation).
 */
const proofTypesMetadata = ({ proofTypesSupported, keyAttestationsRequired }: CredentialConfig['config']) =>
    Object.fromEntries((proofTypesSupported ?? PROOF_TYPES).map((type) => [type, {
        proof_signing_alg_values_supported: [...PROOF_SIGNING_ALGORITHMS],
        ...(keyAttestationsRequired ? { key_attestations_required: keyAttestationsRequired } : {})
    }]));

const configurationMetadata = (credential: CredentialConfig) => {
    const mdoc = credential.config.format === 'mso_mdoc';
    const bound = credential.keyBinding !== false;
    return {
        format: credential.config.format,
        ...(credential.config.scope ? { scope: credential.config.scope } : {}),
        ...(mdoc ? { doctype: credential.config.docType } : { vct: typeof credential.vct === 'string' ? credential.vct : credential.vct?.vct }),
        // COSE algorithm identifiers for mdoc (-7 = ES256), JOSE names for SD-JWT VC.
        credential_signing_alg_values_supported: mdoc ? [-7] : ['ES256'],
        ...(bound
            ? {
                cryptographic_binding_methods_supported: mdoc ? ['cose_key'] : ['jwk'],
                proof_types_supported: proofTypesMetadata(credential.config)
            }
            : {}),
        credential_metadata: {
            display: credential.config.display,
            claims: claimsMetadata(credential)
        }
    };
};

interface TenantMetadata {
    issuer: Metadata;
    authorizationServer: Metadata;
}

/**
 * Credential issuer and authorization server metadata of each tenant. Built from the issuer's snapshot of the
 * tenant's configuration and kept with it, so it follows that snapshot's invalidation (a change here at once,
 * another replica's within the issuer's TTL).
 */
export const SIGNED_METADATA_TYP = 'openidvci-issuer-metadata+jwt';

export class MetadataService {
    private readonly built = new WeakMap<TenantIssuance, TenantMetadata>();

    constructor(private readonly deps: { publicUrl: string; issuer: Issuer; requestDecryption: CredentialRequestDecryption; registry: Registry; signing: SigningService }) {}

    /**
     * Signed credential issuer metadata (OpenID4VCI 1.0 12.2.3): every metadata parameter as a top-level claim, `sub`
     * the credential issuer identifier and `iat`, typ `openidvci-issuer-metadata+jwt`, signed by the tenant's access
     * key chain with its x5c. Undefined when the tenant has no access key chain.
     */
    async signedIssuerMetadata(tenantId: string): Promise<string | undefined> {
        const access = await keyChainOfUsage(this.deps.registry, systemContext(tenantId), 'access');
        if (!access) {
            return undefined;
        }
        const metadata = await this.issuerMetadata(tenantId);
        return this.deps.signing.jws(tenantId, access, {
            header: { typ: SIGNED_METADATA_TYP },
            payload: { ...metadata, sub: metadata.credential_issuer, iat: Math.floor(Date.now() / 1000) }
        });
    }

    private async build(tenantId: string): Promise<TenantMetadata> {
        const snapshot = await this.deps.issuer.snapshot(tenantId);
        let metadata = this.built.get(snapshot);
        if (!metadata) {
            metadata = this.compute(tenantId, snapshot);
            this.built.set(snapshot, metadata);
        }
        return metadata;
    }

    private compute(tenantId: string, { settings, credentials: byId }: TenantIssuance): TenantMetadata {
        const base = tenantUrl(this.deps.publicUrl, tenantId);
        const credentials = [...byId.values()];
        const issuer: Metadata = {
            credential_issuer: base,
            authorization_servers: [base],
            credential_endpoint: `${base}/vci/credential`,
            nonce_endpoint: `${base}/vci/nonce`,
            deferred_credential_endpoint: `${base}/vci/deferred_credential`,
            notification_endpoint: `${base}/vci/notification`,
            interactive_authorization_endpoint: `${base}/authorize/interactive`,
            credential_request_encryption: this.deps.requestDecryption.metadata(tenantId),
            credential_response_encryption: responseEncryptionMetadata(),
            ...(settings.batchSize > 1 ? { batch_credential_issuance: { batch_size: settings.batchSize } } : {}),
            ...(settings.display?.length ? { display: settings.display } : {}),
            credential_configurations_supported: Object.fromEntries(credentials.map((c) => [c.id, configurationMetadata(c)]))
        };
        const scopes = [...new Set(credentials.map((c) => c.config.scope).filter((scope): scope is string => !!scope))];
        // RFC 8414 with RFC 9126 (PAR, required), RFC 7636 (S256 only), RFC 9207 (iss) and RFC 9449 (DPoP), as HAIP asks.
        const authorizationServer: Metadata = {
            issuer: base,
            authorization_endpoint: `${base}/authorize`,
            pushed_authorization_request_endpoint: `${base}/authorize/par`,
            // OpenID4VCI interactive authorization draft: wallet-initiated requests (without issuer_state) go there.
            interactive_authorization_endpoint: `${base}/authorize/interactive`,
            require_pushed_authorization_requests: true,
            token_endpoint: `${base}/authorize/token`,
            response_types_supported: ['code'],
            response_modes_supported: ['query'],
            grant_types_supported: [PRE_AUTHORIZED_GRANT, AUTHORIZATION_CODE_GRANT, ...(settings.refreshTokenEnabled ? [REFRESH_TOKEN_GRANT] : [])],
            'pre-authorized_grant_anonymous_access_supported': !settings.walletAttestationRequired,
            code_challenge_methods_supported: ['S256'],
            authorization_response_iss_parameter_supported: true,
            authorization_details_types_supported: ['openid_credential'],
            ...(scopes.length ? { scopes_supported: scopes } : {}),
            // Wallet attestation is always verified when sent; without walletAttestationRequired public clients may omit it.
            ...clientAttestationMetadata(base),
            token_endpoint_auth_methods_supported: settings.walletAttestationRequired ? [ATTEST_JWT_CLIENT_AUTH] : ['none', ATTEST_JWT_CLIENT_AUTH],
            dpop_signing_alg_values_supported: ['ES256'],
            jwks_uri: `${base}/jwks`
        };
        return { issuer, authorizationServer };
    }

    async issuerMetadata(tenantId: string): Promise<Metadata> {
        return (await this.build(tenantId)).issuer;
    }

    async authorizationServerMetadata(tenantId: string): Promise<Metadata> {
        return (await this.build(tenantId)).authorizationServer;
    }

    /** The SD-JWT VC type metadata document of a dc+sd-jwt configuration whose vct is given in object form. */
    async typeMetadata(tenantId: string, credentialConfigurationId: string): Promise<TypeMetadataDocument | undefined> {
        const credential = (await this.deps.issuer.snapshot(tenantId)).credentials.get(credentialConfigurationId);
        return credential?.config.format === 'dc+sd-jwt' ? typeMetadataDocument(credential.vct) : undefined;
    }
}
