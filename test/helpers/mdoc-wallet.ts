import Crypto from 'node:crypto';
import { cborDecode, cborEncode, DataItem, DeviceRequest, DeviceResponse, MDoc, parseIssuerSigned, type PresentationDefinition } from '@animo-id/mdoc';
import { Aes128Gcm, CipherSuite, DhkemP256HkdfSha256, HkdfSha256 } from '@hpke/core';
import type { HolderKey } from './holder';
import { mdocContext } from '../../lib/mdoc/context';

/**
 * The wallet side of ISO 18013-7 Annex C and of OpenID4VP over the Digital Credentials API for mdocs, written from
 * the standards with @animo-id/mdoc (DeviceRequest parsing, DeviceResponse and DeviceAuthentication), @hpke/core
 * (RFC 9180 sealing) and node:crypto. Nothing here uses the service's verifier or Annex C code; only the mdoc crypto
 * callbacks (lib/mdoc/context: plain node:crypto calls) are shared, as in holder.ts.
 */

const sha256 = (data: Uint8Array | string) => new Uint8Array(Crypto.createHash('sha256').update(data).digest());
const ab = (value: Uint8Array): ArrayBuffer => new Uint8Array(value).buffer as ArrayBuffer;
const suite = new CipherSuite({ kem: new DhkemP256HkdfSha256(), kdf: new HkdfSha256(), aead: new Aes128Gcm() });
const crypto = mdocContext(async (data, jwk) =>
    new Uint8Array(Crypto.sign('sha256', data, { key: Crypto.createPrivateKey({ key: jwk as Crypto.JsonWebKey, format: 'jwk' }), dsaEncoding: 'ieee-p1363' })));

/** ISO 18013-7 Annex C: [null, null, ["dcapi", SHA-256(cbor([base64url EncryptionInfo, origin]))]]. */
export const annexCTranscript = (encryptionInfo: string, origin: string): Uint8Array =>
    cborEncode([null, null, ['dcapi', sha256(cborEncode([encryptionInfo, origin]))]]);

/** OpenID4VP 1.0 B.2.6.2: [null, null, ["OpenID4VPDCAPIHandover", SHA-256(cbor([origin, nonce, jwkThumbprint]))]]. */
export const dcApiTranscript = (origin: string, nonce: string, jwkThumbprint: Uint8Array | null): Uint8Array =>
    cborEncode([null, null, ['OpenID4VPDCAPIHandover', sha256(cborEncode([origin, nonce, jwkThumbprint]))]]);

/** A DeviceResponse (CBOR) disclosing `elements` of the held mdoc, device-signed over `transcript`. */
export const deviceResponse = async (issuerSigned: string, deviceKey: HolderKey, docType: string, elements: Array<[string, string]>, transcript: Uint8Array): Promise<Uint8Array> => {
    const document = parseIssuerSigned(new Uint8Array(Buffer.from(issuerSigned, 'base64url')), docType);
    const definition: PresentationDefinition = {
        id: 'request',
        input_descriptors: [{
            id: docType,
            format: { mso_mdoc: { alg: ['ES256'] } },
            constraints: { limit_disclosure: 'required', fields: elements.map(([ns, element]) => ({ path: [`$['${ns}']['${element}']`], intent_to_retain: false })) }
        }]
    };
    const response = await DeviceResponse.from(new MDoc([document]))
        .usingPresentationDefinition(definition)
        .usingSessionTranscriptBytes(cborEncode(new DataItem({ buffer: transcript })))
        .authenticateWithSignature(deviceKey.privateJwk as never, 'ES256')
        .sign({ crypto: crypto.crypto, cose: crypto.cose } as never);
    return response.encode();
};

