import Crypto from 'node:crypto';
import * as Jose from 'jose';
import { VerificationFailure } from './failures';
import { statusReferenceOf, type StatusReference } from './status-list';
import { verifyCertificateChain, type TrustAnchor } from './trust';
import { ecPublicKey } from '../crypto/public-keys';
import { verifyOffLoop } from '../crypto/thread-pool';

/**
 * Verifier side of SD-JWT VC presentations (IETF SD-JWT, SD-JWT VC; OpenID4VP 1.0 B.3; HAIP 1.0):
 * `<issuer-signed JWT>~<disclosure>~...~<disclosure>~<KB-JWT or nothing>`.
 *
 * Failure codes (spec 7.2) chosen here:
 * - issuer JWT: x5c absent → x5c_missing; chain problems → the codes of `verifyCertificateChain`; signature does
 *   not verify with the x5c leaf → signature_invalid;
 * - malformed SD-JWT, wrong typ (dc+sd-jwt; the pre-2025 vc+sd-jwt is accepted for wallets on older drafts), alg
 *   other than ES256 (HAIP), _sd_alg other than sha-256, credential expired / not yet valid / issued in the future
 *   (exp, nbf, iat with `skewSeconds`), a disclosure that is malformed, unreferenced, presented twice or referenced
 *   twice, a disclosed claim that already exists or must not be selectively disclosable (iss, nbf, exp, cnf, vct,
 *   vct#integrity, status), a status.status_list without an integer idx and an http(s) uri → verification_error;
 * - KB-JWT signature does not verify with cnf.jwk → signature_invalid;
 * - every other key binding problem (KB-JWT missing although cnf is present, KB-JWT without cnf, wrong typ/alg,
 *   nonce, aud, iat out of [now - kbMaxAge - skew, now + skew], sd_hash) → no code, message
 *   "Presentation validation failed: invalid key binding (<reason>)";
 * - transaction_data_hashes not matching → no code, "Presentation validation failed: transaction data hash mismatch".
 */

export interface SdJwtPresentationInput {
    /** The compact SD-JWT presentation as received in the vp_token. */
    presentation: string;
    /** Expected KB-JWT `aud`: the client_id of the request (with its prefix). */
    clientId: string;
    /** Expected KB-JWT `nonce`: the nonce of the request. */
    nonce: string;
    now: Date;
    skewSeconds: number;
    anchors: TrustAnchor[];
    /** base64url SHA-256 hashes of the request's transaction_data entries; when non-empty the KB-JWT must carry them. */
    transactionDataHashes?: string[];
    /** Oldest accepted KB-JWT iat, in seconds before `now` (default 300). */
    kbMaxAgeSeconds?: number;
}

export interface SdJwtPresentationResult {
    /** The issuer-signed payload with the presented disclosures applied; `_sd`, `_sd_alg` and `...` removed. */
    claims: Record<string, unknown>;
    vct?: string;
    issuer?: string;
    /** A KB-JWT was presented and verified against cnf.jwk. */
    keyBound: boolean;
    /** The trust anchor the issuer's x5c chain ended at (a status list token must end at the same one). */
    issuerAnchor: TrustAnchor;
    /** `status.status_list` of the payload; checking it is the caller's business (lib/verify/status-list). */
    statusReference?: StatusReference;
}

export const SD_JWT_VC_TYPES = ['dc+sd-jwt', 'vc+sd-jwt'] as const;
const ALG = 'ES256';
const KB_TYP = 'kb+jwt';
const DEFAULT_KB_MAX_AGE_SECONDS = 300;
/** SD-JWT VC: these claims must not be selectively disclosed. */
const NEVER_DISCLOSED = new Set(['iss', 'nbf', 'exp', 'cnf', 'vct', 'vct#integrity', 'status']);
const BASE64URL = /^[A-Za-z0-9_-]+$/;

const error = (detail: string) => VerificationFailure.coded('verification_error', detail);
const keyBinding = (reason: string) => VerificationFailure.presentation(`invalid key binding (${reason})`);

const sha256 = (data: string) => Crypto.createHash('sha256').update(data, 'ascii').digest('base64url');

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

const jsonPart = (part: string, what: string): Record<string, unknown> => {
    if (!BASE64URL.test(part)) {
        throw error(`${what} is not base64url`);
    }
    let value: unknown;
    try {
        value = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    }
    catch {
        throw error(`${what} is not JSON`);
    }
    if (!isObject(value)) {
        throw error(`${what} is not a JSON object`);
    }
    return value;
};

interface Disclosure {
    digest: string;
    salt: string;
    /** Present for object properties, absent for array elements. */
    name?: string;
    value: unknown;
    used: boolean;
}

