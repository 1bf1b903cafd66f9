import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as Jose from 'jose';
import { decryptEcdhEs } from '../../lib/crypto/ecdh-es';

export const lab = Lab.script();
const { describe, it } = lab;

describe('ECDH-ES JWE decryption', () => {
    it('decrypts what jose encrypts, for A128GCM and A256GCM, with and without apu/apv', async () => {
        const { privateKey, publicKey } = await Jose.generateKeyPair('ECDH-ES', { crv: 'P-256', extractable: true });
        const key = Crypto.createPrivateKey({ key: await Jose.exportJWK(privateKey) as Crypto.JsonWebKey, format: 'jwk' });
        for (const enc of ['A128GCM', 'A256GCM']) {
            for (const party of [{}, { apu: Buffer.from('wallet').toString('base64url'), apv: Buffer.from('verifier-nonce').toString('base64url') }]) {
                const jwe = await new Jose.CompactEncrypt(Buffer.from('{"vp_token":{}}')).setProtectedHeader({ alg: 'ECDH-ES', enc, kid: 'k1', ...party }).encrypt(publicKey);
                const { header, plaintext } = decryptEcdhEs(jwe, key);
                expect(plaintext.toString()).to.equal('{"vp_token":{}}');
                expect(header.kid).to.equal('k1');
            }
        }
    });

    it('refuses tampering, other algorithms and other keys', async () => {
        const { privateKey, publicKey } = await Jose.generateKeyPair('ECDH-ES', { crv: 'P-256', extractable: true });
        const key = Crypto.createPrivateKey({ key: await Jose.exportJWK(privateKey) as Crypto.JsonWebKey, format: 'jwk' });
        const jwe = await new Jose.CompactEncrypt(Buffer.from('secret')).setProtectedHeader({ alg: 'ECDH-ES', enc: 'A256GCM' }).encrypt(publicKey);
        const parts = jwe.split('.');
        const flipped = Buffer.from(parts[3]!, 'base64url');
        flipped[0] = flipped[0]! ^ 1;
        expect(() => decryptEcdhEs([parts[0], parts[1], parts[2], flipped.toString('base64url'), parts[4]].join('.'), key)).to.throw(/does not decrypt/);
        expect(() => decryptEcdhEs(jwe, key, ['A128GCM'])).to.throw(/unsupported/);
        const other = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
        expect(() => decryptEcdhEs(jwe, other)).to.throw(/does not decrypt/);
        const wrapped = await new Jose.CompactEncrypt(Buffer.from('secret')).setProtectedHeader({ alg: 'ECDH-ES+A128KW', enc: 'A128GCM' }).encrypt(publicKey);
        expect(() => decryptEcdhEs(wrapped, key)).to.throw(/unsupported/);
        expect(() => decryptEcdhEs('a.b.c', key)).to.throw(/not a compact JWE/);
    });
});
