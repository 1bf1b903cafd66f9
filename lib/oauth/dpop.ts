import Crypto from 'node:crypto';
import * as Jose from 'jose';
import type { JWK } from 'jose';
import { jwkThumbprintSync, jwsPayload, verifyEcdsaJws } from '../crypto/jws';
import type { SingleUseStore } from '../db/single-use';
import { OAuthError } from '../errors';
import { ecPublicKey } from '../crypto/public-keys';

/**
 * DPoP proof verification (RFC 9449). A proof is a JWS signed by the client's key, whose public JWK it embeds; the
 * key's RFC 7638 thumbprint (`jkt`) is what access tokens get bound to (`cnf.jkt`). Proof ids are claimed once in the
 * single-use store, so a proof is accepted at most once across replicas. Server nonces are stateless: a timestamp and
 * its HMAC, so any replica sharing the secret can check one without a database round trip.
 */

export interface DpopOptions {
    /** Accepted signature algorithms (default ['ES256']; HAIP). */
    algorithms?: string[];
    /** Max age and future skew of iat, seconds (default 60 and 5). */
    maxAgeSeconds?: number;
    skewSeconds?: number;
    /** When set, proofs must carry a server nonce; nonces are derived statelessly. */
    nonceSecret?: Buffer;
    /** How long a server nonce stays valid, seconds (default 300). */
    nonceLifetimeSeconds?: number;
}

export interface DpopProofInput {
    tenantId: string;
    /** The DPoP header value, as received. */
    proof: string | undefined;
    /** The request's method and full public URL as the client addressed it. */
    method: string;
    url: string;
    /** On resource requests: the access token the proof must be bound to (`ath`). */
    accessToken?: string;
    requireNonce?: boolean;
}

export interface VerifiedDpop {
    jkt: string;
    jwk: JWK;
}

const DEFAULT_ALGORITHMS = ['ES256'];
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k', 'oth', 'priv'];
const MAX_PROOF_LENGTH = 8192;
// single_use_values.key is 255 characters: 'dpop:' + 43 (thumbprint) + ':' leaves 206 for the jti.
const MAX_JTI_LENGTH = 200;
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const NONCE_TIME_BYTES = 8;
const NONCE_MAC_BYTES = 16;
const NONCE_PATTERN = /^[A-Za-z0-9_-]{32}$/;         // 24 bytes, base64url without padding
const MIN_NONCE_SECRET_BYTES = 16;

const invalid = (description: string) => new OAuthError(400, 'invalid_dpop_proof', description);

const isObject = (value: unknown): value is Record<string, unknown> =>
    typeof value === 'object' && value !== null && !Array.isArray(value);

const isSymmetricOrNone = (alg: string) => alg === 'none' || /^HS\d+$/i.test(alg);

/** RFC 7638 SHA-256 thumbprint (node:crypto, synchronous underneath; jose's goes through WebCrypto). */
export const jwkThumbprint = async (jwk: JWK): Promise<string> => jwkThumbprintSync(jwk as Record<string, unknown>);

const UNRESERVED = /[A-Za-z0-9\-._~]/;

/** RFC 3986 6.2.2 for a path: uppercase percent-encoding hex digits and decode percent-encoded unreserved characters. */
const normalisePath = (path: string): string =>
    path.replace(/%([0-9A-Fa-f]{2})/g, (_match, hex: string) => {
        const ch = String.fromCharCode(parseInt(hex, 16));
        return UNRESERVED.test(ch) ? ch : `%${hex.toUpperCase()}`;
    });

/**
 * Scheme, host and path of an http(s) URL with query and fragment dropped, scheme and host lowercased, the default
 * port removed, and dot segments and percent-encoding normalised; undefined when it is not an absolute http(s) URL.
 */
export const normaliseHtu = (value: string): string | undefined => {
    let url: URL;
    try {
        url = new URL(value);
    }
    catch {
        return undefined;
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') {
        return undefined;
    }
    // `origin` is lowercase and omits the scheme's default port; WHATWG parsing already removed dot segments.
    return `${url.origin}${normalisePath(url.pathname)}`;
};

export class DpopVerifier {
    private readonly algorithms: string[];
    private readonly maxAgeSeconds: number;
    private readonly skewSeconds: number;
    private readonly nonceSecret?: Buffer;
    private readonly nonceLifetimeSeconds: number;