const parseDisclosure = (encoded: string, index: number): Disclosure => {
    if (!BASE64URL.test(encoded)) {
        throw error(`disclosure ${index} is not base64url`);
    }
    let decoded: unknown;
    try {
        decoded = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8'));
    }
    catch {
        throw error(`disclosure ${index} is not JSON`);
    }
    if (!Array.isArray(decoded) || (decoded.length !== 2 && decoded.length !== 3) || typeof decoded[0] !== 'string') {
        throw error(`disclosure ${index} is not [salt, (name,) value]`);
    }
    if (decoded.length === 3) {
        const name = decoded[1];
        if (typeof name !== 'string' || name === '_sd' || name === '...') {
            throw error(`disclosure ${index} has an invalid claim name`);
        }
        return { digest: sha256(encoded), salt: decoded[0], name, value: decoded[2], used: false };
    }
    return { digest: sha256(encoded), salt: decoded[0], value: decoded[1], used: false };
};

/**
 * Rebuilds the disclosed claims. Every digest reachable from the payload (`_sd` members and `{"...": digest}` array
 * elements, also inside disclosed values) may appear only once; a digest without a presented disclosure is an
 * undisclosed claim or a decoy and is dropped. Every presented disclosure must be used exactly once.
 */
class Reconstruction {
    private readonly seen = new Set<string>();

    constructor(private readonly disclosures: Map<string, Disclosure>) {}

    private take(digest: unknown, kind: 'object' | 'array'): Disclosure | undefined {
        if (typeof digest !== 'string') {
            throw error('a digest is not a string');
        }
        if (this.seen.has(digest)) {
            throw error('a digest is referenced more than once');
        }
        this.seen.add(digest);
        const disclosure = this.disclosures.get(digest);
        if (!disclosure) {
            return undefined;
        }
        if ((kind === 'object') !== (disclosure.name !== undefined)) {
            throw error(`an ${kind === 'object' ? 'object property' : 'array element'} digest references a disclosure of the other kind`);
        }
        disclosure.used = true;
        return disclosure;
    }

    value(value: unknown, depth: number): unknown {
        if (depth > 64) {
            throw error('claims nested too deeply');
        }
        if (Array.isArray(value)) {
            const result: unknown[] = [];
            for (const element of value) {
                if (isObject(element) && '...' in element) {
                    if (Object.keys(element).length !== 1) {
                        throw error('an array element digest object has other members');
                    }
                    const disclosure = this.take(element['...'], 'array');
                    if (disclosure) {
                        result.push(this.value(disclosure.value, depth + 1));
                    }
                }
                else {
                    result.push(this.value(element, depth + 1));
                }
            }
            return result;
        }
        if (isObject(value)) {
            return this.object(value, depth, false);
        }
        return value;
    }

    object(value: Record<string, unknown>, depth: number, topLevel: boolean): Record<string, unknown> {
        const result: Record<string, unknown> = {};
        for (const [key, member] of Object.entries(value)) {
            if (key === '_sd' || (topLevel && key === '_sd_alg')) {
                continue;
            }
            result[key] = this.value(member, depth + 1);
        }
        const digests = value._sd;
        if (digests === undefined) {
            return result;
        }
        if (!Array.isArray(digests)) {
            throw error('_sd is not an array');
        }
        for (const digest of digests) {
            const disclosure = this.take(digest, 'object');
            if (!disclosure) {
                continue;
            }
            const name = disclosure.name!;
            if (Object.prototype.hasOwnProperty.call(result, name)) {
                throw error(`disclosed claim "${name}" already exists`);
            }
            if (topLevel && NEVER_DISCLOSED.has(name)) {
                throw error(`claim "${name}" must not be selectively disclosed`);
            }
            result[name] = this.value(disclosure.value, depth + 1);
        }
        return result;
    }
}

const numericDate = (payload: Record<string, unknown>, claim: string): number | undefined => {
    const value = payload[claim];
    if (value === undefined) {
        return undefined;
    }
    if (typeof value !== 'number' || !Number.isFinite(value)) {
        throw error(`${claim} is not a NumericDate`);
    }
    return value;
};

