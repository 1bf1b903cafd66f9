import Crypto from 'node:crypto';
import { Dhkem, Ec, type DhkemPrimitives } from '@hpke/common';
import { P256_CURVE, p256FromScalar, p256Scalar, uncompressedPoint } from './p256';
import { AeadId, CipherSuite, DeserializeError, HkdfSha256, KemId, SerializeError, type AeadEncryptionContext, type AeadInterface } from '@hpke/core';

/**
 * The RFC 9180 suite DHKEM(P-256, HKDF-SHA256), HKDF-SHA256, AES-128-GCM of @hpke/core, with its primitive operations
 * (P-256 ECDH and key encoding, HMAC-SHA256, AES-128-GCM) done by node:crypto instead of WebCrypto.
 *
 * The library keeps the protocol: the KEM's labeled ExtractAndExpand and kem_context, the key schedule, nonces and
 * sequence numbers, the encryption contexts and their errors. What is replaced is only how each primitive is
 * reached: through WebCrypto every one costs a key import and an asynchronous job (opening one ISO 18013-7 response
 * took seven key imports and about as many HMAC jobs, ~2.8 ms of CPU per flow in the profile of `bench iso18013`),
 * where node:crypto answers synchronously. The RFC 9180 A.3.1 vector is reproduced through this suite
 * (test/lib/hpke-annex-c.ts), and it interoperates both ways with the library's own WebCrypto suite.
 *
 * Keys are this module's own (below), passed through the library where its types say CryptoKey: only the primitives
 * below ever look inside them.
 */

type Bytes = ArrayBufferLike | ArrayBufferView;
type CryptoKey = Crypto.webcrypto.CryptoKey;
type CryptoKeyPair = Crypto.webcrypto.CryptoKeyPair;
type JsonWebKey = Crypto.webcrypto.JsonWebKey;

const buffer = (value: Bytes): Buffer => (ArrayBuffer.isView(value) ? Buffer.from(value.buffer, value.byteOffset, value.byteLength) : Buffer.from(value));

const arrayBuffer = (value: Buffer): ArrayBuffer => value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength) as ArrayBuffer;

/** Keys of this suite: a private key is node's ECDH object holding the scalar (see lib/crypto/p256), a public key its point. */
class P256PrivateKey {
    constructor(readonly ecdh: Crypto.ECDH) {}
}

class P256PublicKey {
    constructor(readonly point: Buffer) {}
}

/** Our keys where the library's types say CryptoKey (see above). */
const asKey = (key: P256PrivateKey | P256PublicKey): CryptoKey => key as unknown as CryptoKey;
const privateKeyOf = (key: CryptoKey): P256PrivateKey => {
    if (!((key as unknown) instanceof P256PrivateKey)) {
        throw new DeserializeError('not a private key of this suite');
    }
    return key as unknown as P256PrivateKey;
};
const publicKeyOf = (key: CryptoKey): P256PublicKey => {
    if (!((key as unknown) instanceof P256PublicKey)) {
        throw new DeserializeError('not a public key of this suite');
    }
    return key as unknown as P256PublicKey;
};

// setPrivateKey refuses 0 and scalars not below the group order.
const privateKey = (scalar: Buffer): P256PrivateKey => new P256PrivateKey(p256FromScalar(scalar));

const publicKey = (point: Buffer): P256PublicKey => {
    if (point.length !== 65 || point[0] !== 0x04) {
        throw new DeserializeError('not an uncompressed P-256 point');
    }
    Crypto.ECDH.convertKey(point, P256_CURVE); // decodes the point: refuses one off the curve
    return new P256PublicKey(Buffer.from(point));
};

/** Runs a synchronous primitive as the library expects it: a promise, failures as `failure` errors. */
const attempt = <T>(run: () => T, failure: new (e: unknown) => Error): Promise<T> => {
    try {
        return Promise.resolve(run());
    }
    catch (err) {
        return Promise.reject(err instanceof DeserializeError ? err : new failure(err));
    }
};

