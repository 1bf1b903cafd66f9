import Crypto from 'node:crypto';
import { verifyOffLoop } from './thread-pool';

/**
 * Compact JWS signature checks on node:crypto for the ECDSA algorithms, on the hot path of the wallet-facing
 * endpoints (DPoP proofs, wallet attestations and their PoPs). jose 6 verifies through WebCrypto: a key import and
 * a promise chain per signature, about a third of a millisecond of JavaScript on top of the verification itself.
 */

const ECDSA: Record<string, { hash: string; curve: string; bytes: number }> = {
    ES256: { hash: 'sha256', curve: 'prime256v1', bytes: 64 },
    ES384: { hash: 'sha384', curve: 'secp384r1', bytes: 96 },
    ES512: { hash: 'sha512', curve: 'secp521r1', bytes: 132 }
};

/** What verifyEcdsaJws found: a valid signature, an invalid one, or a key that does not fit the algorithm. */
export type JwsCheck = 'valid' | 'invalid' | 'unfit';

/**
 * Checks the signature of a compact JWS (three base64url parts) under an ECDSA `alg` with `key`. Undefined when
 * this function does not handle the case (another algorithm, or a `crit` header whose extensions must be understood):
 * the caller then verifies with jose, which knows every case.
 */
export const verifyEcdsaJws = async (jwt: string, header: Record<string, unknown>, key: Crypto.KeyObject, alg: string): Promise<JwsCheck | undefined> => {
    const ecdsa = ECDSA[alg];
    if (!ecdsa || header.crit !== undefined || header.alg !== alg) {
        return undefined;
    }
    if (key.type !== 'public' || key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== ecdsa.curve) {
        return 'unfit';
    }
    const dot = jwt.lastIndexOf('.');
    const signature = Buffer.from(jwt.slice(dot + 1), 'base64url');
    if (signature.length !== ecdsa.bytes) {
        return 'invalid';
    }
    return await verifyOffLoop(ecdsa.hash, Buffer.from(jwt.slice(0, dot), 'ascii'), { key, dsaEncoding: 'ieee-p1363' }, signature) ? 'valid' : 'invalid';
};

/** The payload bytes of a compact JWS (its second part). */
export const jwsPayload = (jwt: string): Buffer => Buffer.from(jwt.split('.')[1] ?? '', 'base64url');

const THUMBPRINT_MEMBERS: Record<string, string[]> = { EC: ['crv', 'kty', 'x', 'y'], RSA: ['e', 'kty', 'n'], OKP: ['crv', 'kty', 'x'], oct: ['k', 'kty'] };

/**
 * The RFC 7638 SHA-256 thumbprint (base64url) of a JWK, computed synchronously: the required members in
 * lexicographic order, as JSON without whitespace. Throws a TypeError for an unknown kty or a missing member.
 */
export const jwkThumbprintSync = (jwk: Record<string, unknown>): string => {
    const members = typeof jwk.kty === 'string' ? THUMBPRINT_MEMBERS[jwk.kty] : undefined;
    if (!members) {
        throw new TypeError('The JWK has no supported "kty"');
    }
    const required: Record<string, string> = {};
    for (const member of members) {
        const value = jwk[member];
        if (typeof value !== 'string' || !value) {
            throw new TypeError(`The JWK member "${member}" is missing or not a string`);
        }
        required[member] = value;
    }
    return Crypto.createHash('sha256').update(JSON.stringify(required)).digest('base64url');
};
