import Crypto from 'node:crypto';
import * as Jose from 'jose';
import type { SingleUseStore } from '../../../lib/db/single-use';
import { OAuthError } from '../../../lib/errors';
import { PROOF_TYPES, type KeyAttestationsRequired, type ProofType } from '../../../resources/credential-config';
import { isObject, verifiedClaims, walletProviderKey, type WalletProviderTrust } from './wallet-provider-trust';
import { ecPublicKey } from '../../../lib/crypto/public-keys';
import { verifyOffLoop } from '../../../lib/crypto/thread-pool';

/**
 * Proofs of the credential request (OpenID4VCI 1.0 section 8.2 and appendix F, HAIP 1.0 Annex D): which keys the
 * credentials are bound to.
 *
 * - `jwt`: a proof JWT signed by the holder key, which it carries as `jwk`. With a `key_attestation` header (a key
 *   attestation, see below) the proof is signed by one of the attested keys (named by `jwk`, or by `kid`: an attested
 *   key's kid or its index), and every attested key gets a credential.
 * - `attestation`: one key attestation alone, without proof of possession; its `nonce` is the c_nonce, and every
 *   attested key gets a credential.
 *
 * A key attestation (`typ: key-attestation+jwt`, ES256) is signed by a wallet provider: its x5c must chain to a
 * `wallet-provider` trust list entry of the tenant, without that anchor, from a leaf that is not self-signed. It
 * carries `iat`, `exp` and `attested_keys` (public EC P-256 JWKs), and may carry `key_storage` and
 * `user_authentication`, which the configuration's `keyAttestationsRequired` checks: each list it names must share
 * a value with the attestation's. With `keyAttestationsRequired` every key a credential is bound to must be
 * attested. A proof type outside the configuration's `proofTypesSupported` is refused.
 *
 * The c_nonce of the proofs is single use. Failures answer `invalid_proof`, nonce failures `invalid_nonce`, a
 * malformed `proof`/`proofs` member `invalid_credential_request`.
 */

export const C_NONCE_TTL_SECONDS = 300;
const PROOF_MAX_AGE_SECONDS = 300;
const PROOF_FUTURE_SKEW_SECONDS = 60;
/** Allowed clock difference for a key attestation's iat, exp and nbf. */
const ATTESTATION_SKEW_SECONDS = 30;

export const KEY_ATTESTATION_TYP = 'key-attestation+jwt';
const PROOF_TYP = 'openid4vci-proof+jwt';
/** The one algorithm of proofs and key attestations, as the metadata publishes it (HAIP: ES256). */
export const PROOF_SIGNING_ALGORITHMS: readonly string[] = ['ES256'];

// A key attestation with an x5c of up to MAX_CHAIN_LENGTH certificates fits, and a proof JWT carrying one.
const MAX_PROOF_LENGTH = 65_536;
/** More keys than any batch: a larger attestation is refused before its keys are parsed. */
const MAX_ATTESTED_KEYS = 100;
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k', 'oth', 'priv'];

const nonceKey = (nonce: string) => `c_nonce:${nonce}`;
/** The shape of the nonces this service issues (24 random bytes, base64url): anything else was never issued. */
const ISSUED_NONCE = /^[A-Za-z0-9_-]{32}$/;

const invalidProof = (description: string) => new OAuthError(400, 'invalid_proof', description);
const invalidRequest = (description: string) => new OAuthError(400, 'invalid_credential_request', description);
const invalidNonce = (description: string) => new OAuthError(400, 'invalid_nonce', description);

/** The proof members of a credential request, as the wallet sent them (any JSON). */
export interface ProofRequest {
    proof?: unknown;
    proofs?: unknown;
}

/** What the credential configuration asks of proofs. */
export interface ProofPolicy {
    /** Accepted proof types; absent: both. */
    proofTypesSupported?: readonly ProofType[];
    keyAttestationsRequired?: KeyAttestationsRequired;
    /** At most this many proofs, and credentials. */
    batchSize: number;
}

interface KeyAttestation {
    keys: Jose.JWK[];
    /** The raw attested keys, for a proof that names its key by kid. */
    raw: Array<Record<string, unknown>>;
    nonce?: string;
    keyStorage?: string[];
    userAuthentication?: string[];
}

interface VerifiedProof {
    keys: Jose.JWK[];
    nonce: string;
    attestation?: KeyAttestation;
}

export class ProofVerifier {
    constructor(private readonly deps: { publicUrl: string; singleUse: SingleUseStore; trust: WalletProviderTrust }) {}

