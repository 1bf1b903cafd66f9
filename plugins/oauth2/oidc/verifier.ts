import type Hapi from '@hapi/hapi';
import * as Jose from 'jose';
import type { Logger } from '../../../lib/logging';
import { InvalidTokenError, type TokenVerifier } from '../verifier';

export interface OidcVerifierOptions {
    /** The issuer as it appears in tokens and in discovery (OIDC). */
    issuer: string;
    /** Where this service reaches the provider (OIDC_INTERNAL_ISSUER_URL), when the public issuer is not reachable from here. */
    internalIssuer?: string;
    /** Required `aud` value (OIDC_AUDIENCE); unchecked when absent. */
    audience?: string;
    /** Claim that names the caller's tenant (OIDC_TENANT_CLAIM). */
    tenantClaim: string;
    log: Logger;
    /** Timeout of each discovery and JWKS request. Default 5000. */
    fetchTimeoutMs?: number;
    /** Minimum time between two JWKS refetches triggered by an unknown key id. Default 5000. */
    jwksCooldownMs?: number;
}

/**
 * Asymmetric algorithms only: with a symmetric one anybody holding the public JWKS could forge tokens (key
 * confusion), and `none` would accept unsigned ones.
 */
export const ACCEPTED_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];

/** Keys are refetched at least this often, so a key the provider withdrew stops being accepted. */
const JWKS_MAX_AGE_MS = 10 * 60 * 1000;

/** Keycloak's `typ` claim values of tokens that are not access tokens. */
const NOT_ACCESS_TOKENS = new Set(['ID', 'Refresh', 'Offline', 'Logout']);

const trimSlash = (url: string): string => url.replace(/\/+$/, '');

const errorText = (err: unknown): string => {
    if (!(err instanceof Error)) {
        return String(err);
    }
    // fetch hides the network reason (ECONNREFUSED, ENOTFOUND…) in its cause.
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    const detail = cause?.code ?? cause?.message;
    return err.name === 'TimeoutError' ? 'timed out' : detail ? `${err.message} (${detail})` : err.message;
};

const strings = (value: unknown): string[] | undefined =>
    Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : undefined;

/** Verifies access tokens of an external OpenID Connect provider against the keys it publishes. */
export class OidcVerifier implements TokenVerifier {
    private readonly issuer: string;
    private readonly internalIssuer?: string;
    private readonly fetchTimeoutMs: number;
    private jwks?: ReturnType<typeof Jose.createRemoteJWKSet>;
    private expectedIssuer?: string;
    private discovery?: Promise<void>;

    constructor(private readonly options: OidcVerifierOptions) {
        this.issuer = trimSlash(options.issuer);
        this.internalIssuer = options.internalIssuer ? trimSlash(options.internalIssuer) : undefined;
        this.fetchTimeoutMs = options.fetchTimeoutMs ?? 5000;
    }

    /** The URL discovery is fetched from. */
    get discoveryUrl(): string {
        return `${this.internalIssuer ?? this.issuer}/.well-known/openid-configuration`;
    }

    /** Runs discovery once; concurrent callers share one attempt, and a failed attempt is retried by the next call. */
    init(): Promise<void> {
        if (!this.discovery) {
            this.discovery = this.discover().catch((err: unknown) => {
                this.discovery = undefined;
                throw err;
            });
        }
        return this.discovery;
    }

