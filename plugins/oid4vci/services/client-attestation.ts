import Crypto from 'node:crypto';
import * as Jose from 'jose';
import type { JWK } from 'jose';
import type { SingleUseStore } from '../../../lib/db/single-use';
import { OAuthError } from '../../../lib/errors';
import { jwkThumbprint } from '../../../lib/oauth/dpop';
import { isObject, verifiedClaims as verifiedClaimsOf, walletProviderKey, type WalletProviderTrust } from './wallet-provider-trust';
import { jwkPublicKey } from '../../../lib/crypto/public-keys';

/**
 * OAuth 2.0 Attestation-Based Client Authentication (draft-ietf-oauth-attestation-based-client-auth) as HAIP 1.0
 * profiles it for wallets: the wallet sends a Client Attestation JWT (`OAuth-Client-Attestation`), signed by its
 * wallet provider, and a PoP JWT (`OAuth-Client-Attestation-PoP`) signed by the instance key the attestation names in
 * `cnf.jwk`. The attestation's x5c must chain to a `wallet-provider` entry of the tenant's trust lists, must not carry
 * that anchor and must not be self-signed (HAIP). PoP ids are single use per tenant and instance key; challenges from
 * the challenge endpoint are single use per tenant.
 *
 * Failures are `invalid_client` (HTTP 400, the draft's SHOULD for authorization servers, RFC 6749's default); a
 * missing or rejected challenge is `use_attestation_challenge` with a fresh challenge in the
 * `OAuth-Client-Attestation-Challenge` header, as the draft requires (section 7.4).
 */

export const CLIENT_ATTESTATION_HEADER = 'oauth-client-attestation';
export const CLIENT_ATTESTATION_POP_HEADER = 'oauth-client-attestation-pop';
export const CLIENT_ATTESTATION_CHALLENGE_HEADER = 'OAuth-Client-Attestation-Challenge';
/** The token endpoint authentication method of this mechanism (draft section 15.6), for the AS metadata. */
export const ATTEST_JWT_CLIENT_AUTH = 'attest_jwt_client_auth';

const ATTESTATION_TYP = 'oauth-client-attestation+jwt';
const POP_TYP = 'oauth-client-attestation-pop+jwt';
/** Asymmetric algorithms only (the draft forbids MACs for the PoP; HAIP needs ES256); also for the AS metadata. */
export const CLIENT_ATTESTATION_ALGORITHMS: readonly string[] = ['ES256', 'ES384', 'ES512'];

// An x5c of up to MAX_CHAIN_LENGTH certificates fits; anything larger is refused before it is parsed.
const MAX_ATTESTATION_LENGTH = 32_768;
const MAX_POP_LENGTH = 4096;
// single_use_values.key holds 255 characters: 'client-attestation-pop:' (23) + thumbprint (43) + ':' leaves 188.
const MAX_JTI_LENGTH = 160;
const MAX_CLIENT_ID_LENGTH = 255;
const CHALLENGE_BYTES = 24;
const CHALLENGE_PATTERN = /^[A-Za-z0-9_-]{32}$/;
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k', 'oth', 'priv'];

const popKey = (jkt: string, jti: string) => `client-attestation-pop:${jkt}:${jti}`;
const challengeKey = (challenge: string) => `client-attestation-challenge:${challenge}`;

const invalidClient = (description: string) => new OAuthError(400, 'invalid_client', description);

const isNumericDate = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);

export interface ClientAttestationInput {
    tenantId: string;
    /**
     * The request's headers with names in lower case, as hapi's `request.headers` has them (typed loosely so that
     * object fits as it is; a value other than one string is refused).
     */
    headers: Readonly<Record<string, unknown>>;
    /** The authorization server's issuer identifier (RFC 8414): the PoP's required `aud`. */
    issuer: string;
    /** The request's client_id, when it names one: it must be the attestation's `sub`. */
    clientId?: string;
}

export interface AuthenticatedClient {
    /** The attestation's `sub`. */
    clientId: string;
    /** The client instance key (`cnf.jwk`), public members only as received. */
    cnfJwk: JWK;
    /** Its RFC 7638 SHA-256 thumbprint: what refresh tokens and DPoP combined mode bind to. */
    cnfJkt: string;
}

