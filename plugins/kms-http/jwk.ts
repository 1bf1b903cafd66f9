import Crypto from 'node:crypto';
import type { JWK } from 'jose';
import type { PublicJwk } from '../../lib/kms/types';

/* The EC P-256 keys the http KMS protocol carries as JWKs, checked before they are trusted or sent. */

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