    private async discover(): Promise<void> {
        const url = this.discoveryUrl;
        let response: Response;
        try {
            response = await fetch(url, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(this.fetchTimeoutMs) });
        }
        catch (err) {
            throw new Error(`OIDC discovery at ${url} failed: ${errorText(err)}`);
        }
        if (response.status !== 200) {
            throw new Error(`OIDC discovery at ${url} failed: HTTP ${response.status}`);
        }
        let metadata: { issuer?: unknown; jwks_uri?: unknown };
        try {
            metadata = await response.json() as typeof metadata;
        }
        catch {
            throw new Error(`OIDC discovery at ${url} failed: the response is not JSON`);
        }
        if (typeof metadata?.issuer !== 'string' || trimSlash(metadata.issuer) !== this.issuer) {
            throw new Error(`OIDC discovery at ${url} failed: the provider names issuer ${JSON.stringify(metadata?.issuer)}, expected ${JSON.stringify(this.options.issuer)}`);
        }
        if (typeof metadata.jwks_uri !== 'string' || !URL.canParse(metadata.jwks_uri)) {
            throw new Error(`OIDC discovery at ${url} failed: the provider names no valid jwks_uri`);
        }
        const jwksUri = this.reachable(metadata.jwks_uri);
        this.jwks = Jose.createRemoteJWKSet(new URL(jwksUri), {
            timeoutDuration: this.fetchTimeoutMs,
            cooldownDuration: this.options.jwksCooldownMs ?? 5000,
            cacheMaxAge: JWKS_MAX_AGE_MS
        });
        // Tokens carry the issuer exactly as the provider spells it, which may differ from OIDC by a trailing slash.
        this.expectedIssuer = metadata.issuer;
        this.options.log.info({ issuer: metadata.issuer, jwksUri }, 'OIDC provider discovered');
    }

    /**
     * The provider advertises its public addresses; behind OIDC_INTERNAL_ISSUER_URL those are not reachable from
     * here, so the public issuer prefix (or at least its origin) is swapped for the internal one.
     */
    private reachable(jwksUri: string): string {
        if (!this.internalIssuer) {
            return jwksUri;
        }
        if (jwksUri === this.issuer || jwksUri.startsWith(`${this.issuer}/`)) {
            return this.internalIssuer + jwksUri.slice(this.issuer.length);
        }
        const publicOrigin = new URL(this.issuer).origin;
        const target = new URL(jwksUri);
        if (target.origin === publicOrigin) {
            return new URL(target.pathname + target.search, new URL(this.internalIssuer).origin).href;
        }
        return jwksUri;
    }

    async verify(token: string): Promise<Hapi.AppCredentials> {
        try {
            await this.init();
        }
        catch (err) {
            this.options.log.warn({ err }, 'OIDC provider not available, token refused');
            throw new InvalidTokenError('The token could not be verified');
        }
        let payload: Jose.JWTPayload;
        try {
            ({ payload } = await Jose.jwtVerify(token, this.jwks!, {
                issuer: this.expectedIssuer!,
                audience: this.options.audience,
                algorithms: ACCEPTED_ALGORITHMS,
                requiredClaims: ['exp']
            }));
        }
        catch (err) {
            throw this.rejection(err);
        }
        // Keycloak signs its ID tokens with the same keys; only the audience would otherwise tell them apart.
        if (typeof payload.typ === 'string' && NOT_ACCESS_TOKENS.has(payload.typ)) {
            throw new InvalidTokenError('The token is not an access token');
        }
        const clientId = [payload.client_id, payload.azp, payload.sub].find((c): c is string => typeof c === 'string' && c !== '');
        if (!clientId) {
            throw new InvalidTokenError('The token names no client');
        }
        const realmAccess = payload.realm_access as { roles?: unknown } | undefined;
        const roles = strings(payload.roles) ?? strings(realmAccess?.roles) ?? [];
        const tenant = this.claim(payload, this.options.tenantClaim);
        return { clientId, tenantId: typeof tenant === 'string' && tenant !== '' ? tenant : undefined, roles };
    }

    /** A top-level claim, or a nested one for dotted names (Keycloak mappers turn `a.b` into nested objects). */
    private claim(payload: Jose.JWTPayload, name: string): unknown {
        if (name in payload || !name.includes('.')) {
            return payload[name];
        }
        return name.split('.').reduce<unknown>((value, key) =>
            value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined, payload);
    }

    private rejection(err: unknown): InvalidTokenError {
        if (err instanceof Jose.errors.JWTExpired) {
            return new InvalidTokenError('The token has expired');
        }
        if (err instanceof Jose.errors.JWTClaimValidationFailed && (err.claim === 'iss' || err.claim === 'aud')) {
            return new InvalidTokenError('The token was not issued for this service');
        }
        if (err instanceof Jose.errors.JWKSNoMatchingKey || err instanceof Jose.errors.JWSSignatureVerificationFailed) {
            return new InvalidTokenError('The token was not signed by the provider');
        }
        const providerFault = !(err instanceof Jose.errors.JOSEError)
            || err instanceof Jose.errors.JWKSTimeout || err instanceof Jose.errors.JWKSInvalid || err.code === 'ERR_JOSE_GENERIC';
        if (!providerFault) {
            return new InvalidTokenError('The token is not valid');
        }
        // Not the token's fault: the JWKS could not be fetched or read.
        this.options.log.warn({ err }, 'OIDC provider keys not available, token refused');
        return new InvalidTokenError('The token could not be verified');
    }
}
