import Crypto from 'node:crypto';
import { uncompressedPoint } from './p256';

/**
 * Decryption of compact JWEs with ECDH-ES key agreement in direct mode (RFC 7518 4.6) and A128GCM / A256GCM, on
 * node:crypto: an OpenID4VP response must be decrypted on every presentation, and jose's WebCrypto path took ten
 * times as long as the key agreement itself.
 */

const ENC_BITS: Record<string, number> = { A128GCM: 128, A256GCM: 256 };

export class JweError extends Error {
    override name = 'JweError';
}

const lengthPrefixed = (data: Buffer): Buffer => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    return Buffer.concat([length, data]);
};

/** Concat KDF (NIST SP 800-56A, RFC 7518 4.6.2) with SHA-256; one round covers keys up to 256 bits. */
const concatKdf = (z: Buffer, enc: string, apu: Buffer, apv: Buffer, bits: number): Buffer => {
    const counter = Buffer.from([0, 0, 0, 1]);
    const suppPubInfo = Buffer.alloc(4);
    suppPubInfo.writeUInt32BE(bits);
    const otherInfo = Buffer.concat([lengthPrefixed(Buffer.from(enc, 'ascii')), lengthPrefixed(apu), lengthPrefixed(apv), suppPubInfo]);
    return Crypto.createHash('sha256').update(Buffer.concat([counter, z, otherInfo])).digest().subarray(0, bits / 8);
};

export interface DecryptedJwe {
    header: Record<string, unknown>;
    plaintext: Buffer;
}

/** privateKey: a KeyObject, or node's ECDH object of a P-256 scalar (lib/crypto/p256, no key import per use). */
export const decryptEcdhEs = (jwe: string, privateKey: Crypto.KeyObject | Crypto.ECDH, allowedEnc: string[] = ['A128GCM', 'A256GCM']): DecryptedJwe => {
    const parts = jwe.split('.');
    if (parts.length !== 5) {
        throw new JweError('not a compact JWE');
    }
    const [encodedHeader, encryptedKey, iv, ciphertext, tag] = parts as [string, string, string, string, string];
    let header: Record<string, unknown>;
    try {
        header = JSON.parse(Buffer.from(encodedHeader, 'base64url').toString('utf8'));
    }
    catch {
        throw new JweError('the JWE header is not JSON');
    }
    const enc = header.enc;
    if (header.alg !== 'ECDH-ES' || typeof enc !== 'string' || !allowedEnc.includes(enc) || !ENC_BITS[enc]) {
        throw new JweError('unsupported alg or enc');
    }
    if (encryptedKey !== '' || header.zip !== undefined) {
        throw new JweError('direct key agreement carries no encrypted key and no compression');
    }
    const epk = header.epk as Record<string, unknown> | undefined;
    if (!epk || epk.kty !== 'EC' || epk.crv !== 'P-256' || typeof epk.x !== 'string' || typeof epk.y !== 'string') {
        throw new JweError('epk must be an EC P-256 public key');
    }
    try {
        const z = privateKey instanceof Crypto.KeyObject
            ? Crypto.diffieHellman({ privateKey, publicKey: Crypto.createPublicKey({ key: { kty: 'EC', crv: 'P-256', x: epk.x, y: epk.y }, format: 'jwk' }) })
            : privateKey.computeSecret(uncompressedPoint(epk.x, epk.y));
        const apu = typeof header.apu === 'string' ? Buffer.from(header.apu, 'base64url') : Buffer.alloc(0);
        const apv = typeof header.apv === 'string' ? Buffer.from(header.apv, 'base64url') : Buffer.alloc(0);
        const bits = ENC_BITS[enc]!;
        const key = concatKdf(z, enc, apu, apv, bits);
        const decipher = Crypto.createDecipheriv(`aes-${bits}-gcm` as Crypto.CipherGCMTypes, key, Buffer.from(iv, 'base64url'));
        decipher.setAAD(Buffer.from(encodedHeader, 'ascii'));
        decipher.setAuthTag(Buffer.from(tag, 'base64url'));
        return { header, plaintext: Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]) };
    }
    catch {
        throw new JweError('the JWE does not decrypt');
    }
};
