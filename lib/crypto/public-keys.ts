import Crypto from 'node:crypto';
import { LruMap } from '../lru';

/**
 * Public EC keys of JWKs, kept by their coordinates. node's import of a JWK checks the point, which costs about as
 * much as the ECDSA verification the key is then used for (65 µs each on the development machine), and a wallet
 * sends the same keys again and again: its DPoP key on PAR, token and every credential request, its instance key in
 * each wallet attestation, the holder key in each proof and presentation. A key object is immutable, so one import
 * serves every later request with the same coordinates; only imports that succeeded are kept, the least recently
 * used beyond the limit are dropped.
 */

const imported = new LruMap<string, Crypto.KeyObject>(4096);

/** base64url characters of an unpadded coordinate of each curve kept; another curve or form is imported each time. */
const COORDINATE_LENGTHS: Record<string, number> = { 'P-256': 43, 'P-384': 64, 'P-521': 88 };
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** The public key of an EC JWK's `crv`, `x` and `y` (its other members are ignored); throws as createPublicKey does. */
export const ecPublicKey = (jwk: { crv?: unknown; x?: unknown; y?: unknown }): Crypto.KeyObject => {
    const { crv, x, y } = jwk;
    if (typeof crv !== 'string' || typeof x !== 'string' || typeof y !== 'string') {
        throw new TypeError('An EC public JWK needs crv, x and y as strings');
    }
    const load = () => Crypto.createPublicKey({ key: { kty: 'EC', crv, x, y }, format: 'jwk' });
    // Only the one canonical spelling of a point is kept: node's base64url decoder skips stray characters, so
    // another spelling could otherwise find the entry of a key it does not denote (or of none at all).
    const length = COORDINATE_LENGTHS[crv];
    if (length === undefined || x.length !== length || y.length !== length || !BASE64URL.test(x) || !BASE64URL.test(y)) {
        return load();
    }
    const id = `${crv}:${x}:${y}`;
    let key = imported.get(id);
    if (!key) {
        key = load();
        imported.set(id, key);
    }
    return key;
};

/** The public key of any JWK: EC keys through ecPublicKey (kept), others imported each time. */
export const jwkPublicKey = (jwk: { kty?: unknown; crv?: unknown; x?: unknown; y?: unknown }): Crypto.KeyObject =>
    jwk.kty === 'EC' ? ecPublicKey(jwk) : Crypto.createPublicKey({ key: jwk as Crypto.JsonWebKey, format: 'jwk' });
