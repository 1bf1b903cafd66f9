import ChildProcess from 'node:child_process';
import Fs from 'node:fs';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import Pino from 'pino';
import { createServer } from '../../lib/compose';
import { manifest } from '../../manifests/default';
import { loadConfig } from '../../manifests/environment';
import { jcs, sha256Hex, type JsonBundle } from '../../plugins/bundles/bundle';
import { BundleLockModel, BundleOperationModel } from '../../plugins/bundles/models';
import { bearer, rootToken, tenantSnapshot } from '../helpers/auth';
import { createTestDatabase, DIALECTS } from '../helpers/databases';
import { testEnv } from '../helpers/server';

export const lab = Lab.script();
const { describe, it } = lab;

const root = Path.join(__dirname, '../..');
const TRUST_LISTS = 12;

/** A tenant and many trust lists: enough writes to be killed in the middle of. */
const bundleFor = (): JsonBundle => {
    const demo = JSON.parse(Fs.readFileSync(Path.join(root, 'examples/config/demo/trust-lists/demo.json'), 'utf8'));
    const documents = [
        { path: 'info.json', document: { $schema: 'https://schemas.hallmark.dev/config/v1/TenantConfigFile.schema.json', spec: { id: 'elsewhere', name: 'Killed mid-way' } } },
        ...Array.from({ length: TRUST_LISTS }, (_, i) => ({ path: `trust-lists/list-${i}.json`, document: { ...demo, spec: { ...demo.spec, id: `list-${i}` } } }))
    ];
    return {
        manifest: {
            format: 'hallmark.config-bundle',
            formatVersion: 2,
            resources: documents.map((d) => ({ kind: d.path === 'info.json' ? 'Tenant' : 'TrustList', id: d.document.spec.id, $schema: d.document.$schema, path: d.path, sha256: sha256Hex(jcs(d.document)) })),
            assets: [],
            requirements: [],
            warnings: []
        },
        documents: documents as JsonBundle['documents'],
        assets: []
    };
};

for (const dialect of DIALECTS) {
    describe(`a bundle import killed mid-way (${dialect})`, () => {
        it('leaves nothing written, keeps the lock until acknowledged, and imports whole afterwards', { timeout: 120_000 }, async () => {
            const db = await createTestDatabase(dialect);
            const env = testEnv(db);
            const file = Path.join(db.folder, 'bundle.json');
            Fs.writeFileSync(file, JSON.stringify(bundleFor()));
            const child = ChildProcess.spawn(process.execPath, ['-r', Path.join(root, 'scripts/register-ts.js'), Path.join(__dirname, '../fixtures/bundle-import-child.ts'), file, 'killed', String(TRUST_LISTS / 2)], {
                env: { PATH: process.env.PATH ?? '', ...env },
                stdio: ['ignore', 'pipe', 'pipe']
            });
            let output = '';
            child.stdout!.on('data', (c) => (output += c));
            child.stderr!.on('data', (c) => (output += c));
            const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)));
            let server: Awaited<ReturnType<typeof createServer>> | undefined;
            try {
                const deadline = Date.now() + 90_000;
                while (!output.includes('MIDWAY') && Date.now() < deadline && child.exitCode === null) {
                    await new Promise((r) => setTimeout(r, 50));
                }
                expect(output).to.contain('MIDWAY');
                child.kill('SIGKILL');
                expect(await exited).to.equal('SIGKILL');

                server = await createServer(manifest(loadConfig(env)), { logger: Pino({ level: 'silent' }) });
                await server.initialize();
                const snapshot = await tenantSnapshot(server, 'killed');
                const written = Object.entries(snapshot).filter(([table, rows]) => rows.length && !table.startsWith('config_bundle_'));
                expect(written).to.equal([]);
                const [operation] = await server.db.model(BundleOperationModel).query().where({ tenantId: 'killed' });
                expect(operation).to.include({ type: 'import', status: 'running' });

                const headers = bearer(await rootToken(server));
                const inject = async (method: string, url: string, payload?: object) => {
                    const res = await server!.inject({ method, url, headers, ...(payload ? { payload } : {}) });
                    return { status: res.statusCode, body: res.result as any };
                };
                const bundle = bundleFor();
                const plan = await inject('POST', '/api/config-bundles/plan?tenantId=killed', bundle);
                expect(plan.body.actions.every((a: { action: string }) => a.action === 'create')).to.be.true();
                const locked = await inject('POST', `/api/config-bundles/import?tenantId=killed&planFingerprint=${plan.body.planFingerprint}`, bundle);
                expect(locked.status).to.equal(409);
                expect(locked.body.code).to.equal('OPERATION_IN_PROGRESS');

                // Its process is gone: the report says interrupted, the lock still holds.
                const reported = await inject('GET', `/api/config-bundles/operations/${operation!.id}?tenantId=killed`);
                expect(reported.body).to.include({ status: 'interrupted', type: 'import', actor: 'root' });
                expect(reported.body.finishedAt).to.not.exist();
                expect((await inject('GET', '/api/config-bundles/operations?tenantId=killed')).body.items[0]).to.include({ status: 'interrupted' });
                expect((await inject('POST', `/api/config-bundles/operations/${operation!.id}/acknowledge-interruption?tenantId=killed`)).status).to.equal(400);
                const acknowledged = await inject('POST', `/api/config-bundles/operations/${operation!.id}/acknowledge-interruption?tenantId=killed&confirmWorkerStopped=true`);
                expect(acknowledged.status).to.equal(200);
                expect(acknowledged.body).to.include({ status: 'interrupted' });
                expect(await server.db.model(BundleLockModel).query().where({ tenantId: 'killed' })).to.equal([]);
                expect((await inject('POST', `/api/config-bundles/operations/${operation!.id}/acknowledge-interruption?tenantId=killed&confirmWorkerStopped=true`)).status).to.equal(409);

                const done = await inject('POST', `/api/config-bundles/import?tenantId=killed&planFingerprint=${plan.body.planFingerprint}`, bundle);
                expect(done.status).to.equal(200);
                const resources = await inject('GET', '/api/config-bundles/resources?tenantId=killed');
                expect(resources.body.items).to.have.length(TRUST_LISTS + 1);
                expect(resources.body.items.filter((r: { source?: string }) => r.source === 'bundle')).to.have.length(TRUST_LISTS);
            }
            finally {
                child.kill('SIGKILL');
                await server?.stop();
                await db.drop();
            }
        });
    });
}
