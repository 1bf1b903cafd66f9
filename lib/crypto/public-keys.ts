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

/** The public key of an EC JWK's `crv`, `x` and `y` (its other members are ignored); throws as createPublicKey does. */
export const ecPublicKey = (jwk: { crv?: unknown; x?: unknown; y?: unknown }): Crypto.KeyObject => {
    const { crv, x, y } = jwk;
    if (typeof crv !== 'string' || typeof x !== 'string' || typeof y !== 'string') {
        throw new TypeError('An EC public JWK needs crv, x and y as strings');
    }
    const id = `${crv}.${x}.${y}`;
    let key = imported.get(id);
    if (!key) {
        key = Crypto.createPublicKey({ key: { kty: 'EC', crv, x, y }, format: 'jwk' });
        imported.set(id, key);
    }
    return key;
};
