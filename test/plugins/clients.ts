import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import Pino from 'pino';
import { importConfigFolder } from '../../lib/config-import';
import { bearer, clientWithToken, createClient, createTenant, rootToken, tokenFor } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

for (const dialect of DIALECTS) {
    describe(`clients by id and generated secrets (${dialect})`, () => {
        let t: TestServer;
        let root: string;
        let adminA: string;

        before(async () => {
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-oauth2', 'hallmark-tenancy') });
            root = await rootToken(t.server);
            await createTenant(t.server, root, 'gc-a');
            await createTenant(t.server, root, 'gc-b');
            adminA = (await clientWithToken(t.server, root, { clientId: 'gc-a-admin', roles: ['tenant:admin'], tenantId: 'gc-a' })).token;
        });
        after(() => t.stop());

        const call = (method: string, url: string, token: string, payload?: object) =>
            t.server.inject({ method, url, headers: bearer(token), ...(payload ? { payload } : {}) });
        const tokenStatus = async (clientId: string, secret: string) =>
            (await t.server.inject({ method: 'POST', url: '/api/oauth2/token', payload: { grant_type: 'client_credentials', client_id: clientId, client_secret: secret } })).statusCode;

        it('lets a tenant:manage client read, update, rotate and delete a tenant\'s client by its id alone', async () => {
            const { clientSecret } = await createClient(t.server, root, { clientId: 'gc-b-worker', roles: ['issuance:offer'], tenantId: 'gc-b' });

            const read = await call('GET', '/api/clients/gc-b-worker', root);
            expect(read.statusCode, read.payload).to.equal(200);
            expect(read.result).to.include({ clientId: 'gc-b-worker', tenantId: 'gc-b', roles: ['issuance:offer'] });

            const patch = await call('PATCH', '/api/clients/gc-b-worker', root, { roles: ['key:read'] });
            expect(patch.statusCode, patch.payload).to.equal(200);
            expect(patch.result).to.include({ tenantId: 'gc-b', roles: ['key:read'] });

            const rotated = await call('POST', '/api/clients/gc-b-worker/rotate-secret', root);
            expect(rotated.statusCode, rotated.payload).to.equal(200);
            expect(await tokenStatus('gc-b-worker', clientSecret)).to.equal(401);
            expect(await tokenStatus('gc-b-worker', (rotated.result as { clientSecret: string }).clientSecret)).to.equal(200);

            // ?tenantId= filters: naming another tenant finds nothing.
            expect((await call('GET', '/api/clients/gc-b-worker?tenantId=gc-a', root)).statusCode).to.equal(404);
            expect((await call('GET', '/api/clients/gc-b-worker?tenantId=gc-b', root)).statusCode).to.equal(200);

            const removed = await call('DELETE', '/api/clients/gc-b-worker', root);
            expect(removed.statusCode, removed.payload).to.equal(204);
            expect((await call('GET', '/api/clients/gc-b-worker', root)).statusCode).to.equal(404);
            expect((await call('DELETE', '/api/clients/gc-b-worker', root)).statusCode).to.equal(404);
        });

        it('answers 404 to a tenant client for every operation on another tenant\'s client, which stays as it was', async () => {
            const { clientSecret } = await createClient(t.server, root, { clientId: 'gc-b-other', roles: ['issuance:offer'], tenantId: 'gc-b' });
            for (const [method, url, payload] of [
                ['GET', '/api/clients/gc-b-other'],
                ['PATCH', '/api/clients/gc-b-other', { description: 'taken over' }],
                ['POST', '/api/clients/gc-b-other/rotate-secret'],
                ['DELETE', '/api/clients/gc-b-other']
            ] as Array<[string, string, object?]>) {
                expect((await call(method, url, adminA, payload)).statusCode, `${method} ${url}`).to.equal(404);
            }
            expect(await tokenStatus('gc-b-other', clientSecret)).to.equal(200);
            expect((await call('GET', '/api/clients/gc-b-other', root)).result).to.not.include({ description: 'taken over' });
        });

        it('accepts secret "!generate" at API create and answers the generated secret once', async () => {
            const res = await call('POST', '/api/clients', adminA, { clientId: 'gc-a-generated', roles: ['issuance:offer'], secret: '!generate' });
            expect(res.statusCode, res.payload).to.equal(201);
            const { clientSecret } = res.result as { clientSecret: string };
            expect(clientSecret).to.have.length(43);
            expect(await tokenStatus('gc-a-generated', clientSecret)).to.equal(200);
            expect((await call('GET', '/api/clients/gc-a-generated', adminA)).result).to.not.include('clientSecret');
            // A secret of the caller's choosing is still not taken by the API.
            expect((await call('POST', '/api/clients', adminA, { clientId: 'gc-a-own', roles: ['key:read'], secret: 'my-own-secret-0123456789' })).statusCode).to.equal(400);
        });

        it('generates a "!generate" client secret at configuration import, reports it once, never logs it, and keeps it on the next import', async () => {
            const folder = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-clients-'));
            const file = Path.join(folder, 'gc-a', 'clients', 'importer.json');
            Fs.mkdirSync(Path.dirname(file), { recursive: true });
            Fs.writeFileSync(file, JSON.stringify({ clientId: 'gc-a-imported', roles: ['issuance:offer'], secret: '!generate' }));
            const lines: string[] = [];
            const log = Pino({ level: 'debug' }, { write: (line: string) => lines.push(line) });
            const run = () => importConfigFolder({ folder, registry: t.server.registry, log, variables: {}, unresolvedPlaceholders: 'fail-tenant' });
            try {
                const first = (await run()).tenants[0]!;
                expect(first.status, first.error).to.equal('imported');
                expect(first.generatedSecrets).to.have.length(1);
                const [generated] = first.generatedSecrets!;
                expect(generated).to.include({ kind: 'Client', id: 'gc-a-imported' });
                expect(await tokenFor(t.server, 'gc-a-imported', generated!.secret)).to.be.a.string();
                expect(lines.join('\n')).to.not.contain(generated!.secret);
                expect(lines.join('\n')).to.contain('gc-a-imported was created with a generated secret');

                const second = (await run()).tenants[0]!;
                expect(second).to.include({ status: 'imported', created: 0, unchanged: 1 });
                expect(second.generatedSecrets).to.not.exist();
                expect(await tokenStatus('gc-a-imported', generated!.secret)).to.equal(200);
            }
            finally {
                Fs.rmSync(folder, { recursive: true, force: true });
            }
        });
    });
}