    /** A fresh c_nonce for the tenant's proofs, usable once within C_NONCE_TTL_SECONDS. */
    async nonce(tenantId: string): Promise<string> {
        const nonce = Crypto.randomBytes(24).toString('base64url');
        await this.deps.singleUse.issue(tenantId, nonceKey(nonce), C_NONCE_TTL_SECONDS);
        return nonce;
    }

    /**
     * The keys the credentials are bound to, one per distinct key and at most batchSize, in the order the proofs
     * name them. `audience` is the credential issuer identifier. The proofs' nonce is consumed once.
     */
    async holderKeys(tenantId: string, audience: string, body: ProofRequest, policy: ProofPolicy): Promise<Jose.JWK[]> {
        const { type, values } = proofsOf(body);
        if (!(policy.proofTypesSupported ?? PROOF_TYPES).includes(type)) {
            throw invalidProof(`This credential configuration does not accept the ${type} proof type`);
        }
        if (type === 'jwt' && values.length > policy.batchSize) {
            throw invalidRequest(`At most ${policy.batchSize} proofs may be sent`);
        }
        if (type === 'attestation' && values.length !== 1) {
            throw invalidRequest('The attestation proof type takes exactly one key attestation');
        }
        const now = Date.now() / 1000;
        const verified = type === 'jwt'
            ? await Promise.all(values.map((jwt) => this.verifyJwtProof(tenantId, jwt, audience, now)))
            : [await this.attestationProof(tenantId, values[0]!, now)];
        const required = policy.keyAttestationsRequired;
        if (required) {
            for (const { attestation } of verified) {
                if (!attestation) {
                    throw invalidProof('This credential configuration requires a key attestation (key_attestation header of the proof)');
                }
                meetsRequirement(attestation, required);
            }
        }
        for (const nonce of new Set(verified.map((v) => v.nonce))) {
            if (!ISSUED_NONCE.test(nonce) || !(await this.deps.singleUse.consume(tenantId, nonceKey(nonce)))) {
                throw invalidNonce('The proof nonce is unknown, expired or already used; get a fresh one from the nonce endpoint');
            }
        }
        const distinct = new Map<string, Jose.JWK>();
        for (const key of verified.flatMap((v) => v.keys)) {
            distinct.set(`${key.x}.${key.y}`, key);
        }
        return [...distinct.values()].slice(0, policy.batchSize);
    }

    private async attestationProof(tenantId: string, jwt: string, now: number): Promise<VerifiedProof> {
        const attestation = await this.verifyKeyAttestation(tenantId, jwt, now);
        if (attestation.nonce === undefined) {
            throw invalidNonce('The key attestation must carry the c_nonce from the nonce endpoint as nonce');
        }
        return { keys: attestation.keys, nonce: attestation.nonce, attestation };
    }

    private async verifyJwtProof(tenantId: string, jwt: string, audience: string, now: number): Promise<VerifiedProof> {
        let header: Jose.ProtectedHeaderParameters;
        try {
            header = Jose.decodeProtectedHeader(jwt);
        }
        catch {
            throw invalidProof('The proof is not a JWT');
        }
        if (header.typ !== PROOF_TYP) {
            throw invalidProof(`The proof typ must be ${PROOF_TYP}`);
        }
        if (header.alg !== 'ES256') {
            throw invalidProof('The proof must be signed with ES256');
        }
        if (header.x5c !== undefined) {
            throw invalidProof('The proof must carry the holder key as jwk (x5c is not supported)');
        }
        const keyAttestationJwt: unknown = header.key_attestation;
        const attestation = keyAttestationJwt === undefined ? undefined : await this.verifyKeyAttestation(tenantId, keyAttestationJwt, now);
        const signer = attestation ? attestedSigner(header, attestation) : headerKey(header);

        // node:crypto directly: importing the key through WebCrypto cost more than the signature check itself.
        const [encodedHeader, encodedPayload, signature] = jwt.split('.');
        let payload: Jose.JWTPayload;
        try {
            const key = ecPublicKey({ crv: 'P-256', x: signer.x, y: signer.y });
            const valid = await verifyOffLoop('sha256', Buffer.from(`${encodedHeader}.${encodedPayload}`), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(signature ?? '', 'base64url'));
            payload = valid ? JSON.parse(Buffer.from(encodedPayload!, 'base64url').toString('utf8')) : undefined as never;
            if (!valid || !payload || typeof payload !== 'object') {
                throw new Error('bad signature');
            }
        }
        catch {
            throw invalidProof(attestation ? 'The proof signature does not verify with the attested key it names' : 'The proof signature is not valid');
        }
        const aud = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
        if (!aud.includes(audience)) {
            throw invalidProof('The proof audience must be the credential issuer');
        }
        const seconds = Math.floor(now);
        if (typeof payload.iat !== 'number' || payload.iat < seconds - PROOF_MAX_AGE_SECONDS || payload.iat > seconds + PROOF_FUTURE_SKEW_SECONDS) {
            throw invalidProof('The proof iat is missing or outside the accepted window');
        }
        if (typeof payload.nonce !== 'string') {
            throw invalidNonce('The proof must carry the c_nonce from the nonce endpoint');
        }
        // OpenID4VCI F.1: the attestation's nonce is a c_nonce too; one request consumes one, so it is the proof's.
        if (attestation?.nonce !== undefined && attestation.nonce !== payload.nonce) {
            throw invalidProof('The key attestation nonce is not the c_nonce of its proof');
        }
        return attestation ? { keys: attestation.keys, nonce: payload.nonce, attestation } : { keys: [signer], nonce: payload.nonce };
    }