export interface ClientAttestationDeps {
    /** The trust anchors of a tenant (every trust list entry; only wallet-provider ones are accepted here). */
    trust: WalletProviderTrust;
    singleUse: SingleUseStore;
    /** Allowed clock difference for exp, iat and nbf, seconds (default 30). */
    skewSeconds?: number;
    /** How old a PoP's iat may be, seconds (default 300); its jti is remembered that long plus twice the skew. */
    popMaxAgeSeconds?: number;
    /** How long an issued challenge can be used, seconds (default 120). */
    challengeTtlSeconds?: number;
    /**
     * Require a challenge from the challenge endpoint in every PoP (default false: a PoP without one is accepted, a
     * PoP with one must carry a challenge this service issued and nobody used).
     */
    requireChallenge?: boolean;
}

/**
 * What the authorization server metadata says about this mechanism (draft sections 6.3 and 8): the authentication
 * method, the algorithms (required when the PoP JWT is used) and the challenge endpoint. `issuer` is the tenant's
 * issuer identifier, `{PUBLIC_URL}/issuers/{tenant}`.
 */
export const clientAttestationMetadata = (issuer: string) => ({
    token_endpoint_auth_methods_supported: [ATTEST_JWT_CLIENT_AUTH],
    client_attestation_signing_alg_values_supported: [...CLIENT_ATTESTATION_ALGORITHMS],
    client_attestation_pop_signing_alg_values_supported: [...CLIENT_ATTESTATION_ALGORITHMS],
    challenge_endpoint: `${issuer}/authorize/challenge`
});

/** Whether a request carries either attestation header: callers that do not require attestation check it first. */
export const hasClientAttestation = (headers: ClientAttestationInput['headers']): boolean =>
    headers[CLIENT_ATTESTATION_HEADER] !== undefined || headers[CLIENT_ATTESTATION_POP_HEADER] !== undefined;

export class ClientAttestationVerifier {
    private readonly skewSeconds: number;
    private readonly popMaxAgeSeconds: number;
    private readonly challengeTtlSeconds: number;
    private readonly requireChallenge: boolean;

    constructor(private readonly deps: ClientAttestationDeps) {
        this.skewSeconds = deps.skewSeconds ?? 30;
        this.popMaxAgeSeconds = deps.popMaxAgeSeconds ?? 300;
        this.challengeTtlSeconds = deps.challengeTtlSeconds ?? 120;
        this.requireChallenge = deps.requireChallenge === true;
        for (const [name, value] of [['skewSeconds', this.skewSeconds], ['popMaxAgeSeconds', this.popMaxAgeSeconds], ['challengeTtlSeconds', this.challengeTtlSeconds]] as const) {
            if (!Number.isFinite(value) || value < 0) {
                throw new Error(`Client attestation ${name} must be a non-negative number`);
            }
        }
    }

    /** A fresh challenge for the tenant's PoPs (`attestation_challenge`), usable once within challengeTtlSeconds. */
    async challenge(tenantId: string): Promise<string> {
        const challenge = Crypto.randomBytes(CHALLENGE_BYTES).toString('base64url');
        await this.deps.singleUse.issue(tenantId, challengeKey(challenge), this.challengeTtlSeconds);
        return challenge;
    }

    /**
     * Authenticates the client of a request by its attestation and PoP: the client_id (the attestation's `sub`) and
     * the instance key. Throws OAuthError `invalid_client` (or `use_attestation_challenge`) on any failure.
     */
    async authenticate(input: ClientAttestationInput): Promise<AuthenticatedClient> {
        const attestationJwt = singleHeader(input.headers, CLIENT_ATTESTATION_HEADER, 'OAuth-Client-Attestation', MAX_ATTESTATION_LENGTH);
        const popJwt = singleHeader(input.headers, CLIENT_ATTESTATION_POP_HEADER, 'OAuth-Client-Attestation-PoP', MAX_POP_LENGTH);
        const now = Date.now() / 1000;

        const attestation = await this.verifyAttestation(input.tenantId, attestationJwt, now);
        if (input.clientId !== undefined && input.clientId !== attestation.clientId) {
            throw invalidClient('The client_id of the request is not the wallet attestation\'s sub');
        }
        const { jti, challenge } = await this.verifyPop(input.tenantId, popJwt, attestation, input.issuer, now);

        // Claimed after every other check, so PoPs that fail one do not fill the store; the jti before the challenge,
        // so a replayed PoP is told it is a replay.
        // Kept while an iat could still pass (a PoP dated skewSeconds ahead stays acceptable that much longer).
        if (!await this.deps.singleUse.claim(input.tenantId, popKey(attestation.cnfJkt, jti), this.popMaxAgeSeconds + 2 * this.skewSeconds)) {
            throw invalidClient('The wallet attestation PoP has already been used (jti)');
        }
        if (challenge !== undefined && !await this.deps.singleUse.consume(input.tenantId, challengeKey(challenge))) {
            throw await this.challengeError(input.tenantId, 'The wallet attestation PoP challenge is unknown, expired or already used');
        }
        return { clientId: attestation.clientId, cnfJwk: attestation.cnfJwk, cnfJkt: attestation.cnfJkt };
    }

