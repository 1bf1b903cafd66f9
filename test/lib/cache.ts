import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { ChangeCache, changedResource, changedTenant } from '../../lib/cache';
import { kindRef, type KindRef } from '../../lib/registry/kind';
import Crypto from 'node:crypto';
import { ColumnCipher } from '../../lib/crypto/column-cipher';
import { Database } from '../../lib/db/database';
import { createTestDatabase } from '../helpers/databases';

export const lab = Lab.script();
const { describe, it, afterEach } = lab;

/** Stands for the registry's change listeners: the write path reports every create, update or delete. */
class Changes {
    private readonly listeners: Array<{ kind: string; listener: (tenantId: string | null, id: string) => void }> = [];

    onChange({ kind }: KindRef<unknown>, listener: (tenantId: string | null, id: string) => void): void {
        this.listeners.push({ kind, listener });
    }

    report(kind: string, tenantId: string | null, id: string): void {
        this.listeners.filter((l) => l.kind === kind).forEach((l) => l.listener(tenantId, id));
    }
}

/** A loader that counts its reads and answers `value-<n>` (or what `next` says). */
const counting = () => {
    const loader = {
        reads: [] as string[][],
        next: undefined as undefined | (() => Promise<string>),
        load: (...key: string[]) => {
            loader.reads.push(key);
            return loader.next ? loader.next() : Promise.resolve(`${key.join('/')}#${loader.reads.length}`);
        }
    };
    return loader;
};

describe('ChangeCache', () => {
    const realNow = Date.now;
    afterEach(() => {
        Date.now = realNow;
    });

    it('reads once and then answers from memory', async () => {
        const loader = counting();
        const cache = new ChangeCache<[string], string>({ load: loader.load });
        expect(await cache.get('acme')).to.equal('acme#1');
        expect(await cache.get('acme')).to.equal('acme#1');
        expect(await cache.get('other')).to.equal('other#2');
        expect(loader.reads).to.equal([['acme'], ['other']]);
    });

    it('drops the changed tenant\'s entry on a change of one of its kinds, and only that', async () => {
        const registry = new Changes();
        const loader = counting();
        const cache = new ChangeCache<[string], string>({ load: loader.load }).dropOnChange(registry, [kindRef('Tenant'), kindRef('TrustList')], changedTenant);
        await cache.get('acme');
        await cache.get('other');
        registry.report('TrustList', 'acme', 'eu');
        expect(await cache.get('acme')).to.equal('acme#3');
        expect(await cache.get('other')).to.equal('other#2');
        registry.report('KeyChain', 'acme', 'k1');
        registry.report('TrustList', null, 'global');
        expect(await cache.get('acme')).to.equal('acme#3');
        registry.report('Tenant', 'acme', 'acme');
        expect(await cache.get('acme')).to.equal('acme#4');
    });

    it('drops one resource\'s entry, or all entries, as the rule says', async () => {
        const registry = new Changes();
        const loader = counting();
        const cache = new ChangeCache<[string, string], string>({ load: loader.load })
            .dropOnChange(registry, [kindRef('KeyChain')], changedResource)
            .dropOnChange(registry, [kindRef('Tenant')], () => 'all');
        await cache.get('acme', 'k1');
        await cache.get('acme', 'k2');
        registry.report('KeyChain', 'acme', 'k1');
        expect(await cache.get('acme', 'k1')).to.equal('acme/k1#3');
        expect(await cache.get('acme', 'k2')).to.equal('acme/k2#2');
        registry.report('Tenant', 'other', 'other');
        expect(await cache.get('acme', 'k1')).to.equal('acme/k1#4');
        expect(await cache.get('acme', 'k2')).to.equal('acme/k2#5');
    });

    it('reads again once an entry is older than ttlMs', async () => {
        let now = 1_000_000;
        Date.now = () => now;
        const loader = counting();
        const cache = new ChangeCache<[string], string>({ load: loader.load, ttlMs: 10_000 });
        expect(await cache.get('acme')).to.equal('acme#1');
        now += 9_999;
        expect(await cache.get('acme')).to.equal('acme#1');
        now += 1;
        expect(await cache.get('acme')).to.equal('acme#2');
        now += 9_999;
        expect(await cache.get('acme')).to.equal('acme#2');
    });

    it('keeps an entry without ttlMs until a change', async () => {
        let now = 1_000_000;
        Date.now = () => now;
        const loader = counting();
        const cache = new ChangeCache<[string], string>({ load: loader.load });
        await cache.get('acme');
        now += 86_400_000;
        expect(await cache.get('acme')).to.equal('acme#1');
    });

    it('shares one read between concurrent misses', async () => {
        const loader = counting();
        let release!: (value: string) => void;
        loader.next = () => new Promise((resolve) => {
            release = resolve;
        });
        const cache = new ChangeCache<[string], string>({ load: loader.load });
        const pending = [cache.get('acme'), cache.get('acme'), cache.get('acme')];
        release('loaded');
        expect(await Promise.all(pending)).to.equal(['loaded', 'loaded', 'loaded']);
        expect(loader.reads).to.have.length(1);
    });

    it('does not keep a failed read: every waiting caller gets the error, the next call reads again', async () => {
        const loader = counting();
        loader.next = () => Promise.reject(new Error('database down'));
        const cache = new ChangeCache<[string], string>({ load: loader.load, ttlMs: 60_000 });
        const [first, second] = await Promise.allSettled([cache.get('acme'), cache.get('acme')]);
        expect(first).to.equal({ status: 'rejected', reason: new Error('database down') });
        expect(second.status).to.equal('rejected');
        expect(loader.reads).to.have.length(1);
        loader.next = undefined;
        expect(await cache.get('acme')).to.equal('acme#2');
        expect(await cache.get('acme')).to.equal('acme#2');
    });

    it('a failed read that was overtaken by a change does not drop the newer entry', async () => {
        const registry = new Changes();
        const loader = counting();
        let fail!: (err: Error) => void;
        loader.next = () => new Promise((_, reject) => {
            fail = reject;
        });
        const cache = new ChangeCache<[string], string>({ load: loader.load }).dropOnChange(registry, [kindRef('Tenant')], changedTenant);
        const stale = cache.get('acme');
        registry.report('Tenant', 'acme', 'acme');
        loader.next = undefined;
        const fresh = cache.get('acme');
        fail(new Error('lost'));
        await expect(stale).to.reject('lost');
        expect(await fresh).to.equal('acme#2');
        expect(await cache.get('acme')).to.equal('acme#2');
        expect(loader.reads).to.have.length(2);
    });

    it('inside a transaction reads through the transaction: no shared outside read, nothing kept', async () => {
        const testDb = await createTestDatabase('sqlite');
        const db = Database.open(testDb.config, new ColumnCipher(Crypto.randomBytes(32)));
        try {
            const loader = counting();
            let release!: (value: string) => void;
            loader.next = () => new Promise((resolve) => {
                release = resolve;
            });
            const cache = new ChangeCache<[string], string>({ load: loader.load });
            // An outside read is pending (on SQLite it would wait for the connection a write transaction holds).
            const outside = cache.get('acme');
            loader.next = undefined;
            const inside = await db.transaction(() => cache.get('acme'));
            expect(inside).to.equal('acme#2');
            expect(loader.reads).to.have.length(2);
            release('outside');
            expect(await outside).to.equal('outside');
            // The transaction's read was not kept: the outside entry is what later reads get.
            expect(await cache.get('acme')).to.equal('outside');
            expect(loader.reads).to.have.length(2);
        }
        finally {
            await db.close();
            await testDb.drop();
        }
    });
});
