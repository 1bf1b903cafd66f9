import type Joi from 'joi';
import type { JWK } from 'jose';
import type { Logger } from '../logging';
import type { OutboundPolicy } from '../outbound';

/** The only signature algorithm key stores must offer today (HAIP); the type leaves room for more. */
export type KeyAlgorithm = 'ES256';

/** A public EC P-256 key: `{kty: 'EC', crv: 'P-256', x, y}` (optionally kid, alg, use). Never `d`. */
export type PublicJwk = JWK;

/**
 * Keys held by one configured provider. Core crypto (JWS, COSE, X.509) only ever calls this interface; protocol
 * code never touches key material. `kid` is the provider-side key name chosen by the caller.
 */
export interface KeyStore {
    /** Generates a key inside the provider and answers its public key. */
    create(kid: string, alg: KeyAlgorithm): Promise<PublicJwk>;
    /** ES256 over `data` (the provider hashes with SHA-256): the raw r || s signature, 64 bytes. */
    sign(kid: string, data: Uint8Array, alg: KeyAlgorithm): Promise<Uint8Array>;
    publicJwk(kid: string): Promise<PublicJwk>;
    delete(kid: string): Promise<void>;
    /** Present only when the provider can take existing private keys (e.g. the db provider; http with canImport). */
    import?(kid: string, privateJwk: JWK, alg: KeyAlgorithm): Promise<PublicJwk>;
    /** Resolves when the provider is reachable and usable; rejects with a message naming the problem. */
    health(): Promise<void>;
    /** Releases connections or sessions. */
    close?(): Promise<void>;
}

/** What a provider receives when it opens: the tenant, a logger, and for the db provider the database. */
export interface KmsOpenContext {
    tenantId: string;
    providerId: string;
    log: Logger;
    /** Milliseconds an operation may take before it fails (KMS_TIMEOUT_MS, default 10000). */
    timeoutMs: number;
    /** The outbound policy (OUTBOUND_URL_*) the provider's URLs follow at every connection: set for providers a
     * tenant configured through the API, absent for the operator's (its kms.json files are trusted). */
    outbound?: OutboundPolicy;
    /** Services of the host the provider may need (the db provider uses the database); typed by the kms plugin. */
    services: Record<string, unknown>;
}

/**
 * A KMS provider type, registered by a `kms-*` plugin (or a third-party package) with
 * `server.registerKmsProvider(type)`. `optionsSchema` validates the provider entry's own fields (everything but
 * id, type and description) and must be strict; `secretPaths` names the fields that are secrets (dot paths), which
 * are redacted in answers, logs and exports; `destinationPaths` the URLs those secrets are sent to.
 */
export interface KmsProviderType<Options = Record<string, unknown>> {
    type: string;
    optionsSchema: Joi.ObjectSchema<Options>;
    secretPaths: string[];
    destinationPaths?: string[];
    open(options: Options, ctx: KmsOpenContext): Promise<KeyStore>;
}

/** Thrown by providers for an unreachable or failing backend; the API answers 503 naming the provider. */
export class KmsUnavailableError extends Error {
    override name = 'KmsUnavailableError';
}
