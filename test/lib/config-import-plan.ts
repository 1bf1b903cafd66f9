import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import Pino from 'pino';
import { importConfigFolder } from '../../lib/config-import';
import { statusListKind } from '../../resources/status-list';
import { tenantKind } from '../../resources/tenant';
import { badgeKind } from '../fixtures/kind-plugin';
import { bearer, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { defaultManifestWith, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

/**
 * The startup folder import goes through the same plan and apply as a bundle import (mode upsert): what blocks a
 * bundle fails the folder's tenant, naming the file and the code, and the two decide alike on the same documents.
 */

const manifest = defaultManifestWith('folder-plan', { plugin: Path.join(__dirname, '../fixtures/kind-plugin') });

for (const dialect of DIALECTS) {
    describe(`the folder import's plan (${dialect})`, () => {
        let t: TestServer;
        const folders: string[] = [];
        const system = (tenantId: string) => ({ tenantId, clientId: 'system:test', roles: [] });

        const folder = (files: Record<string, object>) => {
            const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-folder-plan-'));
            folders.push(root);
            for (const [path, content] of Object.entries(files)) {
                Fs.mkdirSync(Path.dirname(Path.join(root, path)), { recursive: true });
                Fs.writeFileSync(Path.join(root, path), JSON.stringify(content));
            }
            return root;
        };
        const run = (root: string) => importConfigFolder({ folder: root, registry: t.server.registry, log: Pino({ level: 'silent' }), variables: {}, unresolvedPlaceholders: 'fail-tenant' });

        before(async () => {
            t = await startTestServer(dialect, { manifest });
        });

        after(async () => {
            await t?.stop();
            folders.forEach((f) => Fs.rmSync(f, { recursive: true, force: true }));
        });

        it('fails a tenant whose document names a missing resource, naming the file and the code, and writes nothing', async () => {
            const report = await run(folder({
                'fp-missing/info.json': { name: 'Missing' },
                'fp-missing/badges/b.json': { id: 'b', label: 'B', keyChainId: 'nowhere' }
            }));
            expect(report.tenants[0]).to.include({ tenantId: 'fp-missing', status: 'failed' });
            expect(report.tenants[0]!.error).to.contain('fp-missing/badges/b.json: MISSING_RESOURCE_REFERENCE');
            expect(await t.server.registry.get(system('fp-missing'), tenantKind, 'fp-missing')).to.be.undefined();
        });

        it('refuses a changed status list layout on a later run (STATUS_LIST_LAYOUT_IMMUTABLE), keeping the tenant as it was', async () => {
            const files = {
                'fp-layout/info.json': { name: 'Layout' },
                'fp-layout/key-chains/k.json': { id: 'k', usageType: 'statusList' },
                'fp-layout/issuance/status-lists/l.json': { id: 'l', bits: 1, capacity: 64, keyChainId: 'k' },
                'fp-layout/badges/b.json': { id: 'b', label: 'First', keyChainId: 'k' }
            };
            expect((await run(folder(files))).tenants[0]).to.include({ status: 'imported', created: 4 });
            const changed = await run(folder({ ...files, 'fp-layout/issuance/status-lists/l.json': { id: 'l', bits: 2, capacity: 64, keyChainId: 'k' }, 'fp-layout/badges/b.json': { id: 'b', label: 'Second', keyChainId: 'k' } }));
            expect(changed.tenants[0]).to.include({ status: 'failed' });
            expect(changed.tenants[0]!.error).to.contain('fp-layout/issuance/status-lists/l.json: STATUS_LIST_LAYOUT_IMMUTABLE');
            expect((await t.server.registry.get(system('fp-layout'), statusListKind, 'l'))!.spec.bits).to.equal(1);
            expect((await t.server.registry.get(system('fp-layout'), badgeKind, 'b'))!.spec.label).to.equal('First');
        });

        it('fails a tenant whose document the write path refuses, naming the file', async () => {
            const report = await run(folder({
                'fp-outbound/info.json': { name: 'Outbound' },
                'fp-outbound/webhook-endpoints/w.json': { id: 'w', name: 'Local', url: 'http://127.0.0.1/in', auth: { type: 'none' } }
            }));
            expect(report.tenants[0]).to.include({ status: 'failed' });
            expect(report.tenants[0]!.error).to.match(/^fp-outbound\/webhook-endpoints\/w\.json: /);
            expect(report.tenants[0]!.error).to.contain('url');
            expect(await t.server.registry.get(system('fp-outbound'), tenantKind, 'fp-outbound')).to.be.undefined();
        });

        it('decides like a bundle plan in mode upsert on the same documents', async () => {
            const files = {
                'fp-same/info.json': { name: 'Same' },
                'fp-same/key-chains/k.json': { id: 'k', usageType: 'attestation' },
                'fp-same/badges/b.json': { id: 'b', label: 'Label', keyChainId: 'k' }
            };
            expect((await run(folder(files))).tenants[0]).to.include({ status: 'imported', created: 3 });
            const headers = bearer(await rootToken(t.server));
            const exported = (await t.server.inject({ method: 'GET', url: '/api/config-bundles/export?tenantId=fp-same', headers })).result as any;
            const plan = (await t.server.inject({ method: 'POST', url: '/api/config-bundles/plan?tenantId=fp-same', headers, payload: exported })).result as any;
            expect(plan.actions.map((a: { action: string }) => a.action)).to.equal(['unchanged', 'unchanged', 'unchanged']);
            const again = await run(folder(files));
            expect(again.tenants[0]).to.include({ status: 'imported', created: 0, updated: 0, unchanged: 3 });
        });
    });
}
