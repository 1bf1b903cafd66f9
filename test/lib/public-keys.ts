import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { ecPublicKey } from '../../lib/crypto/public-keys';

/** The kept imports of EC public JWKs: the same key as node's own import, refusals unchanged, bounded. */

export const lab = Lab.script();
const { describe, it } = lab;

/**
 * A fresh public key: P-256 from node's ECDH class. Thousands of generateKeyPairSync calls in a row once deadlocked
 * node 20 in CI (a key generation job's destructor, run by the garbage collector, waiting on a mutex).
 */
const publicJwk = (crv = 'P-256') => {
    if (crv !== 'P-256') {
        return Crypto.generateKeyPairSync('ec', { namedCurve: crv }).publicKey.export({ format: 'jwk' }) as { crv: string; x: string; y: string };
    }
    const point = Crypto.createECDH('prime256v1').generateKeys();
    return { kty: 'EC', crv, x: point.subarray(1, 33).toString('base64url'), y: point.subarray(33).toString('base64url') };
};

describe('lib/crypto/public-keys', () => {
    for (const crv of ['P-256', 'P-384', 'P-521']) {
        it(`imports a ${crv} JWK once and verifies what its private key signs`, () => {
            const { privateKey, publicKey } = Crypto.generateKeyPairSync('ec', { namedCurve: crv });
            const jwk = publicKey.export({ format: 'jwk' });
            const withOtherMembers: Crypto.JsonWebKey = { ...jwk, kid: 'ignored', use: 'sig' };
            const key = ecPublicKey(withOtherMembers);
            expect(key.equals(publicKey)).to.be.true();
            expect(ecPublicKey(jwk)).to.shallow.equal(key);
            const signature = Crypto.sign(null, Buffer.from('data'), privateKey);
            expect(Crypto.verify(null, Buffer.from('data'), key, signature)).to.be.true();
        });
    }

    it('gives another key for other coordinates or another curve name', () => {
        const a = publicJwk();
        const b = publicJwk();
        expect(ecPublicKey(a).equals(ecPublicKey(b))).to.be.false();
        expect(() => ecPublicKey({ ...a, crv: 'P-384' })).to.throw();
        expect(ecPublicKey(a).asymmetricKeyDetails?.namedCurve).to.equal('prime256v1');
    });

    it('refuses a point off the curve every time (a refusal is not kept) and members that are not strings', () => {
        const jwk = publicJwk();
        const y = Buffer.from(jwk.y, 'base64url');
        y[31] ^= 1;
        const off = { ...jwk, y: y.toString('base64url') };
        expect(() => ecPublicKey(off)).to.throw();
        expect(() => ecPublicKey(off)).to.throw();
        expect(() => ecPublicKey({ crv: 'P-256', x: jwk.x })).to.throw(TypeError);
        expect(() => ecPublicKey({ crv: 'P-256', x: jwk.x, y: 7 })).to.throw(TypeError);
        expect(() => ecPublicKey({ crv: 'P-256', x: `${jwk.x}AA`, y: jwk.y })).to.throw();
    });

    it('keeps only canonical coordinates: another spelling never finds a kept key, nor a curve name that is not one', () => {
        const jwk = publicJwk();
        const key = ecPublicKey(jwk);
        // A dot inside a coordinate is skipped by node's decoder: such a JWK still imports, but is not kept, so the
        // same bytes split elsewhere (which node refuses) cannot find it.
        const dotted = { ...jwk, x: `${jwk.x.slice(0, 20)}.${jwk.x.slice(20)}` };
        expect(ecPublicKey(dotted).equals(key)).to.be.true();
        expect(() => ecPublicKey({ crv: 'P-256', x: dotted.x.slice(0, 20), y: `${dotted.x.slice(21)}.${jwk.y}` })).to.throw();
        expect(() => ecPublicKey({ crv: `P-256.${jwk.x.slice(0, 20)}`, x: jwk.x.slice(20), y: jwk.y })).to.throw();
        expect(() => ecPublicKey({ crv: 'P-256', x: `${jwk.x}=`, y: jwk.y })).to.not.throw();
        expect(ecPublicKey(jwk)).to.shallow.equal(key);
    });

    it('keeps the 4,096 keys used last: a key used again stays, the least recently used is imported again', () => {
        const first = publicJwk();
        const kept = publicJwk();
        const firstKey = ecPublicKey(first);
        const keptKey = ecPublicKey(kept);
        for (let i = 0; i < 4096; i++) {
            ecPublicKey(publicJwk());
            if (i % 1000 === 0) {
                expect(ecPublicKey(kept)).to.shallow.equal(keptKey);
            }
        }
        expect(ecPublicKey(kept)).to.shallow.equal(keptKey);
        expect(ecPublicKey(first)).to.not.shallow.equal(firstKey);
        expect(ecPublicKey(first).equals(firstKey)).to.be.true();
    });
});
