import Crypto from 'node:crypto';
import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import * as Lab from '@hapi/lab';
import { expect } from '@hapi/code';
import Joi from 'joi';
import Pino from 'pino';
import { importConfigFolder, type ImportReport, type TenantImportResult } from '../../lib/config-import';
import { ColumnCipher } from '../../lib/crypto/column-cipher';
import { Database } from '../../lib/db/database';
import { AuditLogModel } from '../../lib/db/models/audit-log';
import { ResourceModel } from '../../lib/db/models/resource';
import { TenantModel } from '../../lib/db/models/tenant';
import { migrateLatest } from '../../lib/db/migrate';
import type { ResourceKind, TenantContext } from '../../lib/registry/kind';
import { Registry } from '../../lib/registry/registry';
import { tableResourceStore } from '../../lib/registry/resource-store';
import { schemaUrl } from '../../lib/registry/schema-url';
import { tenantKind } from '../../resources/tenant';
import { DIALECTS, createTestDatabase, offlineDatabase, type TestDatabase } from '../helpers/databases';
import { manifestMigrations } from '../helpers/migrations';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

// Version 2 renamed `name` to `label`; a store that fails on label "explode" shows that a tenant rolls back whole.
const widgetKind: ResourceKind<{ id: string; label: string; size?: number }> = {
    kind: 'Widget',
    file: 'WidgetFile',
    version: 2,
    schema: Joi.object({ id: Joi.string().required(), label: Joi.string().required(), size: Joi.number().integer() }),
    upgrades: {
        1: ({ name, ...rest }, warn) => {
            warn({ code: 'NAME_RENAMED', message: 'name is now label' });
            return { ...rest, label: name };
        }
    },
    dependsOn: ['Tenant'],
    id: (spec) => spec.id,
    location: { dir: 'widgets' },
    store: {
        ...tableResourceStore,
        put: async (scope, id, resource, existing) => {
            if (resource.spec.label === 'explode') {
                throw new Error('store refused the widget');
            }
            await tableResourceStore.put(scope, id, resource, existing);
        }
    }
};

const settingsKind: ResourceKind<{ endpoint: string; apiKey?: string }> = {
    kind: 'Settings',
    file: 'SettingsFile',
    version: 1,
    schema: Joi.object({ endpoint: Joi.string().required(), apiKey: Joi.string().pattern(/^k-/) }),
    secrets: ['apiKey'],
    singleton: true,
    dependsOn: ['Widget'],
    id: () => 'Settings',
    location: { file: 'settings/settings.json' }
};

// No dependencies and registered first, so registry.ordered() puts it before Tenant: the import must not.
const noteKind: ResourceKind<{ id: string; text: string }> = {
    kind: 'Note',
    file: 'NoteFile',
    version: 1,
    schema: Joi.object({ id: Joi.string().required(), text: Joi.string().required() }),
    id: (spec) => spec.id,
    location: { dir: 'notes' }
};

const createRegistry = (db: Database) => {
    const registry = new Registry(db);
    for (const kind of [noteKind, settingsKind, widgetKind, tenantKind]) {
        registry.register(kind);
    }
    registry.seal();
    return registry;
};

type Tree = Record<string, unknown>;

const tempDir = () => Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-config-import-'));

/** Writes files (objects as JSON, strings verbatim) under a fresh temporary folder. */
const configFolder = (tree: Tree, root = tempDir()): string => {
    for (const [path, content] of Object.entries(tree)) {
        const file = Path.join(root, path);
        Fs.mkdirSync(Path.dirname(file), { recursive: true });
        Fs.writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
    }
    return root;
};

const capture = () => {
    const lines: Array<Record<string, any>> = [];
    const log = Pino({ level: 'debug' }, { write: (line: string) => lines.push(JSON.parse(line)) });
    return { log, lines, text: () => lines.map((l) => JSON.stringify(l)).join('\n') };
};

// Unique per test, so the tests of one database never see each other's tenants.
let counter = 0;
const tenantId = (prefix: string) => `${prefix}-${process.pid}-${++counter}`;

