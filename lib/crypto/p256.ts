import Crypto from 'node:crypto';
import type { JWK } from 'jose';

/**
 * P-256 key agreement keys on node's ECDH class. The keys a flow makes for itself (an OpenID4VP response key, an
 * ISO 18013-7 HPKE key) live for one session and are used once: the ECDH class makes and uses them without the
 * key-object import (a point check and OpenSSL's decoder, ~150 µs each on the development machine) that
 * createPrivateKey/createPublicKey pay, while computeSecret still refuses a peer point that is not on the curve.
 */

export const P256_CURVE = 'prime256v1';

/** The private scalar in 32 bytes: node drops leading zero bytes, JWK `d` and RFC 9180 keep them. */
export const p256Scalar = (ecdh: Crypto.ECDH): Buffer => {
    const scalar = ecdh.getPrivateKey();
    return scalar.length === 32 ? scalar : Buffer.concat([Buffer.alloc(32 - scalar.length), scalar]);
};

/** An ECDH object for a private scalar; refuses 0 and scalars not below the group order. */
export const p256FromScalar = (scalar: Buffer): Crypto.ECDH => {
    const ecdh = Crypto.createECDH(P256_CURVE);
    ecdh.setPrivateKey(scalar);
    return ecdh;
};

/** The uncompressed point (0x04 || x || y) of base64url JWK coordinates; throws unless both are 32 bytes. */
export const uncompressedPoint = (x: string, y: string): Buffer => {
    const point = Buffer.concat([Buffer.from([0x04]), Buffer.from(x, 'base64url'), Buffer.from(y, 'base64url')]);
    if (point.length !== 65) {
        throw new Error('not a P-256 point');
    }
    return point;
};

/** The public JWK of an uncompressed point (0x04 || x || y). */
export const p256PublicJwk = (point: Buffer): JWK & { kty: string; crv: string; x: string; y: string } =>
    ({ kty: 'EC', crv: 'P-256', x: point.subarray(1, 33).toString('base64url'), y: point.subarray(33, 65).toString('base64url') });

/** A fresh P-256 key pair as JWKs (`d` added to the private one). */
export const newP256Jwks = (): { privateJwk: JWK; publicJwk: JWK } => {
    const ecdh = Crypto.createECDH(P256_CURVE);
    const publicJwk = p256PublicJwk(ecdh.generateKeys());
    return { privateJwk: { ...publicJwk, d: p256Scalar(ecdh).toString('base64url') }, publicJwk };
};
