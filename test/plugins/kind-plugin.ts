import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { AuditLogModel } from '../../lib/db/models/audit-log';
import { keyChainKind } from '../../resources/key-chain';
import { badgeKind } from '../fixtures/kind-plugin';
import { bearer, clientWithToken, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

/** A resource-kind plugin named by module path, as a third-party package would be, with what it declares and the docs. */
const manifest = manifestFor({ plugin: Path.join(__dirname, '../fixtures/kind-plugin') }, 'hallmark-kms-db', 'hallmark-docs', 'hallmark-tenancy');

const TOKEN = 'badge-token-never-shown';

for (const dialect of DIALECTS) {
    describe(`a third-party resource kind (${dialect})`, () => {
        let t: TestServer;
        let headers: { authorization: string };
        let folder: string;
        const ctx = { tenantId: 'acme', clientId: 'test', roles: [] };

        before(async () => {
            // Startup import: the badge file names a key chain of the same folder, which must be written before it.
            folder = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-kind-plugin-'));
            const files: Record<string, object> = {
                'acme/info.json': { name: 'Acme' },
                'acme/badges/a-first.json': { id: 'imported', label: 'From the folder', keyChainId: 'signer', token: '${BADGE_TOKEN}' },
                'acme/key-chains/signer.json': { id: 'signer', usageType: 'attestation' }
            };
            for (const [path, content] of Object.entries(files)) {
                Fs.mkdirSync(Path.dirname(Path.join(folder, path)), { recursive: true });
                Fs.writeFileSync(Path.join(folder, path), JSON.stringify(content));
            }
            t = await startTestServer(dialect, { manifest, env: { CONFIG_FOLDER: folder, BADGE_TOKEN: TOKEN } });
            const root = await rootToken(t.server);
            headers = bearer((await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token);
        });

        after(async () => {
            await t?.stop();
            Fs.rmSync(folder, { recursive: true, force: true });
        });

        it('is imported at start from its folder, after the built-in kind it depends on', async () => {
            const kinds = t.server.registry.ordered().map((k) => k.kind);
            expect(kinds.indexOf('KeyChain')).to.be.below(kinds.indexOf('Badge'));
            const imported = await t.server.registry.get(ctx, badgeKind, 'imported');
            expect(imported!.spec).to.equal({ id: 'imported', label: 'From the folder', keyChainId: 'signer', token: TOKEN });
            expect(imported!.ownership).to.equal('file-managed');
        });

        it('gets CRUD routes that redact its secrets, check its references and keep the built-in kind it references', async () => {
            const created = await t.server.inject({ method: 'POST', url: '/api/badges', headers, payload: { id: 'b1', label: 'One', keyChainId: 'signer', token: TOKEN } });
            expect(created.statusCode, created.payload).to.equal(201);
            expect(created.result).to.include({ id: 'b1', token: '[redacted]' });
            const missing = await t.server.inject({ method: 'POST', url: '/api/badges', headers, payload: { id: 'b2', label: 'Two', keyChainId: 'nope' } });
            expect(missing.statusCode).to.equal(400);
            expect(missing.payload).to.contain('MISSING_RESOURCE_REFERENCE');
            const list = await t.server.inject({ method: 'GET', url: '/api/badges', headers });
            expect((list.result as { items: Array<{ id: string }> }).items.map((b) => b.id)).to.equal(['b1', 'imported']);
            const patched = await t.server.inject({ method: 'PATCH', url: '/api/badges/b1', headers, payload: { label: 'Uno' } });
            expect(patched.statusCode, patched.payload).to.equal(200);
            expect((await t.server.registry.get(ctx, badgeKind, 'b1'))!.spec).to.equal({ id: 'b1', label: 'Uno', keyChainId: 'signer', token: TOKEN });
            expect((await t.server.inject({ method: 'GET', url: '/api/badges/b1', headers })).result).to.include({ label: 'Uno' });
            expect((await t.server.inject({ method: 'DELETE', url: '/api/key-chain/signer', headers })).statusCode).to.equal(409);
            expect((await t.server.inject({ method: 'DELETE', url: '/api/badges/b1', headers })).statusCode).to.equal(204);
            expect((await t.server.inject({ method: 'GET', url: '/api/badges/b1', headers })).statusCode).to.equal(404);
        });

        it('writes audit entries for every change, the secret redacted', async () => {
            const entries = await t.server.db.model(AuditLogModel).query().where({ tenantId: 'acme', kind: 'Badge' }).orderBy('id');
            expect(entries.map((e) => `${e.actor} ${e.action} ${e.resourceId}`)).to.equal([
                'system:config-import create imported',
                'acme-admin create b1',
                'acme-admin update b1',
                'acme-admin delete b1'
            ]);
            expect(JSON.stringify(entries)).to.not.contain(TOKEN);
        });

        it('is documented in OpenAPI and has a JSON Schema', async () => {
            const docs = JSON.parse((await t.server.inject('/api/docs-json')).payload) as { paths: Record<string, object> };
            expect(Object.keys(docs.paths)).to.include(['/api/badges', '/api/badges/{id}']);
            const schema = await t.server.inject('/api/schemas/v1/BadgeConfigFile.schema.json');
            expect(schema.statusCode).to.equal(200);
            expect(schema.result).to.include({ $id: 'https://schemas.hallmark.dev/config/v1/BadgeConfigFile.schema.json', title: 'BadgeConfigFile' });
            expect((schema.result as any).properties.spec.properties).to.include(['id', 'label', 'keyChainId', 'token']);
        });

        it('is exported with its secret as a placeholder, after the key chain it depends on', async () => {
            const { documents, requirements } = await t.server.registry.export(ctx);
            const kinds = documents.map((d) => d.kind);
            expect(kinds.indexOf(keyChainKind.kind)).to.be.below(kinds.indexOf('Badge'));
            const badge = documents.find((d) => d.kind === 'Badge')!;
            expect(badge.path).to.equal('badges/imported.json');
            expect(badge.document.spec).to.equal({ id: 'imported', label: 'From the folder', keyChainId: 'signer', token: '${BADGE_IMPORTED_TOKEN}' });
            expect(requirements).to.include({ code: 'SECRET_REQUIRED', resource: 'Badge/imported', path: 'token', placeholder: '${BADGE_IMPORTED_TOKEN}', message: 'Badge/imported: token is a secret; set the variable or replace the placeholder' });
            expect(JSON.stringify(documents)).to.not.contain(TOKEN);
        });
    });
}
