import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { ColumnCipher, deriveKeyFromMasterSecret } from '../../lib/crypto/column-cipher';

export const lab = Lab.script();
const { describe, it } = lab;

describe('column cipher', () => {
    it('round-trips and never stores the plaintext', () => {
        const cipher = new ColumnCipher(Crypto.randomBytes(32));
        const sealed = cipher.encrypt('private key material');
        expect(sealed).to.startWith('hm1.');
        expect(sealed).to.not.contain('private key material');
        expect(cipher.decrypt(sealed)).to.equal('private key material');
        expect(cipher.encrypt('same')).to.not.equal(cipher.encrypt('same'));
    });

    it('detects tampering', () => {
        const cipher = new ColumnCipher(Crypto.randomBytes(32));
        const sealed = cipher.encrypt('value');
        const body = Buffer.from(sealed.split('.')[2]!, 'base64url');
        body[14] = body[14]! ^ 1;
        const tampered = `${sealed.split('.').slice(0, 2).join('.')}.${body.toString('base64url')}`;
        expect(() => cipher.decrypt(tampered)).to.throw();
    });

    it('rotates: a new key decrypts values sealed under a previous key and reports them for re-encryption', () => {
        const oldKey = Crypto.randomBytes(32);
        const sealedUnderOld = new ColumnCipher(oldKey).encrypt('v');
        const rotated = new ColumnCipher(Crypto.randomBytes(32), [oldKey]);
        expect(rotated.decrypt(sealedUnderOld)).to.equal('v');
        expect(rotated.needsRotation(sealedUnderOld)).to.be.true();
        expect(rotated.needsRotation(rotated.encrypt('v'))).to.be.false();
        expect(() => new ColumnCipher(Crypto.randomBytes(32)).decrypt(sealedUnderOld)).to.throw(/unknown key/);
    });

    it('derives the key from MASTER_SECRET by HKDF unless ENCRYPTION_KEY is given', () => {
        const master = 'm'.repeat(40);
        const fromMaster = ColumnCipher.fromSecrets({ masterSecret: master });
        expect(new ColumnCipher(deriveKeyFromMasterSecret(master)).decrypt(fromMaster.encrypt('x'))).to.equal('x');
        const key = Crypto.randomBytes(32);
        const fromKey = ColumnCipher.fromSecrets({ masterSecret: master, encryptionKey: key.toString('hex') });
        expect(new ColumnCipher(key).decrypt(fromKey.encrypt('y'))).to.equal('y');
        expect(() => fromMaster.decrypt(fromKey.encrypt('y'))).to.throw();
    });
});
