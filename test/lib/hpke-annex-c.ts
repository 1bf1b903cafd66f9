import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { cborDecode, cborEncode } from '@animo-id/mdoc';
import { Aes128Gcm, CipherSuite, DhkemP256HkdfSha256, HkdfSha256 } from '@hpke/core';
import { annexCSuite, encodeEncryptionInfo, newRecipientKey, openEncryptedResponse, HpkeOpenError } from '../../lib/mdoc/annex-c';
import { annexCSessionTranscript, openid4vpDcApiSessionTranscript } from '../../lib/verify/mdoc';

/**
 * The HPKE suite of ISO 18013-7 Annex C (RFC 9180 DHKEM(P-256, HKDF-SHA256), HKDF-SHA256, AES-128-GCM) reproduces the
 * published test vector of RFC 9180 Appendix A.3.1 byte for byte, and the Annex C framing opens what a wallet seals.
 */

export const lab = Lab.script();
const { describe, it } = lab;

const hex = (value: string) => new Uint8Array(Buffer.from(value, 'hex'));
const toHex = (value: ArrayBuffer | Uint8Array) => Buffer.from(value instanceof Uint8Array ? value : new Uint8Array(value)).toString('hex');
const ab = (value: Uint8Array): ArrayBuffer => new Uint8Array(value).buffer as ArrayBuffer;

/** RFC 9180 A.3.1, base mode, as published (https://www.rfc-editor.org/rfc/rfc9180.html#appendix-A.3.1). */
const A31 = {
    info: '4f6465206f6e2061204772656369616e2055726e',
    ikmE: '4270e54ffd08d79d5928020af4686d8f6b7d35dbe470265f1f5aa22816ce860e',
    pkEm: '04a92719c6195d5085104f469a8b9814d5838ff72b60501e2c4466e5e67b325ac98536d7b61a1af4b78e5b7f951c0900be863c403ce65c9bfcb9382657222d18c4',
    skEm: '4995788ef4b9d6132b249ce59a77281493eb39af373d236a1fe415cb0c2d7beb',
    ikmR: '668b37171f1072f3cf12ea8a236a45df23fc13b82af3609ad1e354f6ef817550',
    pkRm: '04fe8c19ce0905191ebc298a9245792531f26f0cece2460639e8bc39cb7f706a826a779b4cf969b8a0e539c7f62fb3d30ad6aa8f80e30f1d128aafd68a2ce72ea0',
    skRm: 'f3ce7fdae57e1a310d87f1ebbde6f328be0a99cdbcadf4d6589cf29de4b8ffd2',
    enc: '04a92719c6195d5085104f469a8b9814d5838ff72b60501e2c4466e5e67b325ac98536d7b61a1af4b78e5b7f951c0900be863c403ce65c9bfcb9382657222d18c4',
    pt: '4265617574792069732074727574682c20747275746820626561757479',
    aad0: '436f756e742d30',
    ct0: '5ad590bb8baa577f8619db35a36311226a896e7342a6d836d8b7bcd2f20b6c7f9076ac232e3ab2523f39513434',
    aad1: '436f756e742d31',
    ct1: 'fa6f037b47fc21826b610172ca9637e82d6e5801eb31cbd3748271affd4ecb06646e0329cbdf3c3cd655b28e82'
};