    private async verifyAttestation(tenantId: string, jwt: string, now: number): Promise<AuthenticatedClient & { cnfKey: Crypto.KeyObject }> {
        const header = protectedHeader(jwt, 'wallet attestation');
        if (typeof header.typ !== 'string' || header.typ.toLowerCase() !== ATTESTATION_TYP) {
            throw invalidClient(`The wallet attestation typ must be ${ATTESTATION_TYP}`);
        }
        const alg = allowedAlg(header.alg, 'wallet attestation');

        const leafPublicKey = await walletProviderKey(this.deps.trust, tenantId, header.x5c, new Date(now * 1000), 'wallet attestation', invalidClient);

        const claims = await verifiedClaims(jwt, leafPublicKey, alg, 'wallet attestation', 'its x5c leaf certificate');
        const { sub, exp, iat, nbf, cnf } = claims;
        if (typeof sub !== 'string' || !sub.length) {
            throw invalidClient('The wallet attestation has no sub (the client_id)');
        }
        if (sub.length > MAX_CLIENT_ID_LENGTH || CONTROL_CHARACTER.test(sub)) {
            throw invalidClient('The wallet attestation sub is not a usable client_id');
        }
        if (!isNumericDate(exp)) {
            throw invalidClient('The wallet attestation has no exp');
        }
        if (exp <= now - this.skewSeconds) {
            throw invalidClient('The wallet attestation has expired');
        }
        if (iat !== undefined && (!isNumericDate(iat) || iat > now + this.skewSeconds)) {
            throw invalidClient('The wallet attestation iat is not a time in the past');
        }
        if (nbf !== undefined && (!isNumericDate(nbf) || nbf > now + this.skewSeconds)) {
            throw invalidClient('The wallet attestation is not valid yet (nbf)');
        }
        const jwk = isObject(cnf) ? cnf.jwk : undefined;
        if (!isObject(jwk) || typeof jwk.kty !== 'string') {
            throw invalidClient('The wallet attestation has no cnf.jwk');
        }
        if (PRIVATE_MEMBERS.some((member) => member in jwk)) {
            throw invalidClient('The wallet attestation cnf.jwk must be a public key');
        }
        let cnfKey: Crypto.KeyObject;
        let cnfJkt: string;
        try {
            cnfKey = jwkPublicKey(jwk);
            cnfJkt = await jwkThumbprint(jwk as JWK);
        }
        catch {
            throw invalidClient('The wallet attestation cnf.jwk is not a usable public key');
        }
        return { clientId: sub, cnfJwk: jwk as JWK, cnfJkt, cnfKey };
    }

