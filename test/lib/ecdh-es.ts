import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as Jose from 'jose';
import { decryptEcdhEs } from '../../lib/crypto/ecdh-es';
import { newP256Jwks, p256FromScalar } from '../../lib/crypto/p256';

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

    it('decrypts with the ECDH object of a session key, and refuses an ephemeral key off the curve or of another key', async () => {
        const { privateJwk, publicJwk } = newP256Jwks();
        const key = p256FromScalar(Buffer.from(privateJwk.d!, 'base64url'));
        const publicKey = await Jose.importJWK({ ...publicJwk, alg: 'ECDH-ES' }, 'ECDH-ES');
        const jwe = await new Jose.CompactEncrypt(Buffer.from('{"vp_token":{}}')).setProtectedHeader({ alg: 'ECDH-ES', enc: 'A128GCM' }).encrypt(publicKey);
        expect(decryptEcdhEs(jwe, key).plaintext.toString()).to.equal('{"vp_token":{}}');
        const other = newP256Jwks();
        expect(() => decryptEcdhEs(jwe, p256FromScalar(Buffer.from(other.privateJwk.d!, 'base64url')))).to.throw(/does not decrypt/);
        const [encodedHeader, ...rest] = jwe.split('.');
        const header = JSON.parse(Buffer.from(encodedHeader!, 'base64url').toString());
        const y = Buffer.from(header.epk.y, 'base64url');
        y[31] = y[31]! ^ 1;
        const offCurve = Buffer.from(JSON.stringify({ ...header, epk: { ...header.epk, y: y.toString('base64url') } })).toString('base64url');
        expect(() => decryptEcdhEs([offCurve, ...rest].join('.'), key)).to.throw(/does not decrypt/);
        const short = Buffer.from(JSON.stringify({ ...header, epk: { ...header.epk, y: 'AQ' } })).toString('base64url');
        expect(() => decryptEcdhEs([short, ...rest].join('.'), key)).to.throw(/does not decrypt/);
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