describe('HPKE of ISO 18013-7 Annex C', () => {
    it('derives the RFC 9180 A.3.1 key pairs', async () => {
        const recipient = await annexCSuite.kem.deriveKeyPair(ab(hex(A31.ikmR)));
        expect(toHex(await annexCSuite.kem.serializePublicKey(recipient.publicKey))).to.equal(A31.pkRm);
        expect(toHex(await annexCSuite.kem.serializePrivateKey(recipient.privateKey))).to.equal(A31.skRm);
        const ephemeral = await annexCSuite.kem.deriveKeyPair(ab(hex(A31.ikmE)));
        expect(toHex(await annexCSuite.kem.serializePublicKey(ephemeral.publicKey))).to.equal(A31.pkEm);
        expect(toHex(await annexCSuite.kem.serializePrivateKey(ephemeral.privateKey))).to.equal(A31.skEm);
    });

    it('seals the RFC 9180 A.3.1 messages byte for byte and opens them', async () => {
        const recipientPublicKey = await annexCSuite.kem.deserializePublicKey(ab(hex(A31.pkRm)));
        const ekm = await annexCSuite.kem.deriveKeyPair(ab(hex(A31.ikmE)));
        const sender = await annexCSuite.createSenderContext({ recipientPublicKey, info: ab(hex(A31.info)), ekm });
        expect(toHex(sender.enc)).to.equal(A31.enc);
        expect(toHex(await sender.seal(ab(hex(A31.pt)), ab(hex(A31.aad0))))).to.equal(A31.ct0);
        expect(toHex(await sender.seal(ab(hex(A31.pt)), ab(hex(A31.aad1))))).to.equal(A31.ct1);
        const recipientKey = await annexCSuite.kem.deserializePrivateKey(ab(hex(A31.skRm)));
        const recipient = await annexCSuite.createRecipientContext({ recipientKey, enc: ab(hex(A31.enc)), info: ab(hex(A31.info)) });
        expect(toHex(await recipient.open(ab(hex(A31.ct0)), ab(hex(A31.aad0))))).to.equal(A31.pt);
    });

    it('interoperates both ways with the WebCrypto suite of @hpke/core, and refuses points off the curve', async () => {
        const library = new CipherSuite({ kem: new DhkemP256HkdfSha256(), kdf: new HkdfSha256(), aead: new Aes128Gcm() });
        const info = ab(new Uint8Array([9, 8, 7]));
        const message = ab(new Uint8Array(Buffer.from('a DeviceResponse')));
        for (const [sender, recipient] of [[library, annexCSuite], [annexCSuite, library]] as const) {
            const keys = await recipient.kem.generateKeyPair();
            const recipientPublicKey = await sender.kem.deserializePublicKey(await recipient.kem.serializePublicKey(keys.publicKey));
            const sealed = await sender.seal({ recipientPublicKey, info }, message, ab(new Uint8Array([1])));
            const opened = await recipient.open({ recipientKey: keys.privateKey, enc: sealed.enc, info }, sealed.ct, ab(new Uint8Array([1])));
            expect(Buffer.from(opened).toString()).to.equal('a DeviceResponse');
            await expect(recipient.open({ recipientKey: keys.privateKey, enc: sealed.enc, info }, sealed.ct, ab(new Uint8Array([2])))).to.reject();
        }
        const offCurve = hex(A31.pkRm);
        offCurve[64]! ^= 1;
        await expect(annexCSuite.kem.deserializePublicKey(ab(offCurve))).to.reject();
        await expect(annexCSuite.kem.deserializePublicKey(ab(hex(A31.pkRm).subarray(0, 33)))).to.reject();
        await expect(annexCSuite.kem.deserializePrivateKey(ab(new Uint8Array(31)))).to.reject();
        await expect(annexCSuite.kem.importKey('jwk', { kty: 'EC', crv: 'P-384', x: 'AA', y: 'AA' }, true)).to.reject();
        await expect(annexCSuite.kem.deserializePrivateKey(ab(new Uint8Array(32)))).to.reject();
        const one = newRecipientKey();
        const other = newRecipientKey();
        await expect(annexCSuite.kem.importKey('jwk', { ...one.privateJwk, x: other.publicJwk.x }, false)).to.reject();
        expect(Buffer.from(one.privateJwk.d!, 'base64url')).to.have.length(32);
        const imported = await annexCSuite.kem.importKey('jwk', { ...one.privateJwk }, false);
        expect(Buffer.from(await annexCSuite.kem.serializePrivateKey(imported)).toString('base64url')).to.equal(one.privateJwk.d!);
    });

    it('opens an Annex C EncryptedResponse sealed to a session key, and nothing else', async () => {
        const key = newRecipientKey();
        const info = encodeEncryptionInfo(key.publicJwk, 'bm9uY2U');
        const decoded = cborDecode(Buffer.from(info, 'base64url')) as [string, Map<string, unknown>];
        expect(decoded[0]).to.equal('dcapi');
        const coseKey = decoded[1].get('recipientPublicKey') as Map<number, unknown>;
        expect(coseKey.get(1)).to.equal(2);
        expect(coseKey.get(-1)).to.equal(1);
        const transcript = annexCSessionTranscript({ encryptionInfo: info, origin: 'https://rp.example' });
        const recipientPublicKey = await annexCSuite.kem.importKey('jwk', { ...key.publicJwk }, true);
        const sealed = await annexCSuite.seal({ recipientPublicKey, info: ab(transcript) }, ab(new Uint8Array([1, 2, 3])));
        const response = (ct: ArrayBuffer) => Buffer.from(cborEncode(['dcapi', new Map<string, unknown>([['enc', new Uint8Array(sealed.enc)], ['cipherText', new Uint8Array(ct)]])])).toString('base64url');
        expect([...await openEncryptedResponse(response(sealed.ct), key.privateJwk, transcript)]).to.equal([1, 2, 3]);
        const tampered = new Uint8Array(sealed.ct);
        tampered[0]! ^= 1;
        await expect(openEncryptedResponse(response(ab(tampered)), key.privateJwk, transcript)).to.reject(HpkeOpenError);
        const other = annexCSessionTranscript({ encryptionInfo: info, origin: 'https://other.example' });
        await expect(openEncryptedResponse(response(sealed.ct), key.privateJwk, other)).to.reject(HpkeOpenError);
        await expect(openEncryptedResponse('not base64url!', key.privateJwk, transcript)).to.reject(HpkeOpenError);
        await expect(openEncryptedResponse(Buffer.from(cborEncode(['dcapi', 1])).toString('base64url'), key.privateJwk, transcript)).to.reject(HpkeOpenError);
    });

    it('reproduces the OpenID4VP 1.0 B.2.6.2 DC API SessionTranscript example byte for byte', () => {
        const transcript = openid4vpDcApiSessionTranscript({
            origin: 'https://example.com',
            nonce: 'exc7gBkxjx1rdc9udRrveKvSsJIq80avlXeLHhGwqtA',
            jwkThumbprint: hex('4283ec927ae0f208daaa2d026a814f2b22dca52cf85ffa8f3f8626c6bd669047')
        });
        expect(toHex(transcript)).to.equal('83f6f682764f70656e4944345650444341504948616e646f7665725820fbece366f4212f9762c74cfdbf83b8c69e371d5d68cea09cb4c48ca6daab761a');
    });

    it('reproduces the EncryptionInfo and Annex C SessionTranscript of a published browser capture byte for byte', () => {
        // SMART Health Check-in, Appendix A worked example (Chrome on Android with a reference wallet, a real capture).
        const b64 = (h: string) => Buffer.from(h, 'hex').toString('base64url');
        const encryptionInfo = encodeEncryptionInfo({
            kty: 'EC', crv: 'P-256',
            x: b64('f026861216af649117284de2f0d091262fc466f8dc6ba186dace3cea1fcfa78c'),
            y: b64('01fe366ca00581d686e154fc6f83aef0d5e009abd95a78a4c873a10617cc83bc')
        }, b64('f61661693eacf90c4df963876bb1d7f3fe435929c1c0edb012829014b4207599'));
        expect(encryptionInfo).to.equal('gmVkY2FwaaJlbm9uY2VYIPYWYWk-rPkMTfljh2ux1_P-Q1kpwcDtsBKCkBS0IHWZcnJlY2lwaWVudFB1YmxpY0tleaQBAiABIVgg8CaGEhavZJEXKE3i8NCRJi_EZvjca6GG2s486h_Pp4wiWCAB_jZsoAWB1obhVPxvg67w1eAJq9laeKTIc6EGF8yDvA');
        expect(toHex(annexCSessionTranscript({ encryptionInfo, origin: 'http://127.0.0.1:3010' }))).to.equal('83f6f68265646361706958205d373e34bbc5306ff28c944c2a1af663af3d503e179ed3ce9df0aa610a7ffe72');
    });

    it('builds the SessionTranscripts as the specifications write them', () => {
        const annexC = cborDecode(annexCSessionTranscript({ encryptionInfo: 'abc', origin: 'https://rp.example' })) as unknown[];
        expect(annexC[0]).to.equal(null);
        expect(annexC[1]).to.equal(null);
        expect((annexC[2] as unknown[])[0]).to.equal('dcapi');
        const dcApi = cborDecode(openid4vpDcApiSessionTranscript({ origin: 'https://rp.example', nonce: 'n', jwkThumbprint: null })) as unknown[];
        expect((dcApi[2] as unknown[])[0]).to.equal('OpenID4VPDCAPIHandover');
    });
});