    constructor(private readonly store: SingleUseStore, options: DpopOptions = {}) {
        this.algorithms = [...(options.algorithms ?? DEFAULT_ALGORITHMS)];
        if (this.algorithms.length === 0) {
            throw new Error('DPoP needs at least one accepted algorithm');
        }
        const symmetric = this.algorithms.find(isSymmetricOrNone);
        if (symmetric) {
            throw new Error(`DPoP proofs must use an asymmetric algorithm, not ${symmetric}`);
        }
        this.maxAgeSeconds = options.maxAgeSeconds ?? 60;
        this.skewSeconds = options.skewSeconds ?? 5;
        this.nonceLifetimeSeconds = options.nonceLifetimeSeconds ?? 300;
        for (const [name, value] of [['maxAgeSeconds', this.maxAgeSeconds], ['skewSeconds', this.skewSeconds], ['nonceLifetimeSeconds', this.nonceLifetimeSeconds]] as const) {
            if (!Number.isFinite(value) || value < 0) {
                throw new Error(`DPoP ${name} must be a non-negative number`);
            }
        }
        if (options.nonceSecret !== undefined && options.nonceSecret.length < MIN_NONCE_SECRET_BYTES) {
            throw new Error(`The DPoP nonce secret must be at least ${MIN_NONCE_SECRET_BYTES} bytes`);
        }
        this.nonceSecret = options.nonceSecret;
    }

    /** A fresh DPoP-Nonce value: base64url(timestamp in ms, 8 bytes big-endian || first 16 bytes of its HMAC-SHA256). */
    nonce(): string {
        const time = Buffer.alloc(NONCE_TIME_BYTES);
        time.writeBigUInt64BE(BigInt(Date.now()));
        return Buffer.concat([time, this.nonceMac(time)]).toString('base64url');
    }

    private nonceMac(time: Buffer): Buffer {
        if (!this.nonceSecret) {
            throw new Error('DPoP nonces need a nonce secret');
        }
        return Crypto.createHmac('sha256', this.nonceSecret).update(time).digest().subarray(0, NONCE_MAC_BYTES);
    }

    private nonceIsValid(value: unknown): boolean {
        if (typeof value !== 'string' || !NONCE_PATTERN.test(value)) {
            return false;
        }
        const raw = Buffer.from(value, 'base64url');
        if (raw.length !== NONCE_TIME_BYTES + NONCE_MAC_BYTES || raw.toString('base64url') !== value) {
            return false;
        }
        const time = raw.subarray(0, NONCE_TIME_BYTES);
        if (!Crypto.timingSafeEqual(this.nonceMac(time), raw.subarray(NONCE_TIME_BYTES))) {
            return false;
        }
        const age = Date.now() - Number(time.readBigUInt64BE());
        return age <= this.nonceLifetimeSeconds * 1000 && age >= -this.skewSeconds * 1000;
    }

    private nonceError(description: string): OAuthError {
        return new OAuthError(400, 'use_dpop_nonce', description, { 'DPoP-Nonce': this.nonce() });
    }