/** HKDF-SHA256 with node's HMAC; the labels stay the library's. */
class NodeHkdfSha256 extends HkdfSha256 {
    override extract(salt: Bytes, ikm: Bytes): Promise<ArrayBuffer> {
        const key = salt.byteLength === 0 ? Buffer.alloc(this.hashSize) : buffer(salt);
        return Promise.resolve(arrayBuffer(Crypto.createHmac('sha256', key).update(buffer(ikm)).digest()));
    }

    /** RFC 5869 section 2.3 (node has HKDF only as extract-then-expand). */
    override expand(prk: Bytes, info: Bytes, length: number): Promise<ArrayBuffer> {
        if (length > 255 * this.hashSize) {
            return Promise.reject(new Error('HKDF-Expand: length too large'));
        }
        const blocks: Buffer[] = [];
        let previous = Buffer.alloc(0);
        for (let i = 1; blocks.length * this.hashSize < length; i++) {
            previous = Crypto.createHmac('sha256', buffer(prk)).update(previous).update(buffer(info)).update(Buffer.from([i])).digest();
            blocks.push(previous);
        }
        return Promise.resolve(arrayBuffer(Buffer.concat(blocks).subarray(0, length)));
    }

    override extractAndExpand(salt: Bytes, ikm: Bytes, info: Bytes, length: number): Promise<ArrayBuffer> {
        return Promise.resolve(Crypto.hkdfSync('sha256', buffer(ikm), buffer(salt), buffer(info), length));
    }
}

/** P-256 keys and ECDH on node:crypto; deriving a key pair from seed bytes stays the library's (then converted). */
class NodeP256 implements DhkemPrimitives {
    private readonly derivation: Ec;

    constructor(kdf: NodeHkdfSha256) {
        this.derivation = new Ec(KemId.DhkemP256HkdfSha256, kdf);
    }

    serializePublicKey(key: CryptoKey): Promise<ArrayBuffer> {
        return attempt(() => arrayBuffer(publicKeyOf(key).point), SerializeError);
    }

    deserializePublicKey(key: Bytes): Promise<CryptoKey> {
        return attempt(() => asKey(publicKey(buffer(key))), DeserializeError);
    }

    serializePrivateKey(key: CryptoKey): Promise<ArrayBuffer> {
        return attempt(() => arrayBuffer(p256Scalar(privateKeyOf(key).ecdh)), SerializeError);
    }

    deserializePrivateKey(key: Bytes): Promise<CryptoKey> {
        return attempt(() => {
            const scalar = buffer(key);
            if (scalar.length !== 32) {
                throw new DeserializeError('not a P-256 private scalar');
            }
            return asKey(privateKey(scalar));
        }, DeserializeError);
    }

    importKey(format: 'raw' | 'jwk', key: ArrayBuffer | JsonWebKey, isPublic: boolean): Promise<CryptoKey> {
        if (format === 'raw') {
            return isPublic ? this.deserializePublicKey(key as ArrayBuffer) : this.deserializePrivateKey(key as ArrayBuffer);
        }
        const jwk = key as JsonWebKey;
        return attempt(() => {
            if (jwk.kty !== 'EC' || jwk.crv !== 'P-256' || isPublic === (jwk.d !== undefined) || !jwk.x || !jwk.y) {
                throw new DeserializeError(`not a ${isPublic ? 'public' : 'private'} P-256 JWK`);
            }
            const point = uncompressedPoint(jwk.x, jwk.y);
            if (isPublic) {
                return asKey(publicKey(point));
            }
            const key = privateKey(Buffer.from(jwk.d!, 'base64url'));
            if (!key.ecdh.getPublicKey().equals(point)) {
                throw new DeserializeError('the JWK\'s x and y are not the public key of its d');
            }
            return asKey(key);
        }, DeserializeError);
    }

