import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { signOffLoop, verifyOffLoop } from '../../lib/crypto/thread-pool';

/** Signatures made and checked in the thread pool agree with node's synchronous forms, errors included. */

export const lab = Lab.script();
const { describe, it } = lab;

describe('lib/crypto/thread-pool', () => {
    const { privateKey, publicKey } = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const data = Buffer.from('the signed bytes');

    it('signs what the synchronous verify accepts, and verifies what the synchronous sign made', async () => {
        const made = await signOffLoop('sha256', data, { key: privateKey, dsaEncoding: 'ieee-p1363' });
        expect(made.length).to.equal(64);
        expect(Crypto.verify('sha256', data, { key: publicKey, dsaEncoding: 'ieee-p1363' }, made)).to.be.true();
        const synchronous = Crypto.sign('sha256', data, { key: privateKey, dsaEncoding: 'ieee-p1363' });
        expect(await verifyOffLoop('sha256', data, { key: publicKey, dsaEncoding: 'ieee-p1363' }, synchronous)).to.be.true();
    });

    it('refuses other bytes, another key and a changed signature', async () => {
        const signature = Crypto.sign('sha256', data, { key: privateKey, dsaEncoding: 'ieee-p1363' });
        const other = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey;
        expect(await verifyOffLoop('sha256', Buffer.from('other bytes'), { key: publicKey, dsaEncoding: 'ieee-p1363' }, signature)).to.be.false();
        expect(await verifyOffLoop('sha256', data, { key: other, dsaEncoding: 'ieee-p1363' }, signature)).to.be.false();
        const changed = Buffer.from(signature);
        changed[10] ^= 1;
        expect(await verifyOffLoop('sha256', data, { key: publicKey, dsaEncoding: 'ieee-p1363' }, changed)).to.be.false();
    });

    it('rejects where the synchronous forms throw', async () => {
        await expect(verifyOffLoop('no-such-hash', data, publicKey, Buffer.alloc(64))).to.reject();
        await expect(signOffLoop('sha256', data, publicKey)).to.reject();
    });
});