    private async verifyPop(tenantId: string, jwt: string, attestation: AuthenticatedClient & { cnfKey: Crypto.KeyObject }, issuer: string, now: number): Promise<{ jti: string; challenge?: string }> {
        const header = protectedHeader(jwt, 'wallet attestation PoP');
        if (typeof header.typ !== 'string' || header.typ.toLowerCase() !== POP_TYP) {
            throw invalidClient(`The wallet attestation PoP typ must be ${POP_TYP}`);
        }
        const alg = allowedAlg(header.alg, 'wallet attestation PoP');
        const claims = await verifiedClaims(jwt, attestation.cnfKey, alg, 'wallet attestation PoP', 'the attestation\'s cnf key');
        const { iss, aud, iat, exp, nbf, jti, challenge } = claims;
        // Drafts up to -07 require iss (the client_id), later ones dropped it: when present it must be the client_id.
        if (iss !== undefined && iss !== attestation.clientId) {
            throw invalidClient('The wallet attestation PoP iss is not the attestation\'s sub');
        }
        // One audience: the draft has the client make a PoP per target.
        const audience = Array.isArray(aud) && aud.length === 1 ? aud[0] : aud;
        if (audience !== issuer) {
            throw invalidClient(`The wallet attestation PoP aud must be this issuer (${issuer})`);
        }
        if (!isNumericDate(iat)) {
            throw invalidClient('The wallet attestation PoP has no iat');
        }
        if (iat > now + this.skewSeconds) {
            throw invalidClient('The wallet attestation PoP iat is in the future');
        }
        if (now - iat > this.popMaxAgeSeconds) {
            throw invalidClient('The wallet attestation PoP is too old (iat)');
        }
        if (exp !== undefined && (!isNumericDate(exp) || exp <= now - this.skewSeconds)) {
            throw invalidClient('The wallet attestation PoP has expired');
        }
        if (nbf !== undefined && (!isNumericDate(nbf) || nbf > now + this.skewSeconds)) {
            throw invalidClient('The wallet attestation PoP is not valid yet (nbf)');
        }
        if (typeof jti !== 'string' || !jti.length) {
            throw invalidClient('The wallet attestation PoP has no jti');
        }
        if (jti.length > MAX_JTI_LENGTH || CONTROL_CHARACTER.test(jti)) {
            throw invalidClient(`The wallet attestation PoP jti must be at most ${MAX_JTI_LENGTH} characters without control characters`);
        }
        if (challenge === undefined) {
            if (this.requireChallenge) {
                throw await this.challengeError(tenantId, 'The wallet attestation PoP must carry a challenge from the challenge endpoint');
            }
            return { jti };
        }
        // Only values this service could have issued reach the store.
        if (typeof challenge !== 'string' || !CHALLENGE_PATTERN.test(challenge)) {
            throw await this.challengeError(tenantId, 'The wallet attestation PoP challenge was not issued by this issuer');
        }
        return { jti, challenge };
    }

    /** use_attestation_challenge with a fresh challenge to retry with (draft sections 6.1 and 7.4). */
    private async challengeError(tenantId: string, description: string): Promise<OAuthError> {
        return new OAuthError(400, 'use_attestation_challenge', description, { [CLIENT_ATTESTATION_CHALLENGE_HEADER]: await this.challenge(tenantId) });
    }
}

/** Exactly one header value that is a compact JWS of at most `maxLength` characters. */
const singleHeader = (headers: ClientAttestationInput['headers'], name: string, display: string, maxLength: number): string => {
    const value: unknown = headers[name];
    if (value === undefined || value === '') {
        throw invalidClient(`The ${display} header is required`);
    }
    // Node joins a repeated header with ', ' (a JWS has no comma); other callers may pass an array.
    if (typeof value !== 'string' || value.includes(',')) {
        throw invalidClient(`Exactly one ${display} header is allowed`);
    }
    if (value.length > maxLength) {
        throw invalidClient(`The ${display} header is too large`);
    }
    if (!COMPACT_JWS.test(value)) {
        throw invalidClient(`The ${display} header is not a compact JWT`);
    }
    return value;
};

const protectedHeader = (jwt: string, what: string): Jose.ProtectedHeaderParameters => {
    try {
        return Jose.decodeProtectedHeader(jwt);
    }
    catch {
        throw invalidClient(`The ${what} header is not a JSON object`);
    }
};

const allowedAlg = (alg: unknown, what: string): string => {
    if (typeof alg !== 'string' || !CLIENT_ATTESTATION_ALGORITHMS.includes(alg)) {
        throw invalidClient(`The ${what} alg must be one of ${CLIENT_ATTESTATION_ALGORITHMS.join(', ')}`);
    }
    return alg;
};

/** The JWS's claims once its signature verifies with `key` under `alg`. */
const verifiedClaims = (jwt: string, key: Crypto.KeyObject, alg: string, what: string, keyName: string): Promise<Record<string, unknown>> =>
    verifiedClaimsOf(jwt, key, alg, what, keyName, invalidClient);
