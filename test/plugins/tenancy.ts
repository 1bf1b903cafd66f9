import { expect } from '@hapi/code';
import type Hapi from '@hapi/hapi';
import * as Lab from '@hapi/lab';
import Joi from 'joi';
import { assertConfigsAllowed, type ConfigUse } from '../../plugins/oauth2/allowed-configs';
import { ClientModel } from '../../plugins/oauth2/models/client';
import { pruneAuditLog } from '../../plugins/tenancy/jobs/audit-prune';
import { bearer, clientWithToken, createClient, createTenant, jwtClaims, rootToken, tenantRowCounts, tenantSnapshot, tenantTables, tokenFor } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { manifestFor, ROOT_CLIENT, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

/** A test-only route that uses configurations the way offers and requests will: through assertConfigsAllowed. */
const useConfigPlugin: Hapi.Plugin<Record<string, never>> = {
    name: 'test-use-config',
    dependencies: ['hallmark-oauth2'],
    register(server) {
        server.route({
            method: 'POST',
            path: '/api/test/use-config',
            options: {
                auth: { access: { scope: ['issuance:offer', 'presentation:request'] } },
                validate: {
                    payload: Joi.object({
                        use: Joi.string().valid('issuance', 'presentation').required(),
                        ids: Joi.array().items(Joi.string()).required()
                    })
                }
            },
            handler: async (request) => {
                const { use, ids } = request.payload as { use: ConfigUse; ids: string[] };
                await assertConfigsAllowed(request, use, ids);
                return { ok: true };
            }
        });
    }
};

const manifest = manifestFor('hallmark-tenancy', { plugin: useConfigPlugin });

const DAY = 86_400_000;

interface AuditEntry {
    id: number;
    tenantId: string | null;
    actor: string;
    action: string;
    kind: string;
    resourceId: string | null;
    changes: Array<{ path: string; before?: unknown; after?: unknown }> | null;
    createdAt: string;
}

interface PageBody<T> {
    items: T[];
    total: number;
    page: number;
    pageSize: number;
    totalPages: number;
}

for (const dialect of DIALECTS) {
    describe(`tenancy (${dialect})`, () => {
        let t: TestServer;
        let root: string;

        before(async () => {
            t = await startTestServer(dialect, { manifest });
            root = await rootToken(t.server);
        });
        after(() => t.stop());

        const call = (method: string, url: string, token?: string, payload?: unknown) =>
            t.server.inject({ method, url, headers: token ? bearer(token) : {}, ...(payload === undefined ? {} : { payload: payload as object }) });
        const body = (res: { result: unknown }) => res.result as any;
        const tokenStatus = async (clientId: string, secret: string) => {
            const res = await t.server.inject({ method: 'POST', url: '/api/oauth2/token', payload: { grant_type: 'client_credentials', client_id: clientId, client_secret: secret } });
            return { status: res.statusCode, error: body(res).error as string | undefined };
        };
        const rawClient = async (clientId: string) => (await t.server.db.knex('clients').where('client_id', clientId))[0] as Record<string, unknown> | undefined;
        /** Entries of one tenant (or the global ones), newest first, as root sees them. */
        const auditOf = async (tenantId?: string, query = ''): Promise<AuditEntry[]> => {
            const res = await call('GET', `/api/admin/audit-logs?pageSize=100${tenantId ? `&tenantId=${tenantId}` : ''}${query}`, root);
            expect(res.statusCode, res.payload).to.equal(200);
            return body(res).items;
        };
        /** A client stored directly, with roles exactly as given (e.g. an alias), and a token for it. */
        const storedClientToken = async (clientId: string, tenantId: string, roles: string[]) => {
            const secret = `secret-of-${clientId}-0123456789`;
            const now = new Date().toISOString();
            await t.server.db.model(ClientModel).query().insert({
                clientId, tenantId, description: null, roles, allowedPresentationConfigs: null, allowedIssuanceConfigs: null,
                secretHash: t.server.db.secretHasher.hash(secret), generation: 1, ownership: 'unmanaged', createdAt: now, updatedAt: now
            });
            return tokenFor(t.server, clientId, secret);
        };

        describe('tenants', () => {
            let adminToken: string;
            before(async () => {
                await createTenant(t.server, root, 'ten-home');
                ({ token: adminToken } = await clientWithToken(t.server, root, { clientId: 'ten-admin', roles: ['tenant:admin'], tenantId: 'ten-home' }));
            });

            it('creates, reads, updates and deletes a tenant as root', async () => {
                const created = await call('POST', '/api/tenants', root, { id: 'ten-crud', name: 'Crud', description: 'first' });
                expect(created.statusCode, created.payload).to.equal(201);
                expect(body(created)).to.include({ id: 'ten-crud', name: 'Crud', description: 'first' });
                expect(body(created).createdAt).to.be.a.string();
                expect(body(created).updatedAt).to.be.a.string();

                const read = await call('GET', '/api/tenants/ten-crud', root);
                expect(read.statusCode).to.equal(200);
                expect(body(read)).to.equal(body(created));

                const patched = await call('PATCH', '/api/tenants/ten-crud', root, { name: 'Crud 2', sessionConfig: { ttlSeconds: 120, cleanupMode: 'full' } });
                expect(patched.statusCode, patched.payload).to.equal(200);
                expect(body(patched)).to.include({ id: 'ten-crud', name: 'Crud 2', description: 'first', sessionConfig: { ttlSeconds: 120, cleanupMode: 'full' } });
                const reread = await call('GET', '/api/tenants/ten-crud', root);
                expect(body(reread)).to.include({ name: 'Crud 2', description: 'first' });

                const deleted = await call('DELETE', '/api/tenants/ten-crud', root);
                expect(deleted.statusCode).to.equal(204);
                expect(deleted.payload).to.equal('');
                expect((await call('GET', '/api/tenants/ten-crud', root)).statusCode).to.equal(404);
                expect((await call('DELETE', '/api/tenants/ten-crud', root)).statusCode).to.equal(404);
            });

            it('answers 404 for a missing tenant on GET, PATCH and DELETE', async () => {
                for (const [method, payload] of [['GET'], ['PATCH', { name: 'x' }], ['DELETE']] as const) {
                    const res = await call(method, '/api/tenants/ten-missing', root, payload);
                    expect(res.statusCode, `${method}`).to.equal(404);
                    expect(body(res)).to.include({ statusCode: 404, error: 'Not Found' });
                }
            });

            it('lists tenants in pages of {items, total, page, pageSize, totalPages}', async () => {
                for (let i = 1; i <= 5; i++) {
                    await createTenant(t.server, root, `ten-page-${i}`);
                }
                const all = await call('GET', '/api/tenants?pageSize=100', root);
                expect(all.statusCode).to.equal(200);
                const full = body(all) as PageBody<{ id: string }>;
                expect(full.total).to.equal(full.items.length);
                expect(full).to.include({ page: 1, pageSize: 100, totalPages: 1 });
                const ids = full.items.map((i) => i.id);
                expect(ids).to.include(['ten-home', 'ten-page-1', 'ten-page-5']);

                const byDefault = body(await call('GET', '/api/tenants', root)) as PageBody<unknown>;
                expect(byDefault).to.include({ page: 1, pageSize: 25, total: full.total });

                const paged: string[] = [];
                const totalPages = Math.ceil(full.total / 2);
                for (let page = 1; page <= totalPages; page++) {
                    const res = body(await call('GET', `/api/tenants?pageSize=2&page=${page}`, root)) as PageBody<{ id: string }>;
                    expect(res).to.include({ page, pageSize: 2, total: full.total, totalPages });
                    expect(res.items.length).to.equal(page < totalPages ? 2 : full.total - 2 * (totalPages - 1));
                    paged.push(...res.items.map((i) => i.id));
                }
                expect(paged).to.equal(ids);
                const beyond = body(await call('GET', `/api/tenants?pageSize=2&page=${totalPages + 1}`, root)) as PageBody<unknown>;
                expect(beyond.items).to.equal([]);
            });

            it('accepts pageSize 1 to 100 and rejects values outside with 400', async () => {
                for (const size of [1, 100]) {
                    expect((await call('GET', `/api/tenants?pageSize=${size}`, root)).statusCode).to.equal(200);
                }
                for (const query of ['pageSize=0', 'pageSize=101', 'pageSize=-1', 'pageSize=abc', 'page=0']) {
                    const res = await call('GET', `/api/tenants?${query}`, root);
                    expect(res.statusCode, query).to.equal(400);
                }
            });

            it('rejects unknown fields with 400 naming the field', async () => {
                const created = await call('POST', '/api/tenants', root, { id: 'ten-unknown', name: 'U', colour: 'red' });
                expect(created.statusCode).to.equal(400);
                expect(body(created).message).to.contain('colour');
                expect(body(created).details).to.equal([{ path: 'colour', message: '"colour" is not allowed' }]);
                expect((await call('GET', '/api/tenants/ten-unknown', root)).statusCode).to.equal(404);

                const patched = await call('PATCH', '/api/tenants/ten-home', root, { flavour: 'x' });
                expect(patched.statusCode).to.equal(400);
                expect(body(patched).message).to.contain('flavour');
                const nested = await call('POST', '/api/tenants', root, { id: 'ten-unknown', name: 'U', sessionConfig: { ttlSeconds: 100, cleanupMode: 'full', extra: 1 } });
                expect(nested.statusCode).to.equal(400);
                expect(body(nested).details[0].path).to.equal('sessionConfig.extra');
            });

            it('rejects an invalid tenant id, an empty PATCH and a PATCH of the id with 400', async () => {
                for (const id of ['A!', 'a', '-ab', 'Upper', 'x'.repeat(64)]) {
                    const res = await call('POST', '/api/tenants', root, { id, name: 'bad' });
                    expect(res.statusCode, id).to.equal(400);
                    expect(body(res).details[0].path).to.equal('id');
                }
                expect((await call('GET', '/api/tenants/A%21', root)).statusCode).to.equal(400);
                expect((await call('PATCH', '/api/tenants/ten-home', root, {})).statusCode).to.equal(400);
                expect((await call('PATCH', '/api/tenants/ten-home', root, { id: 'ten-other' })).statusCode).to.equal(400);
                expect((await call('POST', '/api/tenants', root, { id: 'ten-noname' })).statusCode).to.equal(400);
            });

            it('answers 409 to a duplicate tenant and keeps the first', async () => {
                await createTenant(t.server, root, 'ten-dup', { name: 'First' });
                const res = await call('POST', '/api/tenants', root, { id: 'ten-dup', name: 'Second' });
                expect(res.statusCode).to.equal(409);
                expect(body(res)).to.include({ statusCode: 409, error: 'Conflict' });
                expect(body(await call('GET', '/api/tenants/ten-dup', root)).name).to.equal('First');
            });

            it('refuses a tenant:admin client on every tenants route with 403 and changes nothing', async () => {
                const snapshot = await tenantSnapshot(t.server, 'ten-home');
                const attempts: Array<[string, string, unknown?]> = [
                    ['GET', '/api/tenants'],
                    ['POST', '/api/tenants', { id: 'ten-by-admin', name: 'No' }],
                    ['GET', '/api/tenants/ten-home'],
                    ['PATCH', '/api/tenants/ten-home', { name: 'Hijacked' }],
                    ['DELETE', '/api/tenants/ten-home']
                ];
                for (const [method, url, payload] of attempts) {
                    const res = await call(method, url, adminToken, payload);
                    expect(res.statusCode, `${method} ${url}`).to.equal(403);
                    expect(body(res)).to.include({ statusCode: 403, error: 'Forbidden' });
                }
                expect(await tenantSnapshot(t.server, 'ten-home')).to.equal(snapshot);
                expect((await call('GET', '/api/tenants/ten-by-admin', root)).statusCode).to.equal(404);
            });

            it('answers 401 with a Bearer challenge without a token or with a bad one', async () => {
                for (const [method, url] of [['GET', '/api/tenants'], ['POST', '/api/tenants'], ['GET', '/api/tenants/ten-home'], ['PATCH', '/api/tenants/ten-home'], ['DELETE', '/api/tenants/ten-home']]) {
                    for (const headers of [{}, { authorization: 'Bearer garbage' }, { authorization: `Bearer ${root.slice(0, -4)}AAAA` }]) {
                        const res = await t.server.inject({ method: method!, url: url!, headers, payload: method === 'POST' ? { id: 'ten-anon', name: 'x' } : undefined });
                        expect(res.statusCode, `${method} ${url}`).to.equal(401);
                        expect(String(res.headers['www-authenticate'])).to.startWith('Bearer');
                    }
                }
                expect((await call('GET', '/api/tenants/ten-anon', root)).statusCode).to.equal(404);
            });
        });

        describe('tenant deletion', () => {
            const setUp = async (id: string) => {
                await createTenant(t.server, root, id);
                const admin = await clientWithToken(t.server, root, { clientId: `${id}-admin`, roles: ['tenant:admin'], tenantId: id });
                const worker = await createClient(t.server, admin.token, { clientId: `${id}-worker`, roles: ['issuance:offer'] });
                expect((await call('PUT', '/api/session-config', admin.token, { ttlSeconds: 600, cleanupMode: 'full' })).statusCode).to.equal(200);
                expect((await call('POST', `/api/clients/${id}-worker/rotate-secret`, admin.token)).statusCode).to.equal(200);
                // A configuration document of a kind the default manifest does not register yet: the shared table.
                const now = new Date().toISOString();
                await t.server.db.knex('resources').insert({ tenant_id: id, kind: 'TestKind', id: 'doc-1', version: 1, spec: '{}', generation: 1, ownership: 'unmanaged', created_at: now, updated_at: now });
                return { admin, worker };
            };

            it('removes every row the tenant owns in every tenant table, and nothing of another tenant', async () => {
                const a = await setUp('del-a');
                await setUp('del-b');
                const tables = await tenantTables(t.server);
                expect(tables).to.include(['audit_logs', 'clients', 'resources']);

                const beforeA = await tenantRowCounts(t.server, 'del-a');
                const beforeB = await tenantRowCounts(t.server, 'del-b');
                const snapshotB = await tenantSnapshot(t.server, 'del-b');
                for (const counts of [beforeA, beforeB]) {
                    expect(counts.clients).to.equal(2);
                    expect(counts.resources).to.equal(1);
                    expect(counts.audit_logs).to.be.at.least(5);
                    expect(counts.tenants).to.equal(1);
                }

                const res = await call('DELETE', '/api/tenants/del-a', root);
                expect(res.statusCode).to.equal(204);

                const afterA = await tenantRowCounts(t.server, 'del-a');
                expect(afterA).to.equal(Object.fromEntries(Object.keys(beforeA).map((k) => [k, 0])));
                expect(await tenantRowCounts(t.server, 'del-b')).to.equal(beforeB);
                expect(await tenantSnapshot(t.server, 'del-b')).to.equal(snapshotB);

                expect(await tokenStatus(a.admin.clientId, a.admin.clientSecret)).to.equal({ status: 401, error: 'invalid_client' });
                const global = (await auditOf()).filter((e) => e.kind === 'Tenant' && e.resourceId === 'del-a');
                expect(global.map((e) => [e.action, e.actor, e.tenantId])).to.equal([['delete', ROOT_CLIENT.id, null]]);
            });

            it('rolls the whole deletion back when any part of it fails', async () => {
                await setUp('del-c');
                const snapshot = await tenantSnapshot(t.server, 'del-c');
                const { knex } = t.server.db;
                if (t.server.db.dialect === 'sqlite') {
                    await knex.raw(`create trigger test_block_delete before delete on tenants when old.id = 'del-c' begin select raise(abort, 'blocked by test'); end`);
                }
                else {
                    await knex.raw(`create function test_block_delete() returns trigger language plpgsql as $$ begin raise exception 'blocked by test'; end $$`);
                    await knex.raw(`create trigger test_block_delete before delete on tenants for each row when (old.id = 'del-c') execute function test_block_delete()`);
                }
                try {
                    const res = await call('DELETE', '/api/tenants/del-c', root);
                    expect(res.statusCode).to.equal(500);
                    expect(res.payload).to.not.contain('blocked by test');
                }
                finally {
                    await knex.raw(t.server.db.dialect === 'sqlite' ? 'drop trigger test_block_delete' : 'drop trigger test_block_delete on tenants');
                }
                expect(await tenantSnapshot(t.server, 'del-c')).to.equal(snapshot);
                expect((await auditOf()).filter((e) => e.resourceId === 'del-c')).to.equal([]);

                expect((await call('DELETE', '/api/tenants/del-c', root)).statusCode).to.equal(204);
                const after = await tenantRowCounts(t.server, 'del-c');
                expect(Object.values(after).every((n) => n === 0)).to.be.true();
            });
        });

        describe('clients', () => {
            let adminA: { clientId: string; clientSecret: string; token: string };
            let adminB: { clientId: string; clientSecret: string; token: string };
            let workerB: { clientId: string; clientSecret: string };
            before(async () => {
                await createTenant(t.server, root, 'cl-a');
                await createTenant(t.server, root, 'cl-b');
                adminA = await clientWithToken(t.server, root, { clientId: 'cl-a-admin', roles: ['tenant:admin'], tenantId: 'cl-a' });
                adminB = await clientWithToken(t.server, root, { clientId: 'cl-b-admin', roles: ['tenant:admin'], tenantId: 'cl-b' });
                workerB = await createClient(t.server, adminB.token, { clientId: 'cl-b-worker', roles: ['issuance:offer'], allowedIssuanceConfigs: ['pid'] });
            });

            it('answers the secret once on create, never on reads, and the secret works at the token endpoint', async () => {
                const res = await call('POST', '/api/clients', root, { clientId: 'cl-a-reader', roles: ['tenant:read'], tenantId: 'cl-a' });
                expect(res.statusCode, res.payload).to.equal(201);
                const created = body(res);
                expect(created).to.include({ clientId: 'cl-a-reader', roles: ['tenant:read'], tenantId: 'cl-a', allowedPresentationConfigs: [], allowedIssuanceConfigs: [] });
                expect(created.clientSecret).to.be.a.string();
                expect((created.clientSecret as string).length).to.be.at.least(16);
                const secret = created.clientSecret as string;
                const hash = String((await rawClient('cl-a-reader'))!.secretHash);

                const reads = [
                    await call('GET', '/api/clients/cl-a-reader?tenantId=cl-a', root),
                    await call('GET', '/api/clients/cl-a-reader', adminA.token),
                    await call('GET', '/api/clients?tenantId=cl-a', root),
                    await call('GET', '/api/clients', adminA.token),
                    await call('PATCH', '/api/clients/cl-a-reader', adminA.token, { description: 'reads' })
                ];
                for (const read of reads) {
                    expect(read.statusCode, read.payload).to.equal(200);
                    expect(read.payload).to.not.contain(secret);
                    expect(read.payload).to.not.contain(hash);
                    expect(read.payload).to.not.contain(hash.split('.').pop()!);
                    const views = body(read).items ?? [body(read)];
                    for (const view of views) {
                        expect(Object.keys(view)).to.not.include(['clientSecret', 'secret', 'secretHash', 'hash']);
                    }
                }

                const token = await tokenFor(t.server, 'cl-a-reader', secret);
                expect(jwtClaims(token)).to.include({ sub: 'cl-a-reader', tenant_id: 'cl-a', roles: ['tenant:read'] });
            });

            it('keeps no plaintext secret in the clients table nor in the audit log', async () => {
                const { clientSecret } = await createClient(t.server, root, { clientId: 'cl-a-plain', roles: ['issuance:offer'], tenantId: 'cl-a' });
                const row = await rawClient('cl-a-plain');
                expect(row).to.exist();
                expect(JSON.stringify(row)).to.not.contain(clientSecret);
                expect(String(row!.secretHash)).to.not.equal(clientSecret);
                const audit = await t.server.db.knex('audit_logs').where('resource_id', 'cl-a-plain');
                expect(audit.length).to.equal(1);
                expect(JSON.stringify(audit)).to.not.contain(clientSecret);
                expect(JSON.stringify(audit)).to.not.contain(String(row!.secretHash));
            });

            it('stores role aliases under their canonical names (issuance:manage as issuance:config)', async () => {
                const res = await call('POST', '/api/clients', root, { clientId: 'cl-a-alias', roles: ['issuance:manage', 'presentation:manage'], tenantId: 'cl-a' });
                expect(res.statusCode, res.payload).to.equal(201);
                expect(body(res).roles).to.equal(['issuance:config', 'presentation:config']);
                expect(JSON.parse(String((await rawClient('cl-a-alias'))!.roles))).to.equal(['issuance:config', 'presentation:config']);
                expect(body(await call('GET', '/api/clients/cl-a-alias?tenantId=cl-a', root)).roles).to.equal(['issuance:config', 'presentation:config']);
            });

            it('lets a tenant:admin grant a role by its alias', async () => {
                const res = await call('POST', '/api/clients', adminA.token, { clientId: 'cl-a-alias2', roles: ['issuance:manage'] });
                expect(res.statusCode, res.payload).to.equal(201);
                expect(body(res).roles).to.equal(['issuance:config']);
            });

            it('accepts tenants:manage for a tenant-less client and stores tenant:manage', async () => {
                const res = await call('POST', '/api/clients', root, { clientId: 'cl-root-alias', roles: ['tenants:manage'] });
                expect(res.statusCode, res.payload).to.equal(201);
                expect(body(res)).to.include({ tenantId: null, roles: ['tenant:manage'] });
            });

            it('rejects an unknown role with 400', async () => {
                const res = await call('POST', '/api/clients', root, { clientId: 'cl-a-unknown-role', roles: ['issuance:everything'], tenantId: 'cl-a' });
                expect(res.statusCode).to.equal(400);
                expect(body(res).details[0].path).to.equal('roles.0');
                const patch = await call('PATCH', '/api/clients/cl-a-admin', adminA.token, { roles: ['root'] });
                expect(patch.statusCode).to.equal(400);
                expect(await rawClient('cl-a-unknown-role')).to.not.exist();
            });

            it('refuses tenant:manage to a tenant:admin with 403, on create and on update', async () => {
                const res = await call('POST', '/api/clients', adminA.token, { clientId: 'cl-a-escalate', roles: ['tenant:manage'] });
                expect(res.statusCode).to.equal(403);
                expect(await rawClient('cl-a-escalate')).to.not.exist();
                const alias = await call('POST', '/api/clients', adminA.token, { clientId: 'cl-a-escalate', roles: ['issuance:offer', 'tenants:manage'] });
                expect(alias.statusCode).to.equal(403);
                expect(await rawClient('cl-a-escalate')).to.not.exist();

                await createClient(t.server, adminA.token, { clientId: 'cl-a-esc2', roles: ['issuance:offer'] });
                const patch = await call('PATCH', '/api/clients/cl-a-esc2', adminA.token, { roles: ['tenant:manage'] });
                expect(patch.statusCode).to.equal(403);
                expect(JSON.parse(String((await rawClient('cl-a-esc2'))!.roles))).to.equal(['issuance:offer']);
            });

            it('refuses client changes to a client without tenant:admin or tenant:manage', async () => {
                const { token } = await clientWithToken(t.server, adminA.token, { clientId: 'cl-a-nomanage', roles: ['tenant:read', 'issuance:config', 'key:manage'] });
                const attempts: Array<[string, string, unknown?]> = [
                    ['POST', '/api/clients', { clientId: 'cl-a-by-reader', roles: ['tenant:read'] }],
                    ['PATCH', '/api/clients/cl-a-admin', { description: 'changed' }],
                    ['DELETE', '/api/clients/cl-a-admin'],
                    ['POST', '/api/clients/cl-a-nomanage/rotate-secret']
                ];
                for (const [method, url, payload] of attempts) {
                    expect((await call(method, url, token, payload)).statusCode, `${method} ${url}`).to.equal(403);
                }
                expect(await rawClient('cl-a-by-reader')).to.not.exist();
                const { token: config } = await clientWithToken(t.server, adminA.token, { clientId: 'cl-a-config', roles: ['issuance:config'] });
                expect((await call('GET', '/api/clients', config)).statusCode).to.equal(403);
                expect((await call('GET', '/api/clients/cl-a-admin', config)).statusCode).to.equal(403);
            });

            it('lets a tenant:read client read its own tenant\'s clients (contract: reads need tenant:read)', async () => {
                const { token } = await clientWithToken(t.server, adminA.token, { clientId: 'cl-a-read-only', roles: ['tenant:read'] });
                const list = await call('GET', '/api/clients', token);
                expect(list.statusCode, list.payload).to.equal(200);
                expect(body(list).items.every((c: { tenantId: string }) => c.tenantId === 'cl-a')).to.be.true();
                const one = await call('GET', '/api/clients/cl-a-admin', token);
                expect(one.statusCode, one.payload).to.equal(200);
                expect(body(one)).to.include({ clientId: 'cl-a-admin', tenantId: 'cl-a' });
                expect((await call('GET', '/api/clients/cl-b-worker', token)).statusCode).to.equal(404);
            });

            it('uses the tenant:admin\'s own tenant when it omits tenantId, and 404 for another tenant', async () => {
                const res = await call('POST', '/api/clients', adminA.token, { clientId: 'cl-a-worker', roles: ['issuance:offer'] });
                expect(res.statusCode, res.payload).to.equal(201);
                expect(body(res).tenantId).to.equal('cl-a');
                expect((await rawClient('cl-a-worker'))!.tenantId).to.equal('cl-a');
                const token = await tokenFor(t.server, 'cl-a-worker', body(res).clientSecret);
                expect(jwtClaims(token)).to.include({ tenant_id: 'cl-a', roles: ['issuance:offer'] });

                const explicit = await call('POST', '/api/clients', adminA.token, { clientId: 'cl-a-explicit', roles: ['key:read'], tenantId: 'cl-a' });
                expect(explicit.statusCode).to.equal(201);
                const foreign = await call('POST', '/api/clients', adminA.token, { clientId: 'cl-a-into-b', roles: ['key:read'], tenantId: 'cl-b' });
                expect(foreign.statusCode).to.equal(404);
                expect(await rawClient('cl-a-into-b')).to.not.exist();
            });

            it('hides another tenant\'s client from a tenant:admin (404) and leaves it unchanged', async () => {
                const asRoot = async () => body(await call('GET', '/api/clients/cl-b-worker?tenantId=cl-b', root));
                const viewBefore = await asRoot();
                const rowBefore = await rawClient('cl-b-worker');
                expect(viewBefore.clientId).to.equal('cl-b-worker');

                const attempts: Array<[string, string, unknown?]> = [];
                for (const query of ['', '?tenantId=cl-b']) {
                    attempts.push(
                        ['GET', `/api/clients/cl-b-worker${query}`],
                        ['PATCH', `/api/clients/cl-b-worker${query}`, { roles: ['tenant:read'], allowedIssuanceConfigs: [] }],
                        ['POST', `/api/clients/cl-b-worker/rotate-secret${query}`],
                        ['DELETE', `/api/clients/cl-b-worker${query}`]
                    );
                }
                attempts.push(['GET', '/api/clients?tenantId=cl-b'], ['GET', `/api/clients/${ROOT_CLIENT.id}`], ['POST', `/api/clients/${ROOT_CLIENT.id}/rotate-secret`]);
                for (const [method, url, payload] of attempts) {
                    const res = await call(method, url, adminA.token, payload);
                    expect(res.statusCode, `${method} ${url}`).to.equal(404);
                    // Indistinguishable from a client that does not exist at all.
                    const missing = await call(method, url.replace(/cl-b-worker|\/root\b/, (m) => (m === '/root' ? '/cl-zz-missing' : 'cl-zz-missing')), adminA.token, payload);
                    expect(res.payload.replace(/cl-b-worker|\broot\b/g, 'cl-zz-missing'), `${method} ${url}`).to.equal(missing.payload);
                }
                const own = body(await call('GET', '/api/clients?pageSize=100', adminA.token));
                expect(own.items.map((c: { clientId: string }) => c.clientId)).to.not.include(['cl-b-worker', 'cl-b-admin', ROOT_CLIENT.id]);
                expect(own.items.every((c: { tenantId: string }) => c.tenantId === 'cl-a')).to.be.true();

                expect(await asRoot()).to.equal(viewBefore);
                expect(await rawClient('cl-b-worker')).to.equal(rowBefore);
                expect((await tokenStatus('cl-b-worker', workerB.clientSecret)).status).to.equal(200);
                expect((await tokenStatus(ROOT_CLIENT.id, ROOT_CLIENT.secret)).status).to.equal(200);
            });

            it('answers 400 for a tenant-less client without tenant:manage', async () => {
                const res = await call('POST', '/api/clients', root, { clientId: 'cl-tenantless', roles: ['issuance:offer'] });
                expect(res.statusCode).to.equal(400);
                expect(body(res).details[0].path).to.equal('tenantId');
                expect(await rawClient('cl-tenantless')).to.not.exist();
                const manager = await call('POST', '/api/clients', root, { clientId: 'cl-manager', roles: ['tenant:manage'] });
                expect(manager.statusCode, manager.payload).to.equal(201);
                expect(body(manager).tenantId).to.equal(null);
                const token = await tokenFor(t.server, 'cl-manager', body(manager).clientSecret);
                expect(jwtClaims(token).tenant_id).to.not.exist();
                await createTenant(t.server, token, 'cl-by-manager');
                const demote = await call('PATCH', '/api/clients/cl-manager', root, { roles: ['tenant:read'] });
                expect([400, 403]).to.include(demote.statusCode);
            });

            it('refuses tenant:manage on a client of a tenant (400 or 403)', async () => {
                const res = await call('POST', '/api/clients', root, { clientId: 'cl-a-manager', roles: ['tenant:manage'], tenantId: 'cl-a' });
                expect([400, 403]).to.include(res.statusCode);
                expect(await rawClient('cl-a-manager')).to.not.exist();
                const patch = await call('PATCH', '/api/clients/cl-a-admin?tenantId=cl-a', root, { roles: ['tenant:admin', 'tenant:manage'] });
                expect([400, 403]).to.include(patch.statusCode);
                expect(JSON.parse(String((await rawClient('cl-a-admin'))!.roles))).to.equal(['tenant:admin']);
            });

            it('answers 409 for a client id taken in any tenant, 404 for an unknown tenant', async () => {
                const taken = await call('POST', '/api/clients', adminA.token, { clientId: 'cl-b-worker', roles: ['key:read'] });
                expect(taken.statusCode).to.equal(409);
                expect((await rawClient('cl-b-worker'))!.tenantId).to.equal('cl-b');
                expect((await call('POST', '/api/clients', root, { clientId: ROOT_CLIENT.id, roles: ['tenant:manage'] })).statusCode).to.equal(409);
                expect((await tokenStatus(ROOT_CLIENT.id, ROOT_CLIENT.secret)).status).to.equal(200);
                const nowhere = await call('POST', '/api/clients', root, { clientId: 'cl-nowhere', roles: ['key:read'], tenantId: 'cl-nowhere' });
                expect(nowhere.statusCode).to.equal(404);
            });

            it('rejects a secret in the create body and invalid client ids', async () => {
                expect((await call('POST', '/api/clients', adminA.token, { clientId: 'cl-a-own-secret', roles: ['key:read'], secret: 'my-own-secret-0123456789' })).statusCode).to.equal(400);
                expect((await call('POST', '/api/clients', adminA.token, { clientId: 'bad id!', roles: ['key:read'] })).statusCode).to.equal(400);
                expect((await call('POST', '/api/clients', adminA.token, { clientId: 'cl-a-noroles', roles: [] })).statusCode).to.equal(400);
                const unknown = await call('POST', '/api/clients', adminA.token, { clientId: 'cl-a-unknown-field', roles: ['key:read'], colour: 'red' });
                expect(unknown.statusCode).to.equal(400);
                expect(body(unknown).message).to.contain('colour');
                expect(body(unknown).details).to.equal([{ path: 'colour', message: '"colour" is not allowed' }]);
                for (const id of ['cl-a-own-secret', 'cl-a-noroles', 'cl-a-unknown-field']) {
                    expect(await rawClient(id)).to.not.exist();
                }
            });

            it('rotates a secret: the old one fails with invalid_client, the new one works', async () => {
                const { clientSecret: old } = await createClient(t.server, adminA.token, { clientId: 'cl-a-rotate', roles: ['issuance:offer'] });
                const res = await call('POST', '/api/clients/cl-a-rotate/rotate-secret', adminA.token);
                expect(res.statusCode).to.equal(200);
                expect(Object.keys(body(res))).to.equal(['clientSecret']);
                const fresh = body(res).clientSecret as string;
                expect(fresh).to.not.equal(old);
                expect(await tokenStatus('cl-a-rotate', old)).to.equal({ status: 401, error: 'invalid_client' });
                expect((await tokenStatus('cl-a-rotate', fresh)).status).to.equal(200);

                const byRoot = await call('POST', '/api/clients/cl-a-rotate/rotate-secret?tenantId=cl-a', root);
                expect(byRoot.statusCode).to.equal(200);
                expect(await tokenStatus('cl-a-rotate', fresh)).to.equal({ status: 401, error: 'invalid_client' });
                expect((await tokenStatus('cl-a-rotate', body(byRoot).clientSecret)).status).to.equal(200);
            });

            it('updates roles with PATCH and the next token carries the new roles', async () => {
                const { clientSecret } = await createClient(t.server, adminA.token, { clientId: 'cl-a-patch', roles: ['issuance:offer'] });
                expect(jwtClaims(await tokenFor(t.server, 'cl-a-patch', clientSecret)).roles).to.equal(['issuance:offer']);
                const res = await call('PATCH', '/api/clients/cl-a-patch', adminA.token, { roles: ['presentation:request', 'key:read'] });
                expect(res.statusCode, res.payload).to.equal(200);
                expect(body(res)).to.include({ clientId: 'cl-a-patch', tenantId: 'cl-a', roles: ['presentation:request', 'key:read'] });
                expect(jwtClaims(await tokenFor(t.server, 'cl-a-patch', clientSecret)).roles).to.equal(['presentation:request', 'key:read']);

                const other = await call('PATCH', '/api/clients/cl-a-patch', adminA.token, { allowedIssuanceConfigs: ['pid'], description: 'patched' });
                expect(body(other)).to.include({ roles: ['presentation:request', 'key:read'], allowedIssuanceConfigs: ['pid'], description: 'patched' });
                for (const payload of [{}, { clientId: 'renamed' }, { secret: 'another-secret-0123456789' }, { colour: 'red' }]) {
                    const bad = await call('PATCH', '/api/clients/cl-a-patch', adminA.token, payload);
                    expect(bad.statusCode, JSON.stringify(payload)).to.equal(400);
                }
                expect((await tokenStatus('cl-a-patch', clientSecret)).status).to.equal(200);
            });

            it('deletes a client: 204, then 404, and its secret no longer works', async () => {
                const { clientSecret } = await createClient(t.server, adminA.token, { clientId: 'cl-a-delete', roles: ['issuance:offer'] });
                const res = await call('DELETE', '/api/clients/cl-a-delete', adminA.token);
                expect(res.statusCode).to.equal(204);
                expect((await call('GET', '/api/clients/cl-a-delete', adminA.token)).statusCode).to.equal(404);
                expect((await call('DELETE', '/api/clients/cl-a-delete', adminA.token)).statusCode).to.equal(404);
                expect(await tokenStatus('cl-a-delete', clientSecret)).to.equal({ status: 401, error: 'invalid_client' });
            });

            it('lists clients: a tenant\'s own for its admin, the tenant-less ones or ?tenantId for root', async () => {
                const own = body(await call('GET', '/api/clients?pageSize=100', adminA.token)) as PageBody<{ clientId: string; tenantId: string | null }>;
                expect(own.total).to.equal(own.items.length);
                expect(own.items.map((c) => c.clientId)).to.include(['cl-a-admin', 'cl-a-worker']);
                const rootless = body(await call('GET', '/api/clients?pageSize=100', root)) as PageBody<{ clientId: string; tenantId: string | null }>;
                expect(rootless.items.map((c) => c.clientId)).to.include([ROOT_CLIENT.id]);
                expect(rootless.items.every((c) => c.tenantId === null)).to.be.true();
                const ofA = body(await call('GET', '/api/clients?pageSize=100&tenantId=cl-a', root)) as PageBody<{ clientId: string }>;
                expect(ofA.items.map((c) => c.clientId)).to.equal(own.items.map((c) => c.clientId));
                const page = body(await call('GET', '/api/clients?pageSize=1&page=2', adminA.token)) as PageBody<unknown>;
                expect(page).to.include({ page: 2, pageSize: 1, total: own.total, totalPages: own.total });
                expect(page.items.length).to.equal(1);
                expect((await call('GET', '/api/clients?pageSize=101', adminA.token)).statusCode).to.equal(400);
            });
        });

        describe('allowed configurations (assertConfigsAllowed)', () => {
            let admin: string;
            const tokens: Record<string, string> = {};
            before(async () => {
                await createTenant(t.server, root, 'cfg-a');
                ({ token: admin } = await clientWithToken(t.server, root, { clientId: 'cfg-admin', roles: ['tenant:admin'], tenantId: 'cfg-a' }));
                const roles = ['issuance:offer', 'presentation:request'];
                tokens.restricted = (await clientWithToken(t.server, admin, { clientId: 'cfg-restricted', roles, allowedIssuanceConfigs: ['a'], allowedPresentationConfigs: ['p'] })).token;
                tokens.empty = (await clientWithToken(t.server, admin, { clientId: 'cfg-empty', roles, allowedIssuanceConfigs: [], allowedPresentationConfigs: [] })).token;
                tokens.nulls = (await clientWithToken(t.server, admin, { clientId: 'cfg-null', roles, allowedIssuanceConfigs: null, allowedPresentationConfigs: null })).token;
                tokens.absent = (await clientWithToken(t.server, admin, { clientId: 'cfg-absent', roles })).token;
            });
            const use = (token: string, kind: ConfigUse, ids: string[]) => call('POST', '/api/test/use-config', token, { use: kind, ids });

            it('allows only the listed issuance configurations when the list is non-empty', async () => {
                expect((await use(tokens.restricted!, 'issuance', ['a'])).statusCode).to.equal(200);
                expect((await use(tokens.restricted!, 'issuance', [])).statusCode).to.equal(200);
                for (const ids of [['b'], ['a', 'b'], ['p']]) {
                    const res = await use(tokens.restricted!, 'issuance', ids);
                    expect(res.statusCode, ids.join()).to.equal(403);
                    expect(body(res)).to.include({ statusCode: 403, error: 'Forbidden' });
                }
            });

            it('allows only the listed presentation configurations, independently of the issuance list', async () => {
                expect((await use(tokens.restricted!, 'presentation', ['p'])).statusCode).to.equal(200);
                expect((await use(tokens.restricted!, 'presentation', ['q'])).statusCode).to.equal(403);
                expect((await use(tokens.restricted!, 'presentation', ['a'])).statusCode).to.equal(403);
            });

            it('allows any configuration when the list is empty, null or absent', async () => {
                for (const name of ['empty', 'nulls', 'absent']) {
                    for (const kind of ['issuance', 'presentation'] as const) {
                        const res = await use(tokens[name]!, kind, ['a', 'b', 'anything']);
                        expect(res.statusCode, `${name} ${kind}`).to.equal(200);
                    }
                }
            });

            it('applies a changed list at once', async () => {
                expect((await call('PATCH', '/api/clients/cfg-restricted', admin, { allowedIssuanceConfigs: ['b'] })).statusCode).to.equal(200);
                expect((await use(tokens.restricted!, 'issuance', ['b'])).statusCode).to.equal(200);
                expect((await use(tokens.restricted!, 'issuance', ['a'])).statusCode).to.equal(403);
                expect((await call('PATCH', '/api/clients/cfg-restricted', admin, { allowedIssuanceConfigs: [] })).statusCode).to.equal(200);
                expect((await use(tokens.restricted!, 'issuance', ['a', 'z'])).statusCode).to.equal(200);
                expect((await use(tokens.restricted!, 'presentation', ['q'])).statusCode).to.equal(403);
            });
        });

        describe('session config', () => {
            let admin: string;
            const tenantConfig = async () => body(await call('GET', '/api/tenants/sc-a', root)).sessionConfig ?? null;
            before(async () => {
                await createTenant(t.server, root, 'sc-a');
                ({ token: admin } = await clientWithToken(t.server, root, { clientId: 'sc-admin', roles: ['tenant:admin'], tenantId: 'sc-a' }));
            });

            it('sets the tenant\'s session config with PUT', async () => {
                const res = await call('PUT', '/api/session-config', admin, { ttlSeconds: 3600, cleanupMode: 'anonymize' });
                expect(res.statusCode, res.payload).to.equal(200);
                expect(body(res)).to.equal({ ttlSeconds: 3600, cleanupMode: 'anonymize' });
                expect(await tenantConfig()).to.equal({ ttlSeconds: 3600, cleanupMode: 'anonymize' });
                const boundary = await call('PUT', '/api/session-config', admin, { ttlSeconds: 60, cleanupMode: 'full' });
                expect(boundary.statusCode).to.equal(200);
                expect(await tenantConfig()).to.equal({ ttlSeconds: 60, cleanupMode: 'full' });
            });

            it('rejects a ttl below 60, an unknown cleanup mode, unknown and missing fields with 400', async () => {
                await call('PUT', '/api/session-config', admin, { ttlSeconds: 3600, cleanupMode: 'anonymize' });
                const bad: Array<[unknown, string]> = [
                    [{ ttlSeconds: 59, cleanupMode: 'full' }, 'ttlSeconds'],
                    [{ ttlSeconds: 3600, cleanupMode: 'x' }, 'cleanupMode'],
                    [{ ttlSeconds: 3600, cleanupMode: 'full', colour: 'red' }, 'colour'],
                    [{ ttlSeconds: 3600.5, cleanupMode: 'full' }, 'ttlSeconds'],
                    [{ cleanupMode: 'full' }, 'ttlSeconds']
                ];
                for (const [payload, path] of bad) {
                    const res = await call('PUT', '/api/session-config', admin, payload);
                    expect(res.statusCode, JSON.stringify(payload)).to.equal(400);
                    expect(body(res).details.map((d: { path: string }) => d.path)).to.include(path);
                }
                expect(await tenantConfig()).to.equal({ ttlSeconds: 3600, cleanupMode: 'anonymize' });
            });

            it('restores the defaults with DELETE (204)', async () => {
                await call('PUT', '/api/session-config', admin, { ttlSeconds: 3600, cleanupMode: 'anonymize' });
                const res = await call('DELETE', '/api/session-config', admin);
                expect(res.statusCode).to.equal(204);
                expect(await tenantConfig()).to.equal(null);
                expect((await call('DELETE', '/api/session-config', admin)).statusCode).to.equal(204);
            });

            it('needs issuance:config or presentation:config (or their manage aliases) of a tenant', async () => {
                const cases: Array<[string, string[], number]> = [
                    ['sc-request', ['presentation:request'], 403],
                    ['sc-offer', ['issuance:offer', 'key:manage'], 403],
                    ['sc-read', ['tenant:read'], 403],
                    ['sc-issuance', ['issuance:config'], 200],
                    ['sc-presentation', ['presentation:config'], 200]
                ];
                for (const [clientId, roles, status] of cases) {
                    const { token } = await clientWithToken(t.server, admin, { clientId, roles });
                    const res = await call('PUT', '/api/session-config', token, { ttlSeconds: 900, cleanupMode: 'full' });
                    expect(res.statusCode, clientId).to.equal(status);
                    expect((await call('DELETE', '/api/session-config', token)).statusCode, clientId).to.equal(status === 200 ? 204 : status);
                }
                // Tokens whose roles carry the aliases literally (as an external provider would send them).
                for (const alias of ['issuance:manage', 'presentation:manage']) {
                    const token = await storedClientToken(`sc-${alias.replace(':', '-')}`, 'sc-a', [alias]);
                    expect(jwtClaims(token).roles).to.equal([alias]);
                    const res = await call('PUT', '/api/session-config', token, { ttlSeconds: 1200, cleanupMode: 'anonymize' });
                    expect(res.statusCode, alias).to.equal(200);
                    expect(await tenantConfig()).to.equal({ ttlSeconds: 1200, cleanupMode: 'anonymize' });
                }
                expect((await call('PUT', '/api/session-config', root, { ttlSeconds: 900, cleanupMode: 'full' })).statusCode).to.equal(403);
                expect((await call('DELETE', '/api/session-config', root)).statusCode).to.equal(403);
                const anonymous = await call('PUT', '/api/session-config', undefined, { ttlSeconds: 900, cleanupMode: 'full' });
                expect(anonymous.statusCode).to.equal(401);
                expect(String(anonymous.headers['www-authenticate'])).to.startWith('Bearer');
                expect(await tenantConfig()).to.equal({ ttlSeconds: 1200, cleanupMode: 'anonymize' });
            });
        });

        describe('audit logs', () => {
            let adminA: { clientId: string; clientSecret: string; token: string };
            let adminB: { clientId: string; clientSecret: string; token: string };
            const secrets: string[] = [];
            let expected: Array<[string, string, string, string | null]>;
            let entries: AuditEntry[];

            before(async () => {
                await createTenant(t.server, root, 'au-a');
                await createTenant(t.server, root, 'au-b');
                adminA = await clientWithToken(t.server, root, { clientId: 'au-a-admin', roles: ['tenant:admin'], tenantId: 'au-a' });
                adminB = await clientWithToken(t.server, root, { clientId: 'au-b-admin', roles: ['tenant:admin'], tenantId: 'au-b' });
                const worker = await createClient(t.server, adminA.token, { clientId: 'au-a-worker', roles: ['issuance:offer'] });
                expect((await call('PATCH', '/api/clients/au-a-worker', adminA.token, { roles: ['presentation:request'] })).statusCode).to.equal(200);
                const rotated = await call('POST', '/api/clients/au-a-worker/rotate-secret', adminA.token);
                expect((await call('PUT', '/api/session-config', adminA.token, { ttlSeconds: 3600, cleanupMode: 'anonymize' })).statusCode).to.equal(200);
                expect((await call('DELETE', '/api/session-config', adminA.token)).statusCode).to.equal(204);
                expect((await call('PATCH', '/api/tenants/au-a', root, { name: 'AU A' })).statusCode).to.equal(200);
                expect((await call('DELETE', '/api/clients/au-a-worker', adminA.token)).statusCode).to.equal(204);
                secrets.push(adminA.clientSecret, worker.clientSecret, body(rotated).clientSecret, adminB.clientSecret);

                await createClient(t.server, adminB.token, { clientId: 'au-b-worker', roles: ['key:read'] });
                await createTenant(t.server, root, 'au-gone');
                expect((await call('DELETE', '/api/tenants/au-gone', root)).statusCode).to.equal(204);
                secrets.push((await createClient(t.server, root, { clientId: 'au-manager', roles: ['tenant:manage'] })).clientSecret);

                expected = [
                    ['root', 'Tenant', 'create', 'au-a'],
                    ['root', 'Client', 'create', 'au-a-admin'],
                    ['au-a-admin', 'Client', 'create', 'au-a-worker'],
                    ['au-a-admin', 'Client', 'update', 'au-a-worker'],
                    ['au-a-admin', 'Client', 'update', 'au-a-worker'],
                    ['au-a-admin', 'Tenant', 'update', 'au-a'],
                    ['au-a-admin', 'Tenant', 'update', 'au-a'],
                    ['root', 'Tenant', 'update', 'au-a'],
                    ['au-a-admin', 'Client', 'delete', 'au-a-worker']
                ];
                const res = await call('GET', '/api/admin/audit-logs?pageSize=100', adminA.token);
                expect(res.statusCode, res.payload).to.equal(200);
                entries = body(res).items;
            });

            it('records every change with the acting client, kind, action and resource id, newest first', () => {
                expect(entries.map((e) => [e.actor, e.kind, e.action, e.resourceId])).to.equal([...expected].reverse());
                expect(entries.every((e) => e.tenantId === 'au-a')).to.be.true();
                for (let i = 1; i < entries.length; i++) {
                    expect(entries[i]!.id).to.be.below(entries[i - 1]!.id);
                    expect(Date.parse(entries[i]!.createdAt)).to.be.at.most(Date.parse(entries[i - 1]!.createdAt));
                }
            });

            it('records what changed, with secrets redacted', () => {
                const [deleted, renamed, sessionDeleted, sessionSet, rotated, rolesPatched, workerCreated] = entries;
                expect(rotated!.changes).to.equal([{ path: 'secret', after: '[redacted]' }]);
                expect(rolesPatched!.changes).to.equal([{ path: 'roles', before: ['issuance:offer'], after: ['presentation:request'] }]);
                expect(sessionSet!.changes).to.equal([{ path: 'sessionConfig', after: { ttlSeconds: 3600, cleanupMode: 'anonymize' } }]);
                expect(sessionDeleted!.changes).to.equal([{ path: 'sessionConfig', before: { ttlSeconds: 3600, cleanupMode: 'anonymize' }, after: null }]);
                expect(renamed!.changes).to.equal([{ path: 'name', before: 'Tenant au-a', after: 'AU A' }]);
                expect(deleted!.changes).to.include({ path: 'roles', before: ['presentation:request'] });
                expect(workerCreated!.changes).to.include([{ path: 'clientId', after: 'au-a-worker' }, { path: 'secret', after: '[redacted]' }]);
            });

            it('never shows a secret or its hash in any entry', async () => {
                const everything = JSON.stringify(await t.server.db.knex('audit_logs'));
                const hashes = (await t.server.db.knex('clients').select('secret_hash')).map((r: { secretHash: string }) => r.secretHash);
                for (const value of [...secrets, ROOT_CLIENT.secret, ...hashes]) {
                    expect(everything).to.not.contain(value);
                }
            });

            it('pages entries newest first', async () => {
                const pages: AuditEntry[] = [];
                for (let page = 1; page <= 5; page++) {
                    const res = body(await call('GET', `/api/admin/audit-logs?pageSize=2&page=${page}`, adminA.token)) as PageBody<AuditEntry>;
                    expect(res).to.include({ page, pageSize: 2, total: expected.length, totalPages: 5 });
                    pages.push(...res.items);
                }
                expect(pages).to.equal(entries);
                const byDefault = body(await call('GET', '/api/admin/audit-logs', adminA.token)) as PageBody<AuditEntry>;
                expect(byDefault).to.include({ page: 1, pageSize: 25, total: expected.length, totalPages: 1 });
                for (const query of ['pageSize=0', 'pageSize=101', 'page=0']) {
                    expect((await call('GET', `/api/admin/audit-logs?${query}`, adminA.token)).statusCode, query).to.equal(400);
                }
            });

            it('filters by kind, action, actor and time range', async () => {
                const ids = async (query: string) => {
                    const res = await call('GET', `/api/admin/audit-logs?pageSize=100&${query}`, adminA.token);
                    expect(res.statusCode, `${query}: ${res.payload}`).to.equal(200);
                    expect(body(res).total).to.equal(body(res).items.length);
                    return (body(res).items as AuditEntry[]).map((e) => e.id);
                };
                const where = (fn: (e: AuditEntry) => boolean) => entries.filter(fn).map((e) => e.id);
                expect(await ids('kind=Client')).to.equal(where((e) => e.kind === 'Client'));
                expect(await ids('kind=Tenant')).to.equal(where((e) => e.kind === 'Tenant'));
                expect(await ids('action=delete')).to.equal(where((e) => e.action === 'delete'));
                expect(await ids('action=update&kind=Tenant')).to.equal(where((e) => e.action === 'update' && e.kind === 'Tenant'));
                expect(await ids('actor=root')).to.equal(where((e) => e.actor === 'root'));
                expect((await ids('actor=au-a-admin')).length).to.equal(6);
                expect(await ids('kind=Nothing')).to.equal([]);

                const times = entries.map((e) => e.createdAt);
                const middle = times[4]!;
                expect(await ids(`from=${encodeURIComponent(middle)}`)).to.equal(where((e) => e.createdAt >= middle));
                expect(await ids(`to=${encodeURIComponent(middle)}`)).to.equal(where((e) => e.createdAt <= middle));
                expect(await ids(`from=${encodeURIComponent(middle)}&to=${encodeURIComponent(middle)}`)).to.equal(where((e) => e.createdAt === middle));
                const later = new Date(Date.parse(times[0]!) + 60_000).toISOString();
                expect(await ids(`from=${encodeURIComponent(later)}`)).to.equal([]);
                const offset = new Date(Date.parse(times[times.length - 1]!) - 60_000).toISOString().replace('Z', '+00:00');
                expect(await ids(`from=${encodeURIComponent(offset)}`)).to.equal(entries.map((e) => e.id));
            });

            it('rejects from after to, and invalid filters, with 400', async () => {
                const from = new Date().toISOString();
                const to = new Date(Date.now() - 60_000).toISOString();
                const res = await call('GET', `/api/admin/audit-logs?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`, adminA.token);
                expect(res.statusCode).to.equal(400);
                for (const query of ['action=rename', 'from=yesterday', 'colour=red']) {
                    expect((await call('GET', `/api/admin/audit-logs?${query}`, adminA.token)).statusCode, query).to.equal(400);
                }
            });

            it('shows a tenant client only its own tenant\'s entries', async () => {
                const ofB = body(await call('GET', '/api/admin/audit-logs?pageSize=100', adminB.token)).items as AuditEntry[];
                expect(ofB.length).to.equal(3);
                expect(ofB.every((e) => e.tenantId === 'au-b')).to.be.true();
                expect(ofB.map((e) => e.resourceId)).to.equal(['au-b-worker', 'au-b-admin', 'au-b']);
                const foreign = await call('GET', '/api/admin/audit-logs?tenantId=au-a', adminB.token);
                expect(foreign.statusCode).to.equal(404);
                expect(foreign.payload).to.not.contain('au-a-worker');
                const ownById = body(await call('GET', '/api/admin/audit-logs?pageSize=100&tenantId=au-a', adminA.token));
                expect(ownById.items).to.equal(entries);
                const reader = await clientWithToken(t.server, adminA.token, { clientId: 'au-a-reader', roles: ['tenant:read'] });
                const read = await call('GET', '/api/admin/audit-logs?pageSize=100&actor=root', reader.token);
                expect(read.statusCode).to.equal(200);
                expect(body(read).items.map((e: AuditEntry) => e.id)).to.equal(entries.filter((e) => e.actor === 'root').map((e) => e.id));
                const offer = await clientWithToken(t.server, adminA.token, { clientId: 'au-a-offer', roles: ['issuance:offer', 'presentation:config'] });
                expect((await call('GET', '/api/admin/audit-logs', offer.token)).statusCode).to.equal(403);
                expect((await call('GET', '/api/admin/audit-logs')).statusCode).to.equal(401);
            });

            it('shows root the global entries without tenantId, and a tenant\'s with ?tenantId', async () => {
                const global = await auditOf();
                expect(global.every((e) => e.tenantId === null)).to.be.true();
                const find = (kind: string, action: string, resourceId: string) =>
                    global.filter((e) => e.kind === kind && e.action === action && e.resourceId === resourceId).map((e) => e.actor);
                expect(find('Tenant', 'delete', 'au-gone')).to.equal([ROOT_CLIENT.id]);
                expect(find('Client', 'create', 'au-manager')).to.equal([ROOT_CLIENT.id]);
                expect(find('Client', 'create', ROOT_CLIENT.id)).to.equal(['system:bootstrap']);
                expect(global.some((e) => e.resourceId === 'au-a-worker')).to.be.false();
                const ofA = await auditOf('au-a');
                expect(ofA.slice(-expected.length)).to.equal(entries);
                // au-gone's own entries went with it; only the global deletion entry remains.
                expect(await auditOf('au-gone')).to.equal([]);
            });
        });

        describe('audit pruning', () => {
            interface Row {
                id: number;
                tenantId: string | null;
                resourceId: string | null;
                createdAt: string;
            }
            const rows = async (): Promise<Row[]> => (await t.server.db.knex('audit_logs').select('id', 'tenant_id', 'resource_id', 'created_at').orderBy('id'))
                .map((r: Record<string, unknown>) => ({
                    id: Number(r.id),
                    tenantId: (r.tenantId as string | null) ?? null,
                    resourceId: (r.resourceId as string | null) ?? null,
                    createdAt: r.createdAt instanceof Date ? r.createdAt.toISOString() : new Date(String(r.createdAt)).toISOString()
                }));
            const seeded = (all: Row[], tenantId: string | null) => all.filter((r) => r.tenantId === tenantId && r.resourceId?.startsWith('seed-')).map((r) => r.resourceId);
            const seed = async (tenantId: string | null, ages: number[]) => {
                for (const age of ages) {
                    await t.server.db.knex('audit_logs').insert({
                        tenant_id: tenantId, actor: 'test:seed', action: 'update', kind: 'Tenant',
                        resource_id: `seed-${tenantId ?? 'global'}-${age}`, changes: null, created_at: new Date(Date.now() - age * DAY).toISOString()
                    });
                }
            };

            it('deletes entries past the retention, then all but the newest entries of each tenant', async () => {
                await createTenant(t.server, root, 'pr-a');
                await createTenant(t.server, root, 'pr-b');
                // Only seeded entries for these tenants, oldest first, so that id order is time order.
                await t.server.db.knex('audit_logs').whereIn('tenant_id', ['pr-a', 'pr-b']).delete();
                await seed('pr-a', [60, 45, 31, 29, 20, 10, 2, 1]);
                await seed('pr-b', [90, 20, 5]);
                // Entries of no tenant (tenant deletions, tenant-less clients): the spec prunes "tenant audit
                // entries", so what happens to these is not checked beyond the count the function reports.
                await seed(null, [400]);
                const ofTenants = (all: Row[]) => all.filter((r) => r.tenantId !== null);

                const start = await rows();
                expect(await pruneAuditLog(t.server.db, { retentionDays: 0, maxEntriesPerTenant: 0 })).to.equal(0);
                expect(await rows()).to.equal(start);

                const cutoff = Date.now() - 30 * DAY;
                const deletedByAge = await pruneAuditLog(t.server.db, { retentionDays: 30, maxEntriesPerTenant: 0 });
                const retained = await rows();
                expect(deletedByAge).to.equal(start.length - retained.length);
                expect(ofTenants(retained)).to.equal(ofTenants(start).filter((r) => Date.parse(r.createdAt) >= cutoff));
                expect(seeded(retained, 'pr-a')).to.equal(['seed-pr-a-29', 'seed-pr-a-20', 'seed-pr-a-10', 'seed-pr-a-2', 'seed-pr-a-1']);
                expect(seeded(retained, 'pr-b')).to.equal(['seed-pr-b-20', 'seed-pr-b-5']);
                // Every other tenant's entries are recent: all of them are still there.
                expect(ofTenants(retained).filter((r) => !['pr-a', 'pr-b'].includes(r.tenantId!))).to.equal(ofTenants(start).filter((r) => !['pr-a', 'pr-b'].includes(r.tenantId!)));

                // The newest three of every tenant remain.
                const newest = new Set<number>();
                const byTenant = new Map<string, Row[]>();
                for (const row of ofTenants(retained)) {
                    byTenant.set(row.tenantId!, [...byTenant.get(row.tenantId!) ?? [], row]);
                }
                for (const list of byTenant.values()) {
                    [...list].sort((x, y) => Date.parse(y.createdAt) - Date.parse(x.createdAt) || y.id - x.id).slice(0, 3).forEach((r) => newest.add(r.id));
                }
                expect(byTenant.size).to.be.at.least(8);
                const deletedByCount = await pruneAuditLog(t.server.db, { retentionDays: 0, maxEntriesPerTenant: 3 });
                const capped = await rows();
                expect(deletedByCount).to.equal(retained.length - capped.length);
                expect(ofTenants(capped)).to.equal(ofTenants(retained).filter((r) => newest.has(r.id)));
                expect(seeded(capped, 'pr-a')).to.equal(['seed-pr-a-10', 'seed-pr-a-2', 'seed-pr-a-1']);
                expect(seeded(capped, 'pr-b')).to.equal(['seed-pr-b-20', 'seed-pr-b-5']);
                for (const [tenantId, list] of byTenant) {
                    expect(capped.filter((r) => r.tenantId === tenantId).length, tenantId).to.equal(Math.min(3, list.length));
                }
            });
        });
    });
}