    private async verifyKeyAttestation(tenantId: string, jwt: unknown, now: number): Promise<KeyAttestation> {
        if (typeof jwt !== 'string' || jwt.length > MAX_PROOF_LENGTH || !COMPACT_JWS.test(jwt)) {
            throw invalidProof('The key attestation must be a compact JWT');
        }
        let header: Jose.ProtectedHeaderParameters;
        try {
            header = Jose.decodeProtectedHeader(jwt);
        }
        catch {
            throw invalidProof('The key attestation header is not a JSON object');
        }
        if (typeof header.typ !== 'string' || header.typ.toLowerCase() !== KEY_ATTESTATION_TYP) {
            throw invalidProof(`The key attestation typ must be ${KEY_ATTESTATION_TYP}`);
        }
        if (typeof header.alg !== 'string' || !PROOF_SIGNING_ALGORITHMS.includes(header.alg)) {
            throw invalidProof(`The key attestation alg must be one of ${PROOF_SIGNING_ALGORITHMS.join(', ')}`);
        }
        const signingKey = await walletProviderKey(this.deps.trust, tenantId, header.x5c, new Date(now * 1000), 'key attestation', invalidProof);
        const claims = await verifiedClaims(jwt, signingKey, header.alg, 'key attestation', 'its x5c leaf certificate', invalidProof);

        const { iat, exp, nbf, nonce, attested_keys: attested, key_storage: keyStorage, user_authentication: userAuthentication } = claims;
        if (!isNumericDate(iat) || iat > now + ATTESTATION_SKEW_SECONDS) {
            throw invalidProof('The key attestation iat is missing or in the future');
        }
        if (!isNumericDate(exp)) {
            throw invalidProof('The key attestation has no exp');
        }
        if (exp <= now - ATTESTATION_SKEW_SECONDS) {
            throw invalidProof('The key attestation has expired');
        }
        if (nbf !== undefined && (!isNumericDate(nbf) || nbf > now + ATTESTATION_SKEW_SECONDS)) {
            throw invalidProof('The key attestation is not valid yet (nbf)');
        }
        if (nonce !== undefined && typeof nonce !== 'string') {
            throw invalidProof('The key attestation nonce must be a string');
        }
        if (!Array.isArray(attested) || !attested.length) {
            throw invalidProof('The key attestation has no attested_keys');
        }
        if (attested.length > MAX_ATTESTED_KEYS) {
            throw invalidProof(`The key attestation attests more than ${MAX_ATTESTED_KEYS} keys`);
        }
        const raw = attested.map((jwk, i) => {
            if (!isObject(jwk)) {
                throw invalidProof(`attested_keys[${i}] of the key attestation is not a JWK`);
            }
            return jwk;
        });
        return {
            keys: raw.map((jwk, i) => p256PublicKey(jwk, `attested_keys[${i}] of the key attestation`)),
            raw,
            ...(nonce !== undefined ? { nonce } : {}),
            ...(keyStorage !== undefined ? { keyStorage: levels(keyStorage, 'key_storage') } : {}),
            ...(userAuthentication !== undefined ? { userAuthentication: levels(userAuthentication, 'user_authentication') } : {})
        };
    }
}