/** EncryptionInfo = ["dcapi", {nonce, recipientPublicKey: COSE_Key}]. */
export const parseEncryptionInfo = (encryptionInfo: string): { nonce: Uint8Array; x: Uint8Array; y: Uint8Array } => {
    const [type, parameters] = cborDecode(Buffer.from(encryptionInfo, 'base64url')) as [string, Map<string, unknown>];
    if (type !== 'dcapi') {
        throw new Error('not an Annex C EncryptionInfo');
    }
    const key = parameters.get('recipientPublicKey') as Map<number, unknown>;
    if (key.get(1) !== 2 || key.get(-1) !== 1) {
        throw new Error('the recipient key is not EC2 P-256');
    }
    return { nonce: parameters.get('nonce') as Uint8Array, x: key.get(-2) as Uint8Array, y: key.get(-3) as Uint8Array };
};

/** EncryptedResponse = ["dcapi", {enc, cipherText}]: HPKE base mode to the recipient key, info = SessionTranscript. */
export const sealResponse = async (encryptionInfo: string, plaintext: Uint8Array, transcript: Uint8Array, tamper = false): Promise<string> => {
    const { x, y } = parseEncryptionInfo(encryptionInfo);
    const recipientPublicKey = await suite.kem.deserializePublicKey(ab(new Uint8Array([4, ...x, ...y])));
    const sealed = await suite.seal({ recipientPublicKey, info: ab(transcript) }, ab(plaintext));
    const cipherText = new Uint8Array(sealed.ct);
    if (tamper) {
        cipherText[cipherText.length - 1]! ^= 0x01;
    }
    return Buffer.from(cborEncode(['dcapi', new Map<string, unknown>([['enc', new Uint8Array(sealed.enc)], ['cipherText', cipherText]])])).toString('base64url');
};

/**
 * The DocRequests of a DeviceRequest, with each readerAuth checked as ISO 18013-5 9.1.4 says: a COSE_Sign1 (ES256)
 * over ReaderAuthenticationBytes = #6.24(["ReaderAuthentication", SessionTranscript, ItemsRequestBytes]) by the leaf
 * of its x5chain, and that chain issued by `rootPem` (the access key chain's root).
 */
export const readDeviceRequest = (deviceRequest: string, transcript: Uint8Array, rootPem?: string) => {
    const bytes = new Uint8Array(Buffer.from(deviceRequest, 'base64url'));
    const parsed = DeviceRequest.parse(bytes);
    const raw = cborDecode(bytes) as Map<string, unknown>;
    const docRequests = raw.get('docRequests') as Array<Map<string, unknown>>;
    const readerAuthVerified = docRequests.map((docRequest) => {
        const readerAuth = docRequest.get('readerAuth') as [Uint8Array, Map<number, unknown>, null, Uint8Array] | undefined;
        if (!readerAuth || !rootPem) {
            return false;
        }
        const [protectedBytes, unprotected, payload, signature] = readerAuth;
        const headers = cborDecode(protectedBytes) as Map<number, unknown>;
        if (headers.get(1) !== -7 || payload !== null) {
            return false;
        }
        const x5chain = unprotected.get(33);
        const chain = (Array.isArray(x5chain) ? x5chain : [x5chain]).map((der: Uint8Array) => new Crypto.X509Certificate(Buffer.from(der)));
        const root = new Crypto.X509Certificate(rootPem);
        const last = chain[chain.length - 1]!;
        const chained = chain.every((c, i) => i === chain.length - 1 || (c.checkIssued(chain[i + 1]!) && c.verify(chain[i + 1]!.publicKey)))
            && last.checkIssued(root) && last.verify(root.publicKey);
        const readerAuthentication = cborEncode(DataItem.fromData(['ReaderAuthentication', cborDecode(transcript), docRequest.get('itemsRequest')]));
        const toBeSigned = cborEncode(['Signature1', protectedBytes, new Uint8Array(0), readerAuthentication]);
        return chained && Crypto.verify('sha256', toBeSigned, { key: chain[0]!.publicKey, dsaEncoding: 'ieee-p1363' }, signature);
    });
    return { parsed, readerAuthVerified };
};
