import { cborDecode, cborEncode, DataItem } from '@animo-id/mdoc';
import type { JWK } from 'jose';
import { p256Sha256Aes128GcmSuite } from '../crypto/hpke';
import { newP256Jwks } from '../crypto/p256';

/**
 * The verifier's half of ISO/IEC TS 18013-7 Annex C (mdoc over the W3C Digital Credentials API, protocol
 * "org-iso-mdoc"), on @hpke/core for RFC 9180 (with node:crypto primitives, lib/crypto/hpke.ts) and the CBOR codec of
 * @animo-id/mdoc:
 *
 *     EncryptionInfo      = ["dcapi", {"nonce": bstr, "recipientPublicKey": COSE_Key}]
 *     EncryptedResponse   = ["dcapi", {"enc": bstr, "cipherText": bstr}]
 *     DeviceRequest       = {"version": "1.0", "docRequests": [{"itemsRequest": #6.24(bstr .cbor ItemsRequest), ? "readerAuth"}]}
 *     ReaderAuthentication = ["ReaderAuthentication", SessionTranscript, ItemsRequestBytes]   (ISO 18013-5 9.1.4)
 *
 * The response is sealed with HPKE base mode, DHKEM(P-256, HKDF-SHA256), HKDF-SHA256, AES-128-GCM, `info` the CBOR
 * SessionTranscript (lib/verify/mdoc annexCSessionTranscript) and an empty `aad`. Nothing here holds a long-term key:
 * the recipient key is fresh per session and kept (sealed) in it; readerAuth is signed by the caller's signer.
 */

/** RFC 9180 suite of Annex C; one instance is enough (it holds no key). */
export const annexCSuite = p256Sha256Aes128GcmSuite();

const COSE_KTY_EC2 = 2;
const COSE_CRV_P256 = 1;
const COSE_ES256 = -7;
const COSE_HEADER_ALG = 1;
const COSE_HEADER_X5CHAIN = 33;

const bytes = (value: string) => new Uint8Array(Buffer.from(value, 'base64url'));

/** A P-256 public JWK as COSE_Key (RFC 9053 EC2). */
export const coseKeyOf = (jwk: JWK): Map<number, number | Uint8Array> => new Map<number, number | Uint8Array>([
    [1, COSE_KTY_EC2],
    [-1, COSE_CRV_P256],
    [-2, bytes(jwk.x!)],
    [-3, bytes(jwk.y!)]
]);

/** A fresh HPKE recipient key pair (P-256) as JWKs, to be kept in the session. */
export const newRecipientKey = newP256Jwks;

/** base64url CBOR EncryptionInfo for the recipient key and the session's nonce (base64url). */
export const encodeEncryptionInfo = (publicJwk: JWK, nonce: string): string =>
    Buffer.from(cborEncode(['dcapi', new Map<string, unknown>([['nonce', bytes(nonce)], ['recipientPublicKey', coseKeyOf(publicJwk)]])])).toString('base64url');

/** What a DocRequest asks for: one docType, its elements with intent to retain. */
export interface ItemsRequestInput {
    docType: string;
    nameSpaces: Record<string, Record<string, boolean>>;
}

/** ItemsRequestBytes = #6.24(bstr .cbor ItemsRequest). */
export const itemsRequestBytes = (request: ItemsRequestInput): DataItem => DataItem.fromData(new Map<string, unknown>([
    ['docType', request.docType],
    ['nameSpaces', new Map(Object.entries(request.nameSpaces).map(([ns, elements]) => [ns, new Map(Object.entries(elements))]))]
]));

/** ReaderAuthenticationBytes = #6.24(bstr .cbor ["ReaderAuthentication", SessionTranscript, ItemsRequestBytes]). */
export const readerAuthenticationBytes = (sessionTranscript: Uint8Array, itemsRequest: DataItem): Uint8Array => {
    // The transcript is already CBOR: spliced in as is, so it is signed exactly as the wallet recomputes it.
    const content = Buffer.concat([Buffer.from([0x83]), cborEncode('ReaderAuthentication'), sessionTranscript, cborEncode(itemsRequest)]);
    return cborEncode(new DataItem({ buffer: content }));
};