/** ES256 compact JWS on node:crypto (WebCrypto key imports cost more than the check itself). */
const verifySignature = async (jws: string, key: Jose.CryptoKey | Crypto.KeyObject, what: string): Promise<Uint8Array> => {
    const parts = jws.split('.');
    if (parts.length !== 3 || !parts[0] || !parts[1]) {
        throw error(`${what} is not a valid JWS: it needs three parts`);
    }
    let header: { alg?: unknown };
    try {
        header = JSON.parse(Buffer.from(parts[0], 'base64url').toString('utf8'));
    }
    catch {
        throw error(`${what} is not a valid JWS: its header is not JSON`);
    }
    if (header.alg !== ALG) {
        throw error(`${what} is not a valid JWS: alg must be ${ALG}`);
    }
    const keyObject = key instanceof Crypto.KeyObject ? key : Crypto.KeyObject.from(key as unknown as Crypto.webcrypto.CryptoKey);
    const signature = Buffer.from(parts[2]!, 'base64url');
    if (signature.length !== 64 || !await verifyOffLoop('sha256', Buffer.from(`${parts[0]}.${parts[1]}`, 'ascii'), { key: keyObject, dsaEncoding: 'ieee-p1363' }, signature)) {
        throw VerificationFailure.coded('signature_invalid', `${what} signature does not verify`);
    }
    return Buffer.from(parts[1], 'base64url');
};

const sameHashes = (presented: unknown, expected: string[]): boolean => {
    if (!Array.isArray(presented) || presented.length !== expected.length || !presented.every((h) => typeof h === 'string')) {
        return false;
    }
    const a = [...presented as string[]].sort();
    const b = [...expected].sort();
    return a.every((h, i) => h === b[i]);
};

/** Verifies an SD-JWT VC presentation; see the module comment for the checks and their failure codes. */
export const verifySdJwtPresentation = async (input: SdJwtPresentationInput): Promise<SdJwtPresentationResult> => {
    try {
        return await verify(input);
    }
    catch (cause) {
        if (cause instanceof VerificationFailure) {
            throw cause;
        }
        throw error(`unexpected: ${(cause as Error)?.message ?? String(cause)}`);
    }
};

