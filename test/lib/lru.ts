import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { LruMap } from '../../lib/lru';

export const lab = Lab.script();
const { describe, it } = lab;

describe('lib/lru', () => {
    it('keeps the entries used last, up to its limit', () => {
        const map = new LruMap<string, number>(3);
        map.set('a', 1);
        map.set('b', 2);
        map.set('c', 3);
        expect(map.get('a')).to.equal(1);
        map.set('d', 4);
        // b was used least recently: a was read after it.
        expect(map.get('b')).to.be.undefined();
        expect([map.get('a'), map.get('c'), map.get('d')]).to.equal([1, 3, 4]);
        expect(map.size).to.equal(3);
    });

    it('replaces the value of a key it holds without dropping another', () => {
        const map = new LruMap<string, number>(2);
        map.set('a', 1);
        map.set('b', 2);
        map.set('a', 10);
        expect(map.size).to.equal(2);
        map.set('c', 3);
        // a was set after b: b goes.
        expect(map.get('b')).to.be.undefined();
        expect([map.get('a'), map.get('c')]).to.equal([10, 3]);
    });
});