const byTenant = (report: ImportReport, id: string): TenantImportResult => {
    const result = report.tenants.find((t) => t.tenantId === id);
    expect(result, `result for ${id}`).to.exist();
    return result!;
};

for (const dialect of DIALECTS) {
    describe(`importConfigFolder (${dialect})`, () => {
        let testDb: TestDatabase;
        let db: Database;
        let registry: Registry;
        const folders: string[] = [];

        before(async () => {
            testDb = await createTestDatabase(dialect);
            db = Database.open(testDb.config, new ColumnCipher(Crypto.randomBytes(32)));
            await migrateLatest(db.knex, await manifestMigrations());
            registry = createRegistry(db);
        });

        after(async () => {
            await db?.close();
            await testDb?.drop();
            for (const folder of folders) {
                Fs.rmSync(folder, { recursive: true, force: true });
            }
        });

        const run = (folder: string, options: { variables?: Record<string, string | undefined>; mode?: 'fail-tenant' | 'warn'; log?: Pino.Logger } = {}) => {
            folders.push(folder);
            return importConfigFolder({
                folder,
                registry,
                log: options.log ?? Pino({ level: 'silent' }),
                variables: options.variables ?? {},
                unresolvedPlaceholders: options.mode ?? 'fail-tenant'
            });
        };

        const ctx = (id: string): TenantContext => ({ tenantId: id, clientId: 'test', roles: [] });

        const rowsOf = async (id: string) => ({
            tenants: await db.model(TenantModel).query().where({ id }),
            // Not the spec column: a kind with secrets stores it sealed, which this plain model cannot read.
            resources: await db.model(ResourceModel).query().select('kind', 'id').where({ tenantId: id }),
            audit: await db.model(AuditLogModel).query().where({ tenantId: id }).orderBy('id')
        });

        const expectNoRows = async (id: string) => {
            const rows = await rowsOf(id);
            expect(rows.tenants).to.have.length(0);
            expect(rows.resources).to.have.length(0);
            expect(rows.audit).to.have.length(0);
        };

        it('creates a tenant and its documents through the registry, in dependency order, as file-managed', async () => {
            const id = tenantId('acme');
            const folder = configFolder({
                'kms.json': { provider: 'db' },
                [`${id}/info.json`]: { name: 'Acme', description: 'first' },
                [`${id}/widgets/b.json`]: { id: 'w-b', label: 'B' },
                [`${id}/widgets/a.json`]: { id: 'w-a', label: 'A', size: 3 },
                [`${id}/widgets/readme.txt`]: 'not a document',
                [`${id}/notes/n.json`]: { id: 'n1', text: 'hello' },
                [`${id}/settings/settings.json`]: { endpoint: 'https://example.org', apiKey: 'k-secret' },
                [`${id}/images/logo.png`]: 'png'
            });
            const report = await run(folder);

            expect(report.tenants).to.equal([{ tenantId: id, status: 'imported', created: 5, updated: 0, unchanged: 0, warnings: [] }]);
            const tenant = await registry.get(ctx(id), tenantKind, id);
            expect(tenant!.spec).to.equal({ id, name: 'Acme', description: 'first' });
            expect(tenant!.ownership).to.equal('file-managed');
            const widgets = await registry.list(ctx(id), widgetKind);
            expect(widgets.map((w) => w.spec)).to.equal([{ id: 'w-a', label: 'A', size: 3 }, { id: 'w-b', label: 'B' }]);
            expect(widgets.every((w) => w.ownership === 'file-managed')).to.be.true();
            const settings = await registry.get(ctx(id), settingsKind);
            expect(settings!.spec).to.equal({ endpoint: 'https://example.org', apiKey: 'k-secret' });
            expect(settings!.ownership).to.equal('file-managed');

            const { audit } = await rowsOf(id);
            expect(audit.map((a) => a.actor)).to.only.include('system:config-import');
            // Tenant first, then registry order (Note has no dependencies), widgets sorted by file name.
            expect(audit.map((a) => `${a.kind}:${a.resourceId ?? ''}`)).to.equal(['Tenant:' + id, 'Note:n1', 'Widget:w-a', 'Widget:w-b', 'Settings:']);
        });

        it('follows a symlink to a tenant folder', async () => {
            const id = tenantId('linked');
            const target = configFolder({ 'info.json': { name: 'Linked' }, 'widgets/x.json': { id: 'x', label: 'X' } });
            folders.push(target);
            const folder = tempDir();
            Fs.symlinkSync(target, Path.join(folder, id), 'dir');

            const report = await run(folder);
            expect(byTenant(report, id)).to.include({ status: 'imported', created: 2 });
            expect((await registry.get(ctx(id), widgetKind, 'x'))!.spec.label).to.equal('X');
        });

        it('skips a tenant that does not exist when its folder has no info.json', async () => {
            const id = tenantId('ghost');
            const { log, lines } = capture();
            const report = await run(configFolder({ [`${id}/widgets/x.json`]: { id: 'x', label: 'X' } }), { log });

            const result = byTenant(report, id);
            expect(result).to.include({ status: 'skipped', created: 0 });
            expect(result.warnings[0]).to.contain('info.json');
            expect(lines.some((l) => l.level === 40 && l.tenant === id)).to.be.true();
            await expectNoRows(id);
        });

        it('imports into an existing tenant without info.json, and takes over an unmanaged tenant', async () => {
            const id = tenantId('existing');
            await registry.write({ clientId: 'api', roles: [] }, tenantKind, { id, name: 'By API' });
            const report = await run(configFolder({ [`${id}/widgets/x.json`]: { id: 'x', label: 'X' } }));
            expect(byTenant(report, id)).to.include({ status: 'imported', created: 1, updated: 0 });

            const again = await run(configFolder({ [`${id}/info.json`]: { name: 'By API' } }));
            expect(byTenant(again, id)).to.include({ status: 'imported', created: 0, updated: 1 });
            expect((await registry.get(ctx(id), tenantKind, id))!.ownership).to.equal('file-managed');
        });

        it('substitutes ${VAR} and ${VAR:default} once, an empty variable counting as unset', async () => {
            const id = tenantId('vars');
            const folder = configFolder({
                [`${id}/info.json`]: { name: '${TENANT_NAME}', description: '${DESCRIPTION:no description}' },
                [`${id}/widgets/x.json`]: { id: 'x', label: '${EMPTY:fallback}' },
                [`${id}/widgets/y.json`]: { id: 'y', label: '${NESTED}' },
                [`${id}/settings/settings.json`]: { endpoint: 'https://${HOST}:${PORT:443}/api' }
            });
            const report = await run(folder, { variables: { TENANT_NAME: 'Vars Inc', EMPTY: '', NESTED: '${TENANT_NAME}', HOST: 'h.example' } });

            expect(byTenant(report, id)).to.include({ status: 'imported', created: 4 });
            expect((await registry.get(ctx(id), tenantKind, id))!.spec).to.equal({ id, name: 'Vars Inc', description: 'no description' });
            expect((await registry.list(ctx(id), widgetKind)).map((w) => w.spec.label)).to.equal(['fallback', '${TENANT_NAME}']);
            expect((await registry.get(ctx(id), settingsKind))!.spec.endpoint).to.equal('https://h.example:443/api');
        });

        it('fails only the tenant with an unresolved placeholder in fail-tenant mode', async () => {
            const good = tenantId('good');
            const bad = tenantId('bad');
            const { log, lines } = capture();
            const folder = configFolder({
                [`${good}/info.json`]: { name: 'Good' },
                [`${bad}/info.json`]: { name: 'Bad' },
                [`${bad}/widgets/x.json`]: { id: 'x', label: '${WIDGET_LABEL}' }
            });
            const report = await run(folder, { log });

            expect(byTenant(report, good)).to.include({ status: 'imported', created: 1 });
            const failed = byTenant(report, bad);
            expect(failed).to.include({ status: 'failed', created: 0 });
            expect(failed.error).to.contain(`${bad}/widgets/x.json`);
            expect(failed.error).to.contain('${WIDGET_LABEL}');
            expect(lines.some((l) => l.level === 50 && l.file === `${bad}/widgets/x.json`)).to.be.true();
            await expectNoRows(bad);
        });

        it('rolls a tenant back whole when a write fails after others succeeded', async () => {
            const id = tenantId('rollback');
            const other = tenantId('other');
            const folder = configFolder({
                [`${id}/info.json`]: { name: 'Rollback' },
                [`${id}/widgets/a.json`]: { id: 'a', label: 'fine' },
                [`${id}/widgets/b.json`]: { id: 'b', label: 'explode' },
                [`${other}/info.json`]: { name: 'Other' }
            });
            const report = await run(folder);

            const failed = byTenant(report, id);
            expect(failed.status).to.equal('failed');
            expect(failed.error).to.equal(`${id}/widgets/b.json: store refused the widget`);
            expect(byTenant(report, other).status).to.equal('imported');
            await expectNoRows(id);
        });

        it('warns and keeps the literal text of an unresolved placeholder in warn mode', async () => {
            const id = tenantId('warn');
            const { log, lines } = capture();
            const report = await run(configFolder({ [`${id}/info.json`]: { name: 'Warn ${MISSING_NAME}' } }), { mode: 'warn', log });

            const result = byTenant(report, id);
            expect(result).to.include({ status: 'imported', created: 1 });
            expect(result.warnings).to.have.length(1);
            expect(result.warnings[0]).to.contain(`${id}/info.json`).and.to.contain('${MISSING_NAME}');
            expect(lines.some((l) => l.level === 40 && l.file === `${id}/info.json` && l.variables?.[0] === 'MISSING_NAME')).to.be.true();
            expect((await registry.get(ctx(id), tenantKind, id))!.spec.name).to.equal('Warn ${MISSING_NAME}');
        });

        it('fails a tenant with an invalid document, naming the file and the problem', async () => {
            const id = tenantId('invalid');
            const report = await run(configFolder({
                [`${id}/info.json`]: { name: 'Invalid' },
                [`${id}/widgets/x.json`]: { id: 'x', label: 'X', colour: 'red' }
            }));

            const result = byTenant(report, id);
            expect(result.status).to.equal('failed');
            expect(result.error).to.contain(`${id}/widgets/x.json`).and.to.contain('"colour" is not allowed');
            await expectNoRows(id);
        });

        it('reports every broken file of a tenant at once: bad JSON, duplicate ids, wrong or too new $schema', async () => {
            const id = tenantId('broken');
            const report = await run(configFolder({
                [`${id}/info.json`]: { name: 'Broken' },
                [`${id}/notes/bad.json`]: '{ "id": "n", secret-text }',
                [`${id}/widgets/a.json`]: { id: 'same', label: 'A' },
                [`${id}/widgets/b.json`]: { id: 'same', label: 'B' },
                [`${id}/widgets/c.json`]: { $schema: schemaUrl('WidgetFile', 3), spec: { id: 'c', label: 'C' } },
                [`${id}/widgets/d.json`]: { $schema: schemaUrl('NoteFile', 1), spec: { id: 'd', text: 'D' } }
            }));

            const { error } = byTenant(report, id);
            expect(error).to.contain(`${id}/notes/bad.json: not valid JSON`);
            expect(error).to.not.contain('secret-text');
            expect(error).to.contain(`${id}/widgets/b.json: Widget same is also defined in ${id}/widgets/a.json`);
            expect(error).to.contain(`${id}/widgets/c.json: WidgetFile version 3 is newer than this service supports (2)`);
            expect(error).to.contain(`${id}/widgets/d.json: $schema names Note, but this path holds Widget`);
            await expectNoRows(id);
        });

        it('accepts full documents, upgrading older versions and recording file-managed whatever metadata says', async () => {
            const id = tenantId('docs');
            const report = await run(configFolder({
                [`${id}/info.json`]: { $schema: schemaUrl('TenantConfigFile', 1), metadata: { ownership: 'unmanaged', generation: 7 }, spec: { name: 'Docs' } },
                [`${id}/widgets/old.json`]: { $schema: schemaUrl('WidgetFile', 1), spec: { id: 'old', name: 'Old' } },
                [`${id}/widgets/new.json`]: { $schema: schemaUrl('WidgetFile', 2), spec: { id: 'new', label: 'New' } }
            }));

            const result = byTenant(report, id);
            expect(result).to.include({ status: 'imported', created: 3 });
            expect(result.warnings).to.equal([`${id}/widgets/old.json: NAME_RENAMED: name is now label`]);
            const tenant = await registry.get(ctx(id), tenantKind, id);
            expect(tenant).to.include({ ownership: 'file-managed', generation: 1 });
            expect(tenant!.spec).to.equal({ id, name: 'Docs' });
            expect((await registry.list(ctx(id), widgetKind)).map((w) => w.spec)).to.equal([{ id: 'new', label: 'New' }, { id: 'old', label: 'Old' }]);
        });

        it('reports everything unchanged on a second run and writes no audit entries', async () => {
            const id = tenantId('again');
            const folder = configFolder({
                [`${id}/info.json`]: { name: 'Again' },
                [`${id}/widgets/x.json`]: { id: 'x', label: 'X' },
                [`${id}/settings/settings.json`]: { endpoint: 'https://example.org' }
            });
            expect(byTenant(await run(folder), id)).to.include({ created: 3 });
            const audit = (await rowsOf(id)).audit.length;

            const { log, lines } = capture();
            expect(byTenant(await run(folder, { log }), id)).to.equal({ tenantId: id, status: 'imported', created: 0, updated: 0, unchanged: 3, warnings: [] });
            expect((await rowsOf(id)).audit).to.have.length(audit);
            expect(lines.find((l) => l.tenant === id && l.level === 30)).to.include({ created: 0, updated: 0, unchanged: 3 });
        });

        it('fails a folder whose name is not a tenant id, ignores top-level files and warns about broken links', async () => {
            const folder = configFolder({ 'Not A Tenant/info.json': { name: 'x' }, 'kms.json': { provider: 'db' }, '.git/HEAD': 'ref' });
            Fs.symlinkSync(Path.join(folder, 'nowhere'), Path.join(folder, 'dangling'));
            const { log, lines } = capture();
            const report = await run(folder, { log });

            expect(report.tenants).to.have.length(1);
            expect(report.tenants[0]).to.include({ tenantId: 'Not A Tenant', status: 'failed' });
            expect(report.tenants[0]!.error).to.contain('not a valid tenant id');
            expect(lines.some((l) => l.level === 40 && l.entry === 'dangling')).to.be.true();
        });

        it('never logs spec values, not even those quoted by a validation message', async () => {
            const id = tenantId('secret');
            const { log, text } = capture();
            const report = await run(configFolder({
                [`${id}/info.json`]: { name: 'Secret' },
                [`${id}/settings/settings.json`]: { endpoint: 'https://example.org', apiKey: '${API_KEY}' }
            }), { log, variables: { API_KEY: 'hunter2-very-secret' } });

            const { error } = byTenant(report, id);
            expect(error).to.contain(`${id}/settings/settings.json`).and.to.contain('"apiKey"');
            expect(error).to.not.contain('hunter2');
            expect(text()).to.not.contain('hunter2');
        });
    });
}

describe('importConfigFolder without a folder', () => {
    it('warns and returns an empty report', async () => {
        const { log, lines } = capture();
        const report = await importConfigFolder({
            folder: Path.join(Os.tmpdir(), `hallmark-missing-${process.pid}-${Date.now()}`),
            // Never touches its database: nothing is read from a missing folder.
            registry: createRegistry(offlineDatabase()),
            log,
            variables: {},
            unresolvedPlaceholders: 'fail-tenant'
        });
        expect(report).to.equal({ tenants: [] });
        expect(lines.some((l) => l.level === 40)).to.be.true();
    });
});
