import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as Jose from 'jose';
import { jwkThumbprintSync, jwsPayload, verifyEcdsaJws } from '../../lib/crypto/jws';

/** The node:crypto JWS checks of the hot path against jose, the independent implementation they replace. */

export const lab = Lab.script();
const { describe, it } = lab;

const CURVES = [['ES256', 'P-256'], ['ES384', 'P-384'], ['ES512', 'P-521']] as const;

describe('lib/crypto/jws', () => {
    for (const [alg, crv] of CURVES) {
        it(`verifies what jose signs with ${alg}, refuses a changed payload or signature`, async () => {
            const { privateKey, publicKey } = Crypto.generateKeyPairSync('ec', { namedCurve: crv });
            const jwt = await new Jose.CompactSign(Buffer.from('{"a":1}')).setProtectedHeader({ alg }).sign(privateKey);
            expect(await verifyEcdsaJws(jwt, { alg }, publicKey, alg)).to.equal('valid');
            expect(jwsPayload(jwt).toString()).to.equal('{"a":1}');
            const [header, , signature] = jwt.split('.');
            expect(await verifyEcdsaJws(`${header}.${Buffer.from('{"a":2}').toString('base64url')}.${signature}`, { alg }, publicKey, alg)).to.equal('invalid');
            expect(await verifyEcdsaJws(`${header}.${jwt.split('.')[1]}.${signature!.slice(0, -2)}`, { alg }, publicKey, alg)).to.equal('invalid');
        });
    }

    it('says a key of another curve, a private key or a non-EC key does not fit', async () => {
        const p384 = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-384' });
        const rsa = Crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
        const jwt = 'e30.e30.AAAA';
        expect(await verifyEcdsaJws(jwt, { alg: 'ES256' }, p384.publicKey, 'ES256')).to.equal('unfit');
        expect(await verifyEcdsaJws(jwt, { alg: 'ES384' }, p384.privateKey, 'ES384')).to.equal('unfit');
        expect(await verifyEcdsaJws(jwt, { alg: 'ES256' }, rsa.publicKey, 'ES256')).to.equal('unfit');
    });

    it('leaves other algorithms, crit headers and a header alg other than the expected one to jose', async () => {
        const { publicKey } = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
        expect(await verifyEcdsaJws('e30.e30.AAAA', { alg: 'EdDSA' }, publicKey, 'EdDSA')).to.be.undefined();
        expect(await verifyEcdsaJws('e30.e30.AAAA', { alg: 'ES256', crit: ['b64'], b64: false }, publicKey, 'ES256')).to.be.undefined();
        expect(await verifyEcdsaJws('e30.e30.AAAA', { alg: 'ES384' }, publicKey, 'ES256')).to.be.undefined();
    });

    it('computes the RFC 7638 thumbprint as jose does for EC, RSA and OKP keys, and refuses incomplete keys', async () => {
        const keys = [
            Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey,
            Crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey,
            Crypto.generateKeyPairSync('ed25519').publicKey
        ];
        for (const key of keys) {
            const jwk = { ...key.export({ format: 'jwk' }), kid: 'ignored', use: 'sig' } as Record<string, unknown>;
            expect(jwkThumbprintSync(jwk)).to.equal(await Jose.calculateJwkThumbprint(jwk as Jose.JWK, 'sha256'));
        }
        expect(() => jwkThumbprintSync({ kty: 'EC', crv: 'P-256', x: 'AA' })).to.throw(TypeError);
        expect(() => jwkThumbprintSync({ kty: 'XYZ' })).to.throw(TypeError);
    });
});