const verify = async (input: SdJwtPresentationInput): Promise<SdJwtPresentationResult> => {
    const { presentation, now, skewSeconds } = input;
    if (typeof presentation !== 'string' || !presentation.includes('~')) {
        throw error('not an SD-JWT (no ~ separator)');
    }
    const parts = presentation.split('~');
    const issuerJwt = parts[0]!;
    const kbJwt = parts[parts.length - 1]!;
    const encodedDisclosures = parts.slice(1, -1);

    // Issuer-signed JWT: header, trust chain, signature.
    const segments = issuerJwt.split('.');
    if (segments.length !== 3) {
        throw error('the issuer-signed JWT is not a compact JWS');
    }
    const header = jsonPart(segments[0]!, 'the issuer JWT header');
    if (!SD_JWT_VC_TYPES.includes(header.typ as typeof SD_JWT_VC_TYPES[number])) {
        throw error(`unexpected typ ${String(header.typ)}`);
    }
    if (header.alg !== ALG) {
        throw error(`unsupported alg ${String(header.alg)}`);
    }
    if (header.x5c === undefined || header.x5c === null || (Array.isArray(header.x5c) && !header.x5c.length)) {
        throw VerificationFailure.coded('x5c_missing', 'the issuer JWT has no x5c header');
    }
    if (!Array.isArray(header.x5c)) {
        throw error('x5c is not an array');
    }
    const { leafPublicKey, anchor } = await verifyCertificateChain(header.x5c as string[], input.anchors, now);
    const payloadBytes = await verifySignature(issuerJwt, leafPublicKey, 'issuer JWT');
    let payload: unknown;
    try {
        payload = JSON.parse(Buffer.from(payloadBytes).toString('utf8'));
    }
    catch {
        throw error('the issuer JWT payload is not JSON');
    }
    if (!isObject(payload)) {
        throw error('the issuer JWT payload is not an object');
    }

    // Validity.
    const nowSeconds = now.getTime() / 1000;
    const exp = numericDate(payload, 'exp');
    const nbf = numericDate(payload, 'nbf');
    const iat = numericDate(payload, 'iat');
    if (exp !== undefined && nowSeconds > exp + skewSeconds) {
        throw error('the credential has expired (exp)');
    }
    if (nbf !== undefined && nowSeconds < nbf - skewSeconds) {
        throw error('the credential is not yet valid (nbf)');
    }
    if (iat !== undefined && iat > nowSeconds + skewSeconds) {
        throw error('the credential is issued in the future (iat)');
    }
    if (payload._sd_alg !== undefined && payload._sd_alg !== 'sha-256') {
        throw error(`unsupported _sd_alg ${String(payload._sd_alg)}`);
    }

    // Disclosures.
    const disclosures = new Map<string, Disclosure>();
    encodedDisclosures.forEach((encoded, index) => {
        if (!encoded) {
            throw error(`disclosure ${index} is empty`);
        }
        const disclosure = parseDisclosure(encoded, index);
        if (disclosures.has(disclosure.digest)) {
            throw error(`disclosure ${index} is presented more than once`);
        }
        disclosures.set(disclosure.digest, disclosure);
    });
    const claims = new Reconstruction(disclosures).object(payload, 0, true);
    const unused = [...disclosures.values()].filter((d) => !d.used).length;
    if (unused) {
        throw error(`${unused} disclosure(s) not referenced by the issuer-signed JWT`);
    }
    const issued = { anchor, statusReference: statusReferenceOf(claims.status) };

    // Key binding.
    const cnf = payload.cnf;
    const expectedTransactionData = input.transactionDataHashes?.length ? input.transactionDataHashes : undefined;
    if (cnf === undefined) {
        if (kbJwt) {
            throw keyBinding('a KB-JWT without cnf in the credential');
        }
        if (expectedTransactionData) {
            throw VerificationFailure.presentation('transaction data hash mismatch', 'transaction data needs a KB-JWT');
        }
        return result(claims, false, issued);
    }
    if (!isObject(cnf) || !isObject(cnf.jwk)) {
        throw error('cnf has no jwk');
    }
    if (!kbJwt) {
        throw keyBinding('KB-JWT missing');
    }
    const kbSegments = kbJwt.split('.');
    if (kbSegments.length !== 3) {
        throw keyBinding('the KB-JWT is not a compact JWS');
    }
    let kbHeader: Jose.ProtectedHeaderParameters;
    try {
        kbHeader = Jose.decodeProtectedHeader(kbJwt);
    }
    catch {
        throw keyBinding('malformed KB-JWT header');
    }
    if (kbHeader.typ !== KB_TYP) {
        throw keyBinding(`typ ${String(kbHeader.typ)}`);
    }
    if (kbHeader.alg !== ALG) {
        throw keyBinding(`alg ${String(kbHeader.alg)}`);
    }
    if ('d' in cnf.jwk) {
        throw error('cnf.jwk contains a private key');
    }
    let holderKey: Crypto.KeyObject;
    try {
        const { kty, crv, x, y } = cnf.jwk as Jose.JWK;
        if (kty !== 'EC' || crv !== 'P-256') {
            throw new Error('not an EC P-256 key');
        }
        holderKey = ecPublicKey({ crv, x, y });
    }
    catch (cause) {
        throw error(`cnf.jwk is not an ${ALG} key: ${(cause as Error).message}`);
    }
    const kbPayloadBytes = await verifySignature(kbJwt, holderKey, 'KB-JWT');
    let kb: unknown;
    try {
        kb = JSON.parse(Buffer.from(kbPayloadBytes).toString('utf8'));
    }
    catch {
        throw keyBinding('the KB-JWT payload is not JSON');
    }
    if (!isObject(kb)) {
        throw keyBinding('the KB-JWT payload is not an object');
    }
    if (kb.nonce !== input.nonce) {
        throw keyBinding('nonce mismatch');
    }
    if (kb.aud !== input.clientId) {
        throw keyBinding('aud mismatch');
    }
    const kbMaxAge = input.kbMaxAgeSeconds ?? DEFAULT_KB_MAX_AGE_SECONDS;
    if (typeof kb.iat !== 'number' || !Number.isFinite(kb.iat)) {
        throw keyBinding('iat missing');
    }
    if (kb.iat < nowSeconds - kbMaxAge - skewSeconds) {
        throw keyBinding('iat too old');
    }
    if (kb.iat > nowSeconds + skewSeconds) {
        throw keyBinding('iat in the future');
    }
    const expectedSdHash = sha256(presentation.slice(0, presentation.lastIndexOf('~') + 1));
    if (kb.sd_hash !== expectedSdHash) {
        throw keyBinding('sd_hash mismatch');
    }
    if (expectedTransactionData) {
        if (kb.transaction_data_hashes_alg !== undefined && kb.transaction_data_hashes_alg !== 'sha-256') {
            throw VerificationFailure.presentation('transaction data hash mismatch', `unsupported transaction_data_hashes_alg ${String(kb.transaction_data_hashes_alg)}`);
        }
        if (!sameHashes(kb.transaction_data_hashes, expectedTransactionData)) {
            throw VerificationFailure.presentation('transaction data hash mismatch');
        }
    }
    return result(claims, true, issued);
};

const result = (claims: Record<string, unknown>, keyBound: boolean, issued: { anchor: TrustAnchor; statusReference: StatusReference | undefined }): SdJwtPresentationResult => ({
    claims,
    ...(typeof claims.vct === 'string' ? { vct: claims.vct } : {}),
    ...(typeof claims.iss === 'string' ? { issuer: claims.iss } : {}),
    keyBound,
    issuerAnchor: issued.anchor,
    ...(issued.statusReference ? { statusReference: issued.statusReference } : {})
});
