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
    });
}
