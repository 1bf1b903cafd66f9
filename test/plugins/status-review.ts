import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { DIALECTS } from '../helpers/databases';
import { freePort } from '../helpers/net';
import { Wallet } from '../helpers/wallet';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';
import { STATUS_LIST_PUBLISH_JOB } from '../../plugins/status/jobs/publish';
import { StatusEntryService } from '../../plugins/status/services/entries';
import { statusListKind } from '../../resources/status-list';

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

        it('keeps serving a list whose document was updated (another signing chain) until its token is re-signed', async () => {
            expect((await inject(admin, 'POST', '/api/key-chain', { id: 'other-status', usageType: 'statusList' })).statusCode).to.equal(201);
            expect((await inject(admin, 'POST', '/api/status-lists', { id: 'rekeyed', keyChainId: 'status' })).statusCode).to.equal(201);
            const url = '/issuers/acme/status-management/status-list/rekeyed';
            const first = await inject(undefined, 'GET', url);
            expect(first.statusCode).to.equal(200);
            const written = await t.server.registry.write({ tenantId: 'acme', clientId: 'test', roles: [] }, statusListKind, { id: 'rekeyed', bits: 1, capacity: 64, keyChainId: 'other-status' });
            expect(written.action).to.equal('update');
            // Without immediateUpdate the publishing job re-signs it; until then the valid token is served.
            const res = await inject(undefined, 'GET', url);
            expect(res.statusCode, res.payload).to.equal(200);
            expect(res.payload).to.equal(first.payload);
            // The publishing job re-signs it with the new chain.
            await t.server.jobs.runNow(STATUS_LIST_PUBLISH_JOB);
            const resigned = await inject(undefined, 'GET', url);
            expect(resigned.statusCode).to.equal(200);
            const x5cOf = (jwt: string) => (JSON.parse(Buffer.from(jwt.split('.')[0]!, 'base64url').toString('utf8')) as { x5c: string[] }).x5c[0];
            const chain = ((await inject(admin, 'GET', '/api/key-chain/other-status')).result as { certificateChain: string[] }).certificateChain;
            expect(x5cOf(resigned.payload)).to.equal(chain[0]!.replace(/-----[A-Z ]+-----|\s/g, ''));
            expect(x5cOf(resigned.payload)).to.not.equal(x5cOf(first.payload));
        });

        /** Waits until a PostgreSQL backend of the test database waits for a lock. */
        const lockWaiting = async () => {
            for (let waited = 0; ; waited++) {
                const { rows } = await t.server.db.knex.raw('select count(*)::int as waiting from pg_stat_activity where datname = current_database() and wait_event_type = \'Lock\'');
                if (rows[0].waiting > 0) {
                    return;
                }
                expect(waited).to.be.below(500);
                await new Promise((resolve) => setTimeout(resolve, 20));
            }
        };

        it('locks the lists of a session revocation in the order an allocation that rolls over locks them (no deadlock, none of them fails)', { skip: dialect !== 'postgres' }, async () => {
            // Created in this order: an allocation rolls over from the older to the newer, whose id sorts first.
            for (const id of ['zz-older', 'aa-newer']) {
                expect((await inject(admin, 'POST', '/api/status-lists', { id, capacity: 16 })).statusCode).to.equal(201);
            }
            const knex = t.server.db.knex;
            // Index 1 of both lists went to the credentials of one issuance session.
            for (const listId of ['zz-older', 'aa-newer']) {
                await knex('status_list_states').where({ tenantId: 'acme', listId }).update({ allocated: Buffer.from([0b10, 0]), used: 1 });
                await knex('status_allocations').insert({ tenantId: 'acme', listId, idx: 1, sessionId: 'session-dl', credentialConfigurationId: 'pid', createdAt: new Date().toISOString() });
            }
            const entries = new StatusEntryService({ db: t.server.db, registry: t.server.registry });
            // An allocation under way: the older list locked, the newer one next once the older is full.
            const allocation = await knex.transaction();
            try {
                await allocation('status_list_states').where({ tenantId: 'acme', listId: 'zz-older' }).forUpdate().first('used');
                const revoking = entries.setSession({ tenantId: 'acme', clientId: 'acme-admin', roles: [] }, 'session-dl', {});
                await lockWaiting();
                await allocation('status_list_states').where({ tenantId: 'acme', listId: 'aa-newer' }).forUpdate().first('used');
                await allocation.commit();
                expect(await revoking).to.equal(2);
            }
            finally {
                if (!allocation.isCompleted()) {
                    await allocation.rollback();
                }
            }
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

for (const dialect of DIALECTS) {
    describe(`status lists, issuance review (${dialect})`, () => {
        let t: TestServer;
        let admin: string;
        const api = async (method: string, url: string, payload?: object) => {
            const res = await t.server.inject({ method, url, headers: bearer(admin), ...(payload ? { payload } : {}) });
            return { status: res.statusCode, body: res.result as any, payload: res.payload };
        };

        before(async () => {
            const port = await freePort();
            t = await startTestServer(dialect, { listen: true, manifest: manifestFor('hallmark-status', 'hallmark-kms-db', 'hallmark-tenancy'), env: { PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}` } });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme', { statusListConfig: { bits: 1, capacity: 64, ttlSeconds: 600, immediateUpdate: false } });
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            expect((await api('POST', '/api/key-chain', { id: 'issuer', usageType: 'attestation' })).status).to.equal(201);
        });
        after(() => t?.stop());

        it('refuses SD-JWT VC claim fields at claims the issuer sets itself (a disclosable status failed every credential request with a 500)', async () => {
            const config = (field: Record<string, unknown>) => ({
                id: 'member',
                config: { format: 'dc+sd-jwt', display: [{ locale: 'en', name: 'member' }] },
                vct: 'urn:test:member',
                keyChainId: 'issuer',
                fields: [{ path: ['given_name'], type: 'string', mandatory: true, disclosable: true }, field],
                lifeTime: 3600,
                statusManagement: true
            });
            for (const field of [{ path: ['status'], type: 'string', disclosable: true }, { path: ['status'], type: 'object' }, { path: ['cnf'], type: 'object', disclosable: true }, { path: ['iss'], type: 'string' }, { path: ['exp'], type: 'integer' }, { path: ['_sd'], type: 'array' }]) {
                const res = await api('POST', '/api/issuer/credentials', config(field));
                expect(res.status, res.payload).to.equal(400);
                expect(res.body.details[0], res.payload).to.include({ path: 'fields.1.path' });
                expect(res.body.details[0].message).to.contain(`names ${(field.path as string[])[0]}`);
            }
            // Such names are fine inside an object, and a sub claim is the holder's own.
            const nested = await api('POST', '/api/issuer/credentials', config({ path: ['membership'], type: 'object', disclosable: true, children: [{ path: ['status'], type: 'string', disclosable: true }] }));
            expect(nested.status, nested.payload).to.equal(201);
            const offer = await api('POST', '/api/issuer/offer', { credentialConfigurationIds: ['member'], credentialClaims: { member: { type: 'inline', claims: { given_name: 'Erika', membership: { status: 'gold' } } } } });
            expect(offer.status, offer.payload).to.equal(201);
            const received = await new Wallet().receive(offer.body.uri, { configurationId: 'member' });
            // The status list claim is in the issuer-signed JWT itself, never a disclosure the holder could leave out.
            const payload = JSON.parse(Buffer.from(received.credentials[0]!.split('~')[0]!.split('.')[1]!, 'base64url').toString('utf8'));
            expect(payload.status.status_list.uri).to.be.a.string();
        });
    });
}
