import Cluster, { type Worker } from 'node:cluster';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { relayClusterBus } from '../../lib/cluster-relay';

export const lab = Lab.script();
const { describe, it } = lab;

const root = Path.join(__dirname, '..', '..');

/**
 * The change bus of SQLite cluster workers: real worker processes (test/fixtures/cluster-bus-worker.ts) with this
 * test as their primary, relaying with relayClusterBus as `hallmark start` does.
 */
describe('change bus over cluster IPC', () => {
    it('relays what one worker publishes to every other worker, never back to the sender', { timeout: 60_000 }, async () => {
        Cluster.setupPrimary({ exec: Path.join(__dirname, '..', 'fixtures', 'cluster-bus-worker.ts'), execArgv: ['-r', Path.join(root, 'scripts/register-ts.js')], silent: true });
        relayClusterBus(Cluster);
        const heard = new Map<number, unknown[]>();
        const ready = new Set<number>();
        const workers: Worker[] = [Cluster.fork(), Cluster.fork(), Cluster.fork()];
        const onMessage = (worker: Worker, message: { heard?: unknown; ready?: string; transport?: string }) => {
            if (message.ready) {
                expect(message.ready).to.equal('cluster-ipc');
                ready.add(worker.id);
            }
            if ('heard' in message) {
                heard.set(worker.id, [...heard.get(worker.id) ?? [], message.heard]);
            }
        };
        Cluster.on('message', onMessage);
        const until = async (check: () => boolean) => {
            const deadline = Date.now() + 40_000;
            while (!check()) {
                if (Date.now() > deadline) {
                    throw new Error('timed out');
                }
                await new Promise((r) => setTimeout(r, 20));
            }
        };
        try {
            await until(() => ready.size === 3);
            const [a, b, c] = workers as [Worker, Worker, Worker];
            for (let i = 0; i < 20; i++) {
                a.send({ publish: { n: i } });
            }
            await until(() => (heard.get(b.id)?.length ?? 0) === 20 && (heard.get(c.id)?.length ?? 0) === 20);
            expect(heard.get(b.id)).to.equal(Array.from({ length: 20 }, (_, n) => ({ n })));
            expect(heard.get(c.id)).to.equal(heard.get(b.id));
            c.send({ publish: 'from c' });
            await until(() => heard.get(a.id)?.length === 1);
            expect(heard.get(a.id)).to.equal(['from c']);
            // Nothing came back to a sender: c heard only a's twenty, a only c's one.
            await new Promise((r) => setTimeout(r, 100));
            expect(heard.get(a.id)).to.have.length(1);
            expect(heard.get(c.id)).to.have.length(20);
        }
        finally {
            Cluster.off('message', onMessage);
            await Promise.all(workers.map((w) => new Promise((resolve) => {
                w.once('exit', resolve);
                w.send({ close: true }, undefined, () => undefined);
                setTimeout(() => w.process.kill('SIGKILL'), 10_000).unref();
            })));
        }
    });
});
