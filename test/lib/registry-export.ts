import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import Pino from 'pino';
import { importConfigFolder } from '../../lib/config-import';
import type { TenantContext } from '../../lib/registry/kind';
import type { ExportResult } from '../../lib/registry/registry';
import { clientKind } from '../../resources/client';
import { issuanceConfigKind } from '../../resources/issuance-config';
import { keyChainKind } from '../../resources/key-chain';
import { kmsConfigKind } from '../../resources/kms-config';
import { tenantKind } from '../../resources/tenant';
import { webhookEndpointKind } from '../../resources/webhook-endpoint';
import { DIALECTS } from '../helpers/databases';
import { defaultManifestWith, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

// The third-party memory provider stands for a KMS outside the database: its keys are exported as references.
const manifest = defaultManifestWith('export', { plugin: Path.join(__dirname, '../fixtures/kms-third-party') });

const WEBHOOK_SECRET = 'webhook-secret-never-exported';
const CLIENT_SECRET = 'client-secret-never-exported-0123';

const system = (tenantId?: string): TenantContext => ({ ...(tenantId ? { tenantId } : {}), clientId: 'system:test', roles: [] });

/** Every kind's specs of a tenant, the tenant's own id left out, so two tenants' configurations compare. */
const specsOf = async (t: TestServer, tenantId: string) => {
    const { registry } = t.server;
    const ctx = system(tenantId);
    const { id: _id, ...tenant } = (await registry.get(ctx, tenantKind, tenantId))!.spec;
    return {
        tenant,
        kms: (await registry.get(ctx, kmsConfigKind))?.spec,
        issuance: (await registry.get(ctx, issuanceConfigKind))?.spec,
        clients: (await registry.list(ctx, clientKind)).map((r) => r.spec),
        webhooks: (await registry.list(ctx, webhookEndpointKind)).map((r) => r.spec),
        keyChains: (await registry.list(ctx, keyChainKind)).map((r) => r.spec)
    };
};

for (const dialect of DIALECTS) {
    describe(`registry export (${dialect})`, () => {
        let source: TestServer;
        let target: TestServer;
        let exported: ExportResult;
        const folders: string[] = [];

        before(async () => {
            source = await startTestServer(dialect, { manifest });
            target = await startTestServer(dialect, { manifest });
            const { registry } = source.server;
            const ctx = { tenantId: 'src', clientId: 'system:test', roles: [] };
            await registry.write(system(), tenantKind, { id: 'src', name: 'Source', description: 'exported' });
            await registry.write(ctx, kmsConfigKind, { providers: [{ id: 'mem', type: 'memory', label: 'outside' }] });
            await registry.write(ctx, issuanceConfigKind, { batchSize: 2 });
            await registry.write(ctx, clientKind, { clientId: 'src-web', roles: ['issuance:offer'], secret: CLIENT_SECRET });
            await registry.write(ctx, webhookEndpointKind, { id: 'hook', name: 'Backend', url: 'https://hooks.example.com/in', auth: { type: 'apiKey', config: { headerName: 'X-Key', value: WEBHOOK_SECRET } } });
            await registry.write(ctx, keyChainKind, { id: 'in-db', usageType: 'attestation' });
            await registry.write(ctx, keyChainKind, { id: 'in-kms', usageType: 'access', kmsProvider: 'mem' });
            exported = await registry.export(ctx);
        });

        after(async () => {
            await source?.stop();
            await target?.stop();
            folders.forEach((f) => Fs.rmSync(f, { recursive: true, force: true }));
        });

        it('writes every resource as a document with $schema and metadata, dependencies first', () => {
            const kinds = exported.documents.map((d) => d.kind);
            expect(kinds[0]).to.equal('Tenant');
            for (const doc of exported.documents) {
                const kind = source.server.registry.kind({ kind: doc.kind });
                expect(doc.document.$schema).to.equal(source.server.registry.schemaUrl(kind));
                expect(doc.document.metadata).to.equal({ generation: 1, ownership: 'unmanaged' });
                for (const dep of kind.dependsOn ?? []) {
                    expect(kinds.indexOf(dep), `${doc.kind} after ${dep}`).to.be.below(kinds.indexOf(doc.kind));
                }
            }
            expect(exported.documents.map((d) => d.path)).to.include(['info.json', 'kms.json', 'issuance/issuance.json', 'clients/src-web.json', 'webhook-endpoints/hook.json', 'key-chains/in-db.json', 'key-chains/in-kms.json']);
        });

        it('replaces secrets by placeholders and says what an import must supply; no secret or private key is in the output', () => {
            const text = JSON.stringify(exported);
            expect(text).to.not.contain(WEBHOOK_SECRET);
            expect(text).to.not.contain(CLIENT_SECRET);
            expect(text).to.not.contain('"d":');
            const doc = (id: string) => exported.documents.find((d) => d.id === id)!.document.spec as Record<string, any>;
            expect(doc('hook').auth.config.value).to.equal('${WEBHOOK_ENDPOINT_HOOK_AUTH_CONFIG_VALUE}');
            expect(doc('src-web').secret).to.equal('${CLIENT_SRC_WEB_SECRET}');
            expect(doc('in-db').keySource).to.equal({ type: 'required', publicJwk: doc('in-db').keySource.publicJwk });
            expect(doc('in-db').keySource.publicJwk).to.include(['kty', 'crv', 'x', 'y']);
            expect(doc('in-kms').keySource).to.include({ type: 'external-reference', provider: 'mem' });
            expect(doc('in-kms').keySource.externalKeyId).to.be.a.string();
            expect(exported.requirements.map((r) => `${r.code} ${r.resource} ${r.path}`).sort()).to.equal([
                'CLIENT_SECRET_REQUIRED Client/src-web secret',
                'PRIVATE_KEY_REQUIRED KeyChain/in-db keySource',
                'SECRET_REQUIRED WebhookEndpoint/hook auth.config.value'
            ]);
            expect(exported.requirements.find((r) => r.code === 'SECRET_REQUIRED')!.placeholder).to.equal('${WEBHOOK_ENDPOINT_HOOK_AUTH_CONFIG_VALUE}');
        });

        it('imports into another tenant with the same specs once the requirements are met', async () => {
            const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-export-'));
            folders.push(root);
            for (const { path, document } of exported.documents) {
                const spec = document.spec as Record<string, any>;
                // What an importer supplies for keys: new material (the memory KMS of another server has not this key).
                const written = spec.keySource ? { ...document, spec: { ...spec, keySource: { type: 'regenerate' } } } : document;
                Fs.mkdirSync(Path.dirname(Path.join(root, 'dst', path)), { recursive: true });
                Fs.writeFileSync(Path.join(root, 'dst', path), JSON.stringify(written));
            }
            const variables = { WEBHOOK_ENDPOINT_HOOK_AUTH_CONFIG_VALUE: WEBHOOK_SECRET, CLIENT_SRC_WEB_SECRET: CLIENT_SECRET };
            const report = await importConfigFolder({ folder: root, registry: target.server.registry, log: Pino({ level: 'silent' }), variables, unresolvedPlaceholders: 'fail-tenant' });
            expect(report.tenants).to.equal([{ tenantId: 'dst', status: 'imported', created: exported.documents.length, updated: 0, unchanged: 0, warnings: [] }]);
            expect(await specsOf(target, 'dst')).to.equal(await specsOf(source, 'src'));
            const hook = await target.server.registry.get(system('dst'), webhookEndpointKind, 'hook');
            expect(hook!.spec.auth).to.equal({ type: 'apiKey', config: { headerName: 'X-Key', value: WEBHOOK_SECRET } });
        });
    });
}