    generateKeyPair(): Promise<CryptoKeyPair> {
        const ecdh = Crypto.createECDH(P256_CURVE);
        const point = ecdh.generateKeys();
        return Promise.resolve({ privateKey: asKey(new P256PrivateKey(ecdh)), publicKey: asKey(new P256PublicKey(point)) });
    }

    async deriveKeyPair(ikm: Bytes): Promise<CryptoKeyPair> {
        const pair = await this.derivation.deriveKeyPair(ikm);
        const d = Crypto.KeyObject.from(pair.privateKey).export({ format: 'jwk' }).d!;
        const key = privateKey(Buffer.from(d, 'base64url'));
        return { privateKey: asKey(key), publicKey: asKey(new P256PublicKey(key.ecdh.getPublicKey())) };
    }

    derivePublicKey(key: CryptoKey): Promise<CryptoKey> {
        return attempt(() => asKey(new P256PublicKey(privateKeyOf(key).ecdh.getPublicKey())), DeserializeError);
    }

    dh(sk: CryptoKey, pk: CryptoKey): Promise<ArrayBuffer> {
        // For P-256 the shared secret is the x-coordinate of the product, as RFC 9180 section 7.1.1 asks.
        return attempt(() => arrayBuffer(privateKeyOf(sk).ecdh.computeSecret(publicKeyOf(pk).point)), DeserializeError);
    }
}

class NodeDhkemP256HkdfSha256 extends Dhkem {
    override readonly secretSize = 32;
    override readonly encSize = 65;
    override readonly publicKeySize = 65;
    override readonly privateKeySize = 32;

    constructor() {
        const kdf = new NodeHkdfSha256();
        super(KemId.DhkemP256HkdfSha256, new NodeP256(kdf), kdf);
    }
}

class NodeAes128GcmContext implements AeadEncryptionContext {
    private static readonly TAG_BYTES = 16;

    constructor(private readonly key: Buffer) {}

    seal(iv: Bytes, data: Bytes, aad: Bytes): Promise<ArrayBuffer> {
        const cipher = Crypto.createCipheriv('aes-128-gcm', this.key, buffer(iv), { authTagLength: NodeAes128GcmContext.TAG_BYTES });
        cipher.setAAD(buffer(aad));
        return Promise.resolve(arrayBuffer(Buffer.concat([cipher.update(buffer(data)), cipher.final(), cipher.getAuthTag()])));
    }

    open(iv: Bytes, data: Bytes, aad: Bytes): Promise<ArrayBuffer> {
        const sealed = buffer(data);
        if (sealed.length < NodeAes128GcmContext.TAG_BYTES) {
            return Promise.reject(new Error('ciphertext shorter than its tag'));
        }
        try {
            const decipher = Crypto.createDecipheriv('aes-128-gcm', this.key, buffer(iv), { authTagLength: NodeAes128GcmContext.TAG_BYTES });
            decipher.setAAD(buffer(aad));
            decipher.setAuthTag(sealed.subarray(sealed.length - NodeAes128GcmContext.TAG_BYTES));
            return Promise.resolve(arrayBuffer(Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - NodeAes128GcmContext.TAG_BYTES)), decipher.final()])));
        }
        catch (err) {
            return Promise.reject(err as Error);
        }
    }
}

class NodeAes128Gcm implements AeadInterface {
    readonly id = AeadId.Aes128Gcm;
    readonly keySize = 16;
    readonly nonceSize = 12;
    readonly tagSize = 16;

    createEncryptionContext(key: Bytes): AeadEncryptionContext {
        return new NodeAes128GcmContext(Buffer.from(buffer(key)));
    }
}

/** RFC 9180 DHKEM(P-256, HKDF-SHA256), HKDF-SHA256, AES-128-GCM; one instance is enough (it holds no key). */
export const p256Sha256Aes128GcmSuite = (): CipherSuite =>
    new CipherSuite({ kem: new NodeDhkemP256HkdfSha256(), kdf: new NodeHkdfSha256(), aead: new NodeAes128Gcm() });