/** The single proof type of the request and its values (proof: the legacy single form, still sent by wallets). */
const proofsOf = (body: ProofRequest): { type: ProofType; values: string[] } => {
    if (body.proof !== undefined && body.proofs !== undefined) {
        throw invalidRequest('Send either proof or proofs, not both');
    }
    let type: string;
    let values: unknown[];
    if (body.proofs !== undefined) {
        if (!isObject(body.proofs)) {
            throw invalidRequest('proofs must be an object');
        }
        const types = Object.keys(body.proofs);
        if (types.length > 1) {
            throw invalidRequest('proofs must hold exactly one proof type');
        }
        type = types[0] ?? 'jwt';
        const given = body.proofs[type] ?? [];
        if (!Array.isArray(given)) {
            throw invalidRequest(`proofs.${type} must be an array`);
        }
        values = given;
    }
    else if (body.proof !== undefined) {
        if (!isObject(body.proof) || typeof body.proof.proof_type !== 'string') {
            throw invalidRequest('proof must be an object with a proof_type');
        }
        type = body.proof.proof_type;
        values = body.proof[type] === undefined ? [] : [body.proof[type]];
    }
    else {
        type = 'jwt';
        values = [];
    }
    if (!(PROOF_TYPES as readonly string[]).includes(type)) {
        throw invalidProof(`The ${type.slice(0, 64)} proof type is not supported`);
    }
    if (!values.length) {
        throw invalidProof('A proof of possession of the holder key is required');
    }
    if (values.some((value) => typeof value !== 'string' || value.length > MAX_PROOF_LENGTH)) {
        throw invalidProof('Every proof must be a JWT string');
    }
    return { type: type as ProofType, values: values as string[] };
};

const isNumericDate = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);

/** A public EC P-256 JWK, reduced to its public members. */
const p256PublicKey = (jwk: Record<string, unknown>, what: string): Jose.JWK => {
    if (PRIVATE_MEMBERS.some((m) => m in jwk) || jwk.kty !== 'EC' || jwk.crv !== 'P-256' || typeof jwk.x !== 'string' || typeof jwk.y !== 'string') {
        throw invalidProof(`${what} must be a public EC P-256 key`);
    }
    const { kty, crv, x, y } = jwk;
    try {
        ecPublicKey({ crv, x, y });
    }
    catch {
        throw invalidProof(`${what} is not a point of P-256`);
    }
    return { kty, crv, x, y };
};

/** The holder key of a proof without key attestation: its jwk header (kid and x5c name no key this issuer knows). */
const headerKey = (header: Jose.ProtectedHeaderParameters): Jose.JWK => {
    // The header is the wallet's JSON: jwk may be any value, not only an object.
    const jwk: unknown = header.jwk;
    if (!isObject(jwk) || header.kid !== undefined) {
        throw invalidProof('The proof must carry the holder key as jwk (kid and x5c are not supported)');
    }
    return p256PublicKey(jwk, 'The proof jwk');
};

/** The attested key a proof with key_attestation is signed by: its jwk, or the one its kid names (kid or index). */
const attestedSigner = (header: Jose.ProtectedHeaderParameters, attestation: KeyAttestation): Jose.JWK => {
    const jwk: unknown = header.jwk;
    if (jwk !== undefined) {
        if (!isObject(jwk) || header.kid !== undefined) {
            throw invalidProof('The proof must name its key by jwk or by kid, not both');
        }
        const key = p256PublicKey(jwk, 'The proof jwk');
        if (!attestation.keys.some((k) => k.x === key.x && k.y === key.y)) {
            throw invalidProof('The proof jwk is not one of the keys of its key attestation');
        }
        return key;
    }
    const { kid } = header;
    if (typeof kid !== 'string') {
        throw invalidProof('The proof must name the attested key it is signed by, as jwk or kid');
    }
    const byKid = attestation.raw.findIndex((k) => k.kid === kid);
    const index = byKid >= 0 ? byKid : /^(0|[1-9][0-9]{0,2})$/.test(kid) ? Number(kid) : -1;
    const key = attestation.keys[index];
    if (!key) {
        throw invalidProof('The proof kid names no key of its key attestation');
    }
    return key;
};

/** key_storage or user_authentication: a non-empty array of strings (OpenID4VCI D.1). */
const levels = (value: unknown, name: string): string[] => {
    if (!Array.isArray(value) || !value.length || value.some((v) => typeof v !== 'string')) {
        throw invalidProof(`The key attestation ${name} must be a non-empty array of strings`);
    }
    return value as string[];
};

/** Each list the configuration names must share a value with the attestation's (OpenID4VCI key_attestations_required). */
const meetsRequirement = (attestation: KeyAttestation, required: KeyAttestationsRequired): void => {
    for (const [name, accepted, asserted] of [
        ['key_storage', required.key_storage, attestation.keyStorage],
        ['user_authentication', required.user_authentication, attestation.userAuthentication]
    ] as const) {
        if (accepted?.length && !asserted?.some((value) => accepted.includes(value))) {
            throw invalidProof(`The key attestation's ${name} does not meet this credential's requirement (one of: ${accepted.join(', ')})`);
        }
    }
};