/**
 * The CBOR DeviceRequest (base64url): one DocRequest per items request, each with a readerAuth COSE_Sign1 (ES256,
 * detached payload, x5chain in the unprotected header as ISO 18013-5 9.1.4 puts it) when `sign` is given.
 */
export const encodeDeviceRequest = async (requests: ItemsRequestInput[], readerAuth?: { sessionTranscript: Uint8Array; x5chain: string[]; sign: (data: Uint8Array) => Promise<Uint8Array> }): Promise<string> => {
    const docRequests: Array<Map<string, unknown>> = [];
    for (const request of requests) {
        const items = itemsRequestBytes(request);
        const docRequest = new Map<string, unknown>([['itemsRequest', items]]);
        if (readerAuth) {
            const protectedBytes = cborEncode(new Map([[COSE_HEADER_ALG, COSE_ES256]]));
            const toBeSigned = cborEncode(['Signature1', protectedBytes, new Uint8Array(0), readerAuthenticationBytes(readerAuth.sessionTranscript, items)]);
            const chain = readerAuth.x5chain.map((der) => new Uint8Array(Buffer.from(der, 'base64')));
            const unprotected = new Map<number, unknown>([[COSE_HEADER_X5CHAIN, chain.length === 1 ? chain[0] : chain]]);
            docRequest.set('readerAuth', [protectedBytes, unprotected, null, await readerAuth.sign(toBeSigned)]);
        }
        docRequests.push(docRequest);
    }
    return Buffer.from(cborEncode(new Map<string, unknown>([['version', '1.0'], ['docRequests', docRequests]]))).toString('base64url');
};

export class HpkeOpenError extends Error {}

const isBytes = (value: unknown): value is Uint8Array => value instanceof Uint8Array;
const field = (map: unknown, key: string): unknown => (map instanceof Map ? map.get(key) : undefined);

/**
 * Opens a base64url EncryptedResponse with the session's recipient key: the DeviceResponse bytes. Anything that does
 * not open (not base64url, not an EncryptedResponse, another key or `info`, a changed ciphertext) is an HpkeOpenError.
 */
export const openEncryptedResponse = async (data: string, privateJwk: JWK, sessionTranscript: Uint8Array): Promise<Uint8Array> => {
    let enc: unknown;
    let cipherText: unknown;
    try {
        if (!/^[A-Za-z0-9_-]+$/.test(data)) {
            throw new Error('not base64url');
        }
        const decoded = cborDecode(Buffer.from(data, 'base64url')) as unknown;
        if (!Array.isArray(decoded) || decoded.length !== 2 || decoded[0] !== 'dcapi') {
            throw new Error('not an EncryptedResponse');
        }
        enc = field(decoded[1], 'enc');
        cipherText = field(decoded[1], 'cipherText');
    }
    catch (err) {
        throw new HpkeOpenError(`the response is not an EncryptedResponse (${(err as Error).message})`);
    }
    if (!isBytes(enc) || !isBytes(cipherText)) {
        throw new HpkeOpenError('the EncryptedResponse has no enc or cipherText byte string');
    }
    try {
        const { kty, crv, x, y, d } = privateJwk;
        const recipientKey = await annexCSuite.kem.importKey('jwk', { kty, crv, x, y, d } as Parameters<typeof annexCSuite.kem.importKey>[1], false);
        const plaintext = await annexCSuite.open({ recipientKey, enc: toArrayBuffer(enc), info: toArrayBuffer(sessionTranscript) }, toArrayBuffer(cipherText), new ArrayBuffer(0));
        return new Uint8Array(plaintext);
    }
    catch (err) {
        throw new HpkeOpenError(`HPKE open failed (${(err as Error).message})`);
    }
};

const toArrayBuffer = (value: Uint8Array): ArrayBuffer => value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength) as ArrayBuffer;
