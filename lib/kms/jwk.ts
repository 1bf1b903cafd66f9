import Crypto from 'node:crypto';
import type { JWK } from 'jose';
import type { PublicJwk } from './types';

/* EC P-256 keys that KMS providers answer or send, checked before they are trusted or sent. */

const B64URL = /^[A-Za-z0-9_-]+$/;

const decodeCoordinate = (value: unknown): Buffer | undefined => {
    if (typeof value !== 'string' || !B64URL.test(value)) {
        return undefined;
    }
    const bytes = Buffer.from(value, 'base64url');
    return bytes.length === 32 ? bytes : undefined;
};

/**
 * Checks that `value` is an EC P-256 public JWK (a point on the curve, no private part) and answers it reduced to
 * `{kty, crv, x, y}`. Callers that keep public keys themselves (the key chain) can use it before trusting a key
 * that came back from a KMS. Throws an Error naming the problem.
 */
export const toEcP256PublicJwk = (value: unknown): PublicJwk => {
    if (!value || typeof value !== 'object' || Array.isArray(value)) {
        throw new Error('public key is not a JWK object');
    }
    const jwk = value as Record<string, unknown>;
    if ('d' in jwk) {
        throw new Error('public key contains a private part (d)');
    }
    if (jwk.kty !== 'EC' || jwk.crv !== 'P-256') {
        throw new Error('public key is not an EC P-256 JWK');
    }
    if (!decodeCoordinate(jwk.x) || !decodeCoordinate(jwk.y)) {
        throw new Error('public key has malformed x or y coordinates');
    }
    const canonical = { kty: 'EC', crv: 'P-256', x: jwk.x as string, y: jwk.y as string };
    try {
        // Rejects coordinates that are not a point on the curve.
        Crypto.createPublicKey({ key: canonical, format: 'jwk' });
    } catch {
        throw new Error('public key is not a valid P-256 point');
    }
    return canonical;
};

/**
 * True when `signature` (raw r || s, 64 bytes) is a valid ES256 signature of `data` by `publicJwk`; throws like
 * toEcP256PublicJwk for a key that is not an EC P-256 public key.
 */
export const verifyEs256 = (publicJwk: PublicJwk, data: Uint8Array, signature: Uint8Array): boolean => {
    if (signature.length !== 64) {
        return false;
    }
    const key = Crypto.createPublicKey({ key: toEcP256PublicJwk(publicJwk) as Crypto.JsonWebKey, format: 'jwk' });
    return Crypto.verify('sha256', data, { key, dsaEncoding: 'ieee-p1363' }, signature);
};

export const privateEcP256Jwk = (jwk: JWK): { privateJwk: JWK; publicJwk: PublicJwk } => {
    if (jwk?.kty !== 'EC' || jwk.crv !== 'P-256' || typeof jwk.d !== 'string') {
        throw new Error('import needs an EC P-256 private JWK');
    }
    let key: Crypto.KeyObject;
    try {
        key = Crypto.createPrivateKey({ key: { kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y, d: jwk.d } as Crypto.JsonWebKey, format: 'jwk' });
    } catch {
        throw new Error('import needs a valid EC P-256 private JWK');
    }
    const full = key.export({ format: 'jwk' });
    return {
        privateJwk: { kty: 'EC', crv: 'P-256', x: full.x, y: full.y, d: full.d },
        publicJwk: { kty: 'EC', crv: 'P-256', x: full.x!, y: full.y! }
    };
};

/** The EC P-256 public JWK of an SPKI public key (DER, or PEM as Vault answers it); throws for any other key. */
export const ecP256JwkFromSpki = (spki: Uint8Array | string): PublicJwk => {
    let key: Crypto.KeyObject;
    try {
        key = typeof spki === 'string'
            ? Crypto.createPublicKey({ key: spki, format: 'pem' })
            : Crypto.createPublicKey({ key: Buffer.from(spki), format: 'der', type: 'spki' });
    } catch {
        throw new Error('public key is not a valid SPKI key');
    }
    if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
        throw new Error('public key is not an EC P-256 key');
    }
    const { x, y } = key.export({ format: 'jwk' });
    return { kty: 'EC', crv: 'P-256', x: x!, y: y! };
};

const derInteger = (der: Uint8Array, at: number): { value: Uint8Array; next: number } => {
    const length = der[at + 1];
    if (der[at] !== 0x02 || length === undefined || length < 1 || length > 33 || at + 2 + length > der.length) {
        throw new Error('signature is not a DER ECDSA signature');
    }
    let value = der.subarray(at + 2, at + 2 + length);
    // DER INTEGERs are signed: a leading zero keeps a high bit from reading as negative.
    while (value.length > 32 && value[0] === 0) {
        value = value.subarray(1);
    }
    if (value.length > 32) {
        throw new Error('signature is not a P-256 ECDSA signature');
    }
    return { value, next: at + 2 + length };
};

/**
 * An ECDSA P-256 signature in DER (SEQUENCE of the INTEGERs r and s, as AWS KMS and most CSC services answer) as the
 * raw r || s of JWS and COSE, 64 bytes.
 */
export const ecdsaDerToRaw = (der: Uint8Array): Uint8Array => {
    if (der.length < 8 || der[0] !== 0x30 || der[1] !== der.length - 2) {
        throw new Error('signature is not a DER ECDSA signature');
    }
    const r = derInteger(der, 2);
    const s = derInteger(der, r.next);
    if (s.next !== der.length) {
        throw new Error('signature is not a DER ECDSA signature');
    }
    const raw = new Uint8Array(64);
    raw.set(r.value, 32 - r.value.length);
    raw.set(s.value, 64 - s.value.length);
    return raw;
};