    async verify(input: DpopProofInput): Promise<VerifiedDpop> {
        if (input.requireNonce && !this.nonceSecret) {
            throw new Error('DPoP nonces are required but no nonce secret is configured');
        }
        const expectedHtu = normaliseHtu(input.url);
        if (expectedHtu === undefined) {
            throw new TypeError('The request URL for DPoP verification must be an absolute http(s) URL');
        }

        // Exactly one header value: Node joins repeated headers with ', ', other callers may pass an array.
        const proof: unknown = input.proof;
        if (proof === undefined || proof === '') {
            throw invalid('Missing DPoP proof');
        }
        if (typeof proof !== 'string' || proof.includes(',')) {
            throw invalid('Expected exactly one DPoP proof');
        }
        if (proof.length > MAX_PROOF_LENGTH || !COMPACT_JWS.test(proof)) {
            throw invalid('DPoP proof is not a compact JWS');
        }

        let header: Jose.ProtectedHeaderParameters;
        try {
            header = Jose.decodeProtectedHeader(proof);
        }
        catch {
            throw invalid('DPoP proof header is malformed');
        }
        if (typeof header.typ !== 'string' || header.typ.toLowerCase() !== 'dpop+jwt') {
            throw invalid('DPoP proof typ must be dpop+jwt');
        }
        if (typeof header.alg !== 'string' || isSymmetricOrNone(header.alg) || !this.algorithms.includes(header.alg)) {
            throw invalid('DPoP proof alg is not allowed');
        }
        const jwk: unknown = header.jwk;
        if (!isObject(jwk) || typeof jwk.kty !== 'string') {
            throw invalid('DPoP proof jwk is missing or malformed');
        }
        if (PRIVATE_MEMBERS.some((m) => m in jwk)) {
            throw invalid('DPoP proof jwk must not contain private key members');
        }

        let payloadBytes: Uint8Array;
        // ECDSA (every proof a HAIP wallet sends) on node:crypto; anything else through jose.
        let key: Crypto.KeyObject | undefined;
        try {
            key = jwk.kty === 'EC' ? ecPublicKey(jwk) : undefined;
        }
        catch {
            throw invalid('DPoP proof jwk does not fit its alg or cannot verify it');
        }
        const check = key && await verifyEcdsaJws(proof, header as Record<string, unknown>, key, header.alg);
        if (check) {
            if (check === 'unfit') {
                throw invalid('DPoP proof jwk does not fit its alg or cannot verify it');
            }
            if (check === 'invalid') {
                throw invalid('DPoP proof signature is invalid');
            }
            payloadBytes = jwsPayload(proof);
        }
        else {
            try {
                ({ payload: payloadBytes } = await Jose.compactVerify(proof, Jose.EmbeddedJWK, { algorithms: this.algorithms }));
            }
            catch (err) {
                if (err instanceof Jose.errors.JWSSignatureVerificationFailed) {
                    throw invalid('DPoP proof signature is invalid');
                }
                throw invalid('DPoP proof jwk does not fit its alg or cannot verify it');
            }
        }

        let claims: unknown;
        try {
            claims = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(payloadBytes));
        }
        catch {
            throw invalid('DPoP proof payload is not JSON');
        }
        if (!isObject(claims)) {
            throw invalid('DPoP proof payload is not a JSON object');
        }
        const { jti, htm, htu, iat } = claims;
        if (typeof jti !== 'string' || jti.length === 0) {
            throw invalid('DPoP proof jti is missing');
        }
        if (jti.length > MAX_JTI_LENGTH) {
            throw invalid('DPoP proof jti is too long');
        }
        // Stored as a single-use key: a control character (NUL above all) is refused here, as in every other input.
        if (CONTROL_CHARACTER.test(jti)) {
            throw invalid('DPoP proof jti must not contain control characters');
        }
        if (typeof htm !== 'string' || htm.length === 0) {
            throw invalid('DPoP proof htm is missing');
        }
        if (typeof htu !== 'string' || htu.length === 0) {
            throw invalid('DPoP proof htu is missing');
        }
        if (typeof iat !== 'number' || !Number.isFinite(iat)) {
            throw invalid('DPoP proof iat is missing');
        }

        if (htm !== input.method.toUpperCase()) {
            throw invalid('DPoP proof htm does not match the request method');
        }
        if (normaliseHtu(htu) !== expectedHtu) {
            throw invalid('DPoP proof htu does not match the request URL');
        }
        const now = Date.now() / 1000;
        if (iat > now + this.skewSeconds) {
            throw invalid('DPoP proof iat is in the future');
        }
        if (now - iat > this.maxAgeSeconds) {
            throw invalid('DPoP proof is too old');
        }
        if (input.accessToken !== undefined) {
            const expected = Crypto.createHash('sha256').update(input.accessToken, 'ascii').digest('base64url');
            if (claims.ath === undefined) {
                throw invalid('DPoP proof ath is missing');
            }
            if (claims.ath !== expected) {
                throw invalid('DPoP proof ath does not match the access token');
            }
        }
        if (input.requireNonce) {
            if (claims.nonce === undefined) {
                throw this.nonceError('DPoP proof must carry a server nonce');
            }
            if (!this.nonceIsValid(claims.nonce)) {
                throw this.nonceError('DPoP proof nonce is invalid or expired');
            }
        }

        // Claimed last, so proofs that fail any other check do not fill the store.
        const publicJwk = jwk as JWK;
        const jkt = await jwkThumbprint(publicJwk);
        if (!await this.store.claim(input.tenantId, `dpop:${jkt}:${jti}`, this.maxAgeSeconds + this.skewSeconds)) {
            throw invalid('DPoP proof has already been used');
        }
        return { jkt, jwk: publicJwk };
    }
}
