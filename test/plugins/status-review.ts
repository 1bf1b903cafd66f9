import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { DIALECTS } from '../helpers/databases';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

// Defects found in review of the status plugin (issue #12), each with the test that showed it.

for (const dialect of DIALECTS) {
    describe(`status lists, review (${dialect})`, () => {
        let t: TestServer;
        let admin: string;
        const inject = (token: string | undefined, method: string, url: string, payload?: object) =>
            t.server.inject({ method, url, payload, headers: token ? bearer(token) : {} });

        before(async () => {
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-status', 'hallmark-kms-db', 'hallmark-tenancy') });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme', { statusListConfig: { bits: 1, capacity: 64, ttlSeconds: 600, immediateUpdate: false } });
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            expect((await inject(admin, 'POST', '/api/key-chain', { id: 'status', usageType: 'statusList' })).statusCode).to.equal(201);
        });
        after(() => t.stop());

        it('refuses a ttlSeconds whose token dates no clock can hold, instead of failing every GET of the tenant\'s lists with a 500', async () => {
            expect((await inject(admin, 'POST', '/api/status-lists', { id: 'ttl' })).statusCode).to.equal(201);
            // exp = iat + 2 ttl: ten trillion seconds is far beyond the last date JavaScript (and the database) hold.
            const put = await inject(admin, 'PUT', '/api/status-list-config', { bits: 1, capacity: 64, ttlSeconds: 10_000_000_000_000, immediateUpdate: false });
            expect(put.statusCode).to.equal(400);
            const res = await inject(undefined, 'GET', '/issuers/acme/status-management/status-list/ttl');
            expect(res.statusCode).to.equal(200);
        });

        // SQLite has one writer, so an allocation and a delete never interleave there; PostgreSQL runs them side by side.
        it('refuses to delete a list while an allocation of one of its indexes commits (no index left without its list, none reused)', { skip: dialect !== 'postgres' }, async () => {
            expect((await inject(admin, 'POST', '/api/status-lists', { id: 'race' })).statusCode).to.equal(201);
            const knex = t.server.db.knex;
            // An allocation in progress, as StatusAllocationService makes it: the state row locked FOR UPDATE.
            const allocation = await knex.transaction();
            try {
                await allocation('status_list_states').where({ tenantId: 'acme', listId: 'race' }).forUpdate().first('used');
                const deleting = inject(admin, 'DELETE', '/api/status-lists/race');
                // The delete is under way once it waits for the allocation's lock.
                for (let waited = 0; ; waited++) {
                    const { rows } = await knex.raw('select count(*)::int as waiting from pg_stat_activity where datname = current_database() and wait_event_type = \'Lock\'');
                    if (rows[0].waiting > 0) {
                        break;
                    }
                    expect(waited).to.be.below(500);
                    await new Promise((resolve) => setTimeout(resolve, 20));
                }
                const allocated = Buffer.alloc(8);
                allocated[0] = 1 << 5;
                await allocation('status_list_states').where({ tenantId: 'acme', listId: 'race' }).update({ allocated, used: 1 });
                await allocation('status_allocations').insert({ tenantId: 'acme', listId: 'race', idx: 5, credentialConfigurationId: 'pid', createdAt: new Date().toISOString() });
                await allocation.commit();
                expect((await deleting).statusCode).to.equal(409);
            }
            finally {
                if (!allocation.isCompleted()) {
                    await allocation.rollback();
                }
            }
            expect(await knex('status_list_states').where({ tenantId: 'acme', listId: 'race' }).first('used')).to.equal({ used: 1 });
            expect(((await inject(admin, 'GET', '/api/status-lists/race')).result as { used: number }).used).to.equal(1);
        });
    });
}
