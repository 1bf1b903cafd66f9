import { ForbiddenError, ValidationError } from '../../lib/errors';
import { checkUrl, OutboundBlockedError, type OutboundPolicy } from '../../lib/outbound';
import { canonicalJson } from '../../lib/registry/diff';
import type { KmsConfig } from '../../resources/kms-config';

/**
 * What a tenant may configure through the API. The operator's files (global and tenant kms.json) are trusted; an API
 * client is not: it must not make the service load a native library or read files of its choosing (pkcs11
 * `library`, mTLS key files), nor talk to addresses the outbound policy keeps from webhooks (SSRF).
 */
/** A provider stored before, unchanged (the operator's, kept when the tenant detaches or edits another one). */
const unchanged = (provider: KmsConfig['providers'][number], previous: KmsConfig | undefined): boolean =>
    !!previous?.providers.some((p) => canonicalJson(p) === canonicalJson(provider));

/** The ids of the providers a write adds or changes: the ones held to the tenant policy. */
export const changedProviderIds = (config: KmsConfig, previous: KmsConfig | undefined): Set<string> =>
    new Set(config.providers.filter((p) => !unchanged(p, previous)).map((p) => p.id));

export const checkTenantKmsConfig = async (config: KmsConfig, outbound: OutboundPolicy, previous?: KmsConfig): Promise<void> => {
    for (const [index, provider] of config.providers.entries()) {
        if (unchanged(provider, previous)) {
            continue;
        }
        const auth = provider.auth as { type?: string; tokenUrl?: string } | undefined;
        if (provider.type === 'pkcs11' || auth?.type === 'mtls') {
            throw new ForbiddenError(`Provider ${provider.id}: ${provider.type === 'pkcs11' ? 'pkcs11 providers' : 'mTLS key files'} are configured by the operator in kms.json, not through the API`);
        }
        // Without its own credentials a cloud-kms provider signs with the service's AWS identity (environment, role).
        if (provider.type === 'cloud-kms' && !provider.secretAccessKey) {
            throw new ForbiddenError(`Provider ${provider.id}: a cloud-kms provider without accessKeyId and secretAccessKey uses the service's own AWS credentials and is configured by the operator in kms.json, not through the API`);
        }
        for (const [field, url] of [['baseUrl', provider.baseUrl], ['auth.tokenUrl', auth?.tokenUrl], ['vaultUrl', provider.vaultUrl], ['tokenUrl', provider.tokenUrl]] as const) {
            if (typeof url !== 'string') {
                continue;
            }
            try {
                await checkUrl(outbound, url);
            }
            catch (err) {
                if (err instanceof OutboundBlockedError) {
                    throw new ValidationError(`Provider ${provider.id}: ${err.message}`, [{ path: `providers.${index}.${field}`, message: err.message }]);
                }
                throw new ValidationError(`Provider ${provider.id}: ${field} cannot be resolved`, [{ path: `providers.${index}.${field}`, message: 'cannot be resolved' }]);
            }
        }
    }
};
