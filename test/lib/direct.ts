import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { SessionService } from '../../plugins/sessions/services/session-service';
import { SingleUseStore } from '../../lib/db/single-use';
import { createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { startTestServer, type TestServer } from '../helpers/server';

/**
 * The prepared statements of lib/db/direct.ts (SQLite) never join someone else's transaction: a statement made
 * while a transaction holds the connection waits for it, as through knex, and one made inside a transaction is part
 * of it. Same results on PostgreSQL, where every statement goes through knex.
 */

export const lab = Lab.script();
const { describe, it, before, after } = lab;

for (const dialect of DIALECTS) {
    describe(`hot statements and transactions (${dialect})`, () => {
        let t: TestServer;
        let sessions: SessionService;
        let singleUse: SingleUseStore;

        before(async () => {
            t = await startTestServer(dialect);
            await createTenant(t.server, await rootToken(t.server), 'acme');
            sessions = new SessionService(t.server.db);
            singleUse = new SingleUseStore(t.server.db);
            // The connection is taken in the background on first use.
            await sessions.get('warm-up');
            await new Promise((resolve) => setTimeout(resolve, 50));
        });

        after(async () => {
            await t?.stop();
        });

        it('a statement outside a rolled-back transaction is kept, one inside it is not', async () => {
            let inside: string | undefined;
            let opened!: () => void;
            const open = new Promise<void>((resolve) => {
                opened = resolve;
            });
            const rolledBack = t.server.db.transaction(async () => {
                inside = (await sessions.create({ tenantId: 'acme', type: 'issuance' })).id;
                opened();
                await new Promise((resolve) => setTimeout(resolve, 50));
                throw new Error('roll back');
            });
            await open;
            // Another request while the transaction is open: this test's own context, outside the transaction.
            let outside: string | undefined;
            const other = sessions.create({ tenantId: 'acme', type: 'issuance' }).then((s) => {
                outside = s.id;
            });
            await new Promise((resolve) => setTimeout(resolve, 10));
            if (dialect === 'sqlite') {
                // One connection, held by the transaction: the other statement waits (PostgreSQL has a pool).
                expect(outside).to.not.exist();
            }
            await expect(rolledBack).to.reject('roll back');
            await other;
            expect(await sessions.get(inside!)).to.not.exist();
            expect((await sessions.get(outside!))?.tenantId).to.equal('acme');
        });

        it('updates, single use and reads behave the same on both paths', async () => {
            const session = await sessions.create({ tenantId: 'acme', type: 'presentation', walletNonce: `wn-${Date.now()}`, data: {} as never });
            expect(await sessions.transition(session.id, ['active'], 'fetched')).to.be.true();
            expect(await sessions.transition(session.id, ['active'], 'completed')).to.be.false();
            expect((await sessions.findByWalletNonce('presentation', session.walletNonce!))?.status).to.equal('fetched');
            expect(await sessions.update(session.id, {}, { below: { column: 'txCodeFailures', limit: 1 }, increment: 'txCodeFailures' })).to.be.true();
            expect(await sessions.update(session.id, {}, { below: { column: 'txCodeFailures', limit: 1 }, increment: 'txCodeFailures' })).to.be.false();
            expect((await sessions.get(session.id))?.txCodeFailures).to.equal(1);
            await singleUse.issue('acme', `direct-${session.id}`, 60);
            expect(await singleUse.consume('acme', `direct-${session.id}`)).to.be.true();
            expect(await singleUse.consume('acme', `direct-${session.id}`)).to.be.false();
            expect(await singleUse.claim('acme', `claim-${session.id}`, 60)).to.be.true();
            expect(await singleUse.claim('acme', `claim-${session.id}`, 60)).to.be.false();
        });
    });
}
