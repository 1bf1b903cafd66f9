import ChildProcess from 'node:child_process';
import Crypto from 'node:crypto';
import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import Yazl from 'yazl';
import type { TenantContext } from '../../lib/registry/kind';
import { attributeProviderKind } from '../../resources/attribute-provider';
import { clientKind } from '../../resources/client';
import { keyChainKind } from '../../resources/key-chain';
import { kmsConfigKind } from '../../resources/kms-config';
import { statusListKind } from '../../resources/status-list';
import { tenantKind } from '../../resources/tenant';
import { trustListKind } from '../../resources/trust-list';
import { webhookEndpointKind } from '../../resources/webhook-endpoint';
import { readZip } from '../../plugins/bundles/archive';
import { jcs, sha256Hex, type JsonBundle } from '../../plugins/bundles/bundle';
import { BundleLockModel, BundleOperationModel } from '../../plugins/bundles/models';
import { UPLOADS_FOLDER } from '../../plugins/bundles/routes';
import { badgeKind } from '../fixtures/kind-plugin';
import { bearer, clientWithToken, rootToken, tenantSnapshot, tokenFor } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { defaultManifestWith, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const manifest = defaultManifestWith('bundles',
    { plugin: Path.join(__dirname, '../fixtures/kind-plugin') },
    { plugin: Path.join(__dirname, '../fixtures/kms-third-party') });

const SECRETS = {
    webhook: 'webhook-secret-never-exported',
    provider: 'provider-secret-never-exported',
    client: 'client-secret-never-exported-0123',
    badge: 'badge-token-never-exported'
};

const ENV_SECRET = 'from-the-environment-0123';

/** A bundle written by hand: documents only, the manifest computed, no requirements listed. */
const handWritten = (documents: Array<{ path: string; document: { $schema: string; spec: Record<string, unknown> } }>, kinds: string[]): JsonBundle => ({
    manifest: {
        format: 'hallmark.config-bundle',
        formatVersion: 1,
        resources: documents.map((d, i) => ({ kind: kinds[i]!, id: String(d.document.spec.id ?? d.document.spec.clientId ?? kinds[i]), $schema: d.document.$schema, path: d.path, sha256: sha256Hex(jcs(d.document)) })),
        assets: [],
        requirements: [],
        warnings: []
    },
    documents: documents as JsonBundle['documents'],
    assets: []
});

const system = (tenantId?: string): TenantContext => ({ ...(tenantId ? { tenantId } : {}), clientId: 'system:test', roles: [] });

const demoDocument = (path: string) => JSON.parse(Fs.readFileSync(Path.join(__dirname, '../../examples/config/demo', path), 'utf8')) as { $schema: string; spec: Record<string, any> };

/** A tenant with a resource of every kind, the fixture's third-party kind included. */
const seed = async (t: TestServer, tenantId: string) => {
    const { registry } = t.server;
    const ctx = system(tenantId);
    await registry.write(system(), tenantKind, { ...demoDocument('info.json').spec, id: tenantId });
    await registry.write(ctx, kmsConfigKind, { providers: [{ id: 'mem', type: 'memory', label: 'outside' }] });
    for (const path of ['key-chains/issuer.json', 'key-chains/verifier.json', 'trust-lists/demo.json', 'issuance/issuance.json', 'issuance/credentials/pid.json', 'issuance/credentials/mdl.json', 'presentation/identify.json']) {
        const doc = demoDocument(path);
        await registry.write(ctx, registry.kindForSchema(doc.$schema).kind, doc.spec, { version: registry.kindForSchema(doc.$schema).version });
    }
    await registry.write(ctx, keyChainKind, { id: 'in-kms', usageType: 'access', kmsProvider: 'mem' });
    await registry.write(ctx, keyChainKind, { id: 'in-db', usageType: 'statusList' });
    await registry.write(ctx, clientKind, { clientId: `${tenantId}-web`, roles: ['issuance:offer'], secret: SECRETS.client });
    await registry.write(ctx, webhookEndpointKind, { id: 'hook', name: 'Backend', url: 'https://hooks.example.com/in', auth: { type: 'apiKey', config: { headerName: 'X-Key', value: SECRETS.webhook } } });
    await registry.write(ctx, attributeProviderKind, { id: 'claims', url: 'https://claims.example.com/in', auth: { type: 'apiKey', config: { headerName: 'X-Key', value: SECRETS.provider } } });
    await registry.write(ctx, statusListKind, { id: 'revocation', bits: 1, capacity: 1024, keyChainId: 'in-db' });
    await registry.write(ctx, badgeKind, { id: 'gold', label: 'Gold', keyChainId: 'issuer', token: SECRETS.badge });
};

/** Recomputes every checksum of a JSON bundle after a test edited it. */
const rehash = (bundle: JsonBundle): JsonBundle => {
    const byPath = new Map(bundle.documents.map((d) => [d.path, d.document]));
    bundle.manifest.resources = bundle.manifest.resources.filter((r) => byPath.has(r.path)).map((r) => ({ ...r, sha256: sha256Hex(jcs(byPath.get(r.path))) }));
    return bundle;
};

const docOf = (bundle: JsonBundle, kind: string, id: string) => {
    const entry = bundle.manifest.resources.find((r) => r.kind === kind && r.id === id)!;
    return bundle.documents.find((d) => d.path === entry.path)!.document as { $schema: string; metadata?: Record<string, unknown>; spec: Record<string, any> };
};

/** What an operator does with an export before importing it into another tenant of the same service. */
const fillRequirements = (exported: JsonBundle, from: string, to: string, keys: 'supply' | 'keep' = 'supply'): JsonBundle => {
    const bundle = structuredClone(exported);
    const issuer = demoDocument('key-chains/issuer.json').spec.keySource;
    // Client ids are global: each tenant's clients need their own.
    const renamed = (path: string) => (path.startsWith(`clients/${from}-`) ? path.replace(`clients/${from}-`, `clients/${to}-`) : path);
    for (const { path, document } of bundle.documents) {
        const spec = (document as { spec: Record<string, any> }).spec;
        if (path.startsWith('clients/')) {
            spec.clientId = spec.clientId.replace(`${from}-`, `${to}-`);
            spec.secret = SECRETS.client;
        }
        if (path === 'webhook-endpoints/hook.json') {
            spec.auth.config.value = SECRETS.webhook;
        }
        if (path === 'attribute-providers/claims.json') {
            spec.auth.config.value = SECRETS.provider;
        }
        if (path === 'badges/gold.json') {
            spec.token = SECRETS.badge;
        }
        if (spec.keySource && keys === 'supply') {
            // The demo issuer's private key is known; the others get new material (the memory KMS is per tenant).
            spec.keySource = spec.id === 'issuer' ? issuer : { type: 'regenerate' };
        }
    }
    bundle.documents = bundle.documents.map((d) => ({ ...d, path: renamed(d.path) }));
    bundle.manifest.resources = bundle.manifest.resources.map((r) => ({ ...r, id: r.kind === 'Client' ? r.id.replace(`${from}-`, `${to}-`) : r.id, path: renamed(r.path) }));
    return rehash(bundle);
};

for (const dialect of DIALECTS) {
    describe(`configuration bundles (${dialect})`, () => {
        let t: TestServer;
        let root: string;
        let admin: { authorization: string };
        let exported: JsonBundle;

        const call = async (method: string, url: string, headers: { authorization: string }, payload?: unknown) => {
            const res = await t.server.inject({ method, url, headers, ...(payload !== undefined ? { payload: payload as object } : {}) });
            return { status: res.statusCode, body: res.result as any, res };
        };
        const asRoot = () => bearer(root);
        const plan = (tenant: string, bundle: JsonBundle, mode = 'upsert') => call('POST', `/api/config-bundles/plan?tenantId=${tenant}&mode=${mode}`, asRoot(), bundle);
        const importAs = (tenant: string, bundle: JsonBundle, fingerprint: string, mode = 'upsert', extra = '') =>
            call('POST', `/api/config-bundles/import?tenantId=${tenant}&mode=${mode}&planFingerprint=${fingerprint}${extra}`, asRoot(), bundle);
        const planAndImport = async (tenant: string, bundle: JsonBundle, mode = 'upsert') => {
            const planned = await plan(tenant, bundle, mode);
            expect(planned.status, JSON.stringify(planned.body)).to.equal(200);
            expect(planned.body.blocked, JSON.stringify(planned.body.actions)).to.be.false();
            return importAs(tenant, bundle, planned.body.planFingerprint, mode, mode === 'replace' ? '&confirmReplace=true' : '');
        };
        const exportOf = async (tenant: string) => {
            const res = await call('GET', `/api/config-bundles/export?tenantId=${tenant}`, asRoot());
            expect(res.status, res.res.payload).to.equal(200);
            return res.body as JsonBundle;
        };

        before(async () => {
            t = await startTestServer(dialect, { manifest, env: { BUNDLE_HOOK_SECRET: ENV_SECRET } });
            root = await rootToken(t.server);
            await seed(t, 'src');
            admin = bearer((await clientWithToken(t.server, root, { clientId: 'src-admin', roles: ['tenant:admin'], tenantId: 'src' })).token);
            const res = await call('GET', '/api/config-bundles/export', admin);
            expect(res.status, res.res.payload).to.equal(200);
            exported = res.body;
        });

        after(async () => {
            await t?.stop();
        });

        it('exports every kind with a manifest, checksums and requirements, and no secret or private key', () => {
            const { manifest: m } = exported;
            expect(m).to.include({ format: 'hallmark.config-bundle', formatVersion: 2, tenant: 'src' });
            expect(m.sourceVersion).to.be.a.string();
            expect(new Date(m.exportedAt!).getTime()).to.be.a.number();
            expect(new Set(m.resources.map((r) => r.kind))).to.equal(new Set(['Tenant', 'KmsConfig', 'KeyChain', 'TrustList', 'IssuanceConfig', 'CredentialConfig', 'PresentationConfig', 'Client', 'WebhookEndpoint', 'AttributeProvider', 'StatusList', 'Badge']));
            expect(m.resources.map((r) => r.path)).to.include(['info.json', 'kms.json', 'issuance/config.json', 'badges/gold.json', 'issuance/status-lists/revocation.json', 'clients/src-web.json']);
            for (const r of m.resources) {
                const doc = exported.documents.find((d) => d.path === r.path)!;
                expect(r.sha256).to.equal(sha256Hex(jcs(doc.document)));
                expect(r.$schema).to.equal(doc.document.$schema);
                expect(doc.document.metadata).to.equal({ generation: r.generation, ownership: r.ownership as never });
            }
            const text = JSON.stringify(exported);
            for (const secret of Object.values(SECRETS)) {
                expect(text).to.not.contain(secret);
            }
            expect(text).to.not.contain('"d":');
            expect(m.requirements.map((r) => `${r.code} ${r.resource} ${r.path}`).sort()).to.equal([
                'CLIENT_SECRET_REQUIRED Client/src-admin secret',
            'CLIENT_SECRET_REQUIRED Client/src-web secret',
                'PRIVATE_KEY_REQUIRED KeyChain/in-db keySource',
                'PRIVATE_KEY_REQUIRED KeyChain/issuer keySource',
                'PRIVATE_KEY_REQUIRED KeyChain/verifier keySource',
                'SECRET_REQUIRED AttributeProvider/claims auth.config.value',
                'SECRET_REQUIRED Badge/gold token',
                'SECRET_REQUIRED WebhookEndpoint/hook auth.config.value'
            ]);
            expect(docOf(exported, 'KeyChain', 'in-kms').spec.keySource).to.include({ type: 'external-reference', provider: 'mem' });
        });

        it('round trip as a property: generated tenants export, import into a fresh tenant and export again the same', async () => {
            // A small deterministic generator (no timing, reproducible by seed): how many resources of each kind,
            // labels with characters JSON and RFC 8785 treat specially, and which optional fields are present.
            for (const seedValue of [1, 2, 3, 4]) {
                let state = seedValue;
                const random = () => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648;
                const pick = <T>(items: T[]): T => items[Math.floor(random() * items.length)]!;
                const label = () => pick(['Gold', 'Ünïcode ✓', 'quote " and \\ backslash', 'line\nbreak', '😀 emoji', 'a'.repeat(150)]);
                const from = `prop${seedValue}`;
                const to = `prop${seedValue}-copy`;
                const ctx = system(from);
                const { registry } = t.server;
                await registry.write(system(), tenantKind, { id: from, name: label(), ...(random() > 0.5 ? { description: label() } : {}) });
                await registry.write(ctx, keyChainKind, { id: 'signer', usageType: 'attestation', ...(random() > 0.5 ? { subject: { commonName: 'Signer', country: 'DE' } } : {}) });
                for (let i = 0; i < 1 + Math.floor(random() * 3); i++) {
                    await registry.write(ctx, badgeKind, { id: `badge-${i}`, label: label(), keyChainId: 'signer', ...(random() > 0.5 ? { token: `secret:Badge/badge-${i}` } : {}) });
                    await registry.write(ctx, webhookEndpointKind, { id: `hook-${i}`, name: label(), url: `https://hooks.example.com/${i}`, auth: random() > 0.5 ? { type: 'apiKey', config: { headerName: 'X-Key', value: `secret:WebhookEndpoint/hook-${i}` } } : { type: 'none' } });
                }
                if (random() > 0.3) {
                    await registry.write(ctx, statusListKind, { id: 'list', bits: pick([1, 2, 4, 8]), capacity: 1 + Math.floor(random() * 5000), keyChainId: 'signer' });
                }
                if (random() > 0.3) {
                    await registry.write(ctx, clientKind, { clientId: `${from}-app`, roles: ['issuance:offer'], secret: `secret:Client/${from}-app-0123456789` });
                }
                const original = await exportOf(from);
                // Fill exactly what the manifest asks for.
                const bundle = structuredClone(original);
                for (const requirement of bundle.manifest.requirements) {
                    const entry = bundle.manifest.resources.find((r) => `${r.kind}/${r.id}` === requirement.resource || (r.kind === requirement.resource))!;
                    const spec = bundle.documents.find((d) => d.path === entry.path)!.document.spec as Record<string, any>;
                    if (requirement.code === 'PRIVATE_KEY_REQUIRED') {
                        spec.keySource = { type: 'regenerate' };
                        continue;
                    }
                    const keys = requirement.path.split('.');
                    const parent = keys.slice(0, -1).reduce((v, k) => v[k], spec);
                    parent[keys.at(-1)!] = requirement.code === 'CLIENT_SECRET_REQUIRED' ? `secret:Client/${from}-app-0123456789` : `secret:${requirement.resource}`;
                }
                for (const document of bundle.documents) {
                    const spec = document.document.spec as Record<string, any>;
                    if (spec.clientId) {
                        spec.clientId = `${to}-app`;
                        document.path = `clients/${to}-app.json`;
                        const entry = bundle.manifest.resources.find((r) => r.kind === 'Client')!;
                        Object.assign(entry, { id: `${to}-app`, path: document.path });
                    }
                }
                const imported = await planAndImport(to, rehash(bundle));
                expect(imported.status, JSON.stringify(imported.body)).to.equal(200);
                const copy = await exportOf(to);
                const normalize = (b: JsonBundle, tenant: string) => b.documents.map(({ path, document }) => {
                    const spec = JSON.parse(JSON.stringify(document.spec).split(tenant.toUpperCase().replace(/-/g, '_')).join('T').split(tenant).join('T')) as Record<string, any>;
                    if (spec.keySource) {
                        spec.keySource = { type: spec.keySource.type };
                    }
                    return { path: path.split(tenant).join('T'), $schema: document.$schema, generation: document.metadata?.generation, spec };
                });
                expect(normalize(copy, to), `seed ${seedValue}`).to.equal(normalize(original, from));
                // The secrets arrived as the source had them.
                for (const r of original.manifest.requirements.filter((q) => q.code === 'SECRET_REQUIRED')) {
                    const [kind, id] = r.resource.split('/');
                    const stored = (await registry.get(system(to), { kind: kind! }, id))!.spec as Record<string, any>;
                    expect(r.path.split('.').reduce<any>((v, k) => v[k], stored)).to.equal(`secret:${r.resource}`);
                }
            }
        });

        it('exports a ZIP with the same files and an attachment name', async () => {
            const res = await call('GET', '/api/config-bundles/export?format=zip', admin);
            expect(res.status).to.equal(200);
            expect(res.res.headers['content-type']).to.equal('application/zip');
            expect(res.res.headers['content-disposition']).to.match(/^attachment; filename="src-\d{8}\.zip"$/);
            const files = await readZip(res.res.rawPayload);
            const zipManifest = JSON.parse(files.get('manifest.json')!.data!.toString());
            expect([...files.keys()].sort()).to.equal(['manifest.json', ...zipManifest.resources.map((r: { path: string }) => r.path)].sort());
            for (const r of zipManifest.resources) {
                expect(sha256Hex(files.get(r.path)!.data!)).to.equal(r.sha256);
                expect(files.get(r.path)!.sha256).to.equal(r.sha256);
                expect(JSON.parse(files.get(r.path)!.data!.toString())).to.equal(docOf(exported, r.kind, r.id));
            }
        });

        it('round trip: a filled export imported into a fresh tenant exports the same documents, apart from the ids that must differ', async () => {
            const bundle = fillRequirements(exported, 'src', 'dst');
            const res = await planAndImport('dst', bundle);
            expect(res.status, JSON.stringify(res.body)).to.equal(200);
            expect(res.body.actions.every((a: { action: string }) => a.action === 'create')).to.be.true();
            expect(res.body.actions.map((a: { kind: string }) => a.kind)[0]).to.equal('Tenant');
            const again = await exportOf('dst');
            const normalize = (b: JsonBundle, tenant: string) => Object.fromEntries(b.documents.map(({ document }) => {
                const spec = structuredClone(document.spec) as Record<string, any>;
                const kind = t.server.registry.kindForSchema(document.$schema).kind;
                if (kind.isTenant) {
                    spec.id = 'TENANT';
                }
                if (kind.kind === 'Client') {
                    spec.clientId = spec.clientId.replace(tenant, 'TENANT');
                    spec.secret = spec.secret.replace(tenant.toUpperCase(), 'TENANT');
                }
                if (spec.keySource && spec.id !== 'issuer') {
                    // New key material: another public key, by design.
                    spec.keySource = { type: spec.keySource.type };
                }
                return [`${kind.kind}/${kind.kind === 'Client' ? 'web' : spec.id ?? kind.kind}`, { $schema: document.$schema, generation: document.metadata?.generation, spec }];
            }));
            const before = normalize(exported, 'src');
            const after = normalize(again, 'dst');
            expect(after).to.equal(before);
            // The imported key is the same key; every imported resource is file-managed now.
            expect(docOf(again, 'KeyChain', 'issuer').spec.keySource).to.equal(docOf(exported, 'KeyChain', 'issuer').spec.keySource);
            expect(again.manifest.resources.every((r) => r.ownership === 'file-managed')).to.be.true();
            // Secrets arrived.
            expect((await t.server.registry.get(system('dst'), webhookEndpointKind, 'hook'))!.spec.auth).to.equal({ type: 'apiKey', config: { headerName: 'X-Key', value: SECRETS.webhook } });
            expect(await tokenFor(t.server, 'dst-web', SECRETS.client)).to.be.a.string();
            // Importing the re-export into the same tenant changes nothing: every action is unchanged.
            // Secrets supplied again, keys as exported: the target holds those keys.
            const replan = await plan('dst', fillRequirements(again, 'dst', 'dst', 'keep'));
            expect(replan.status).to.equal(200);
            expect(replan.body.blocked, JSON.stringify(replan.body.actions.filter((a: { action: string }) => a.action !== 'unchanged'))).to.be.false();
            expect(new Set(replan.body.actions.map((a: { action: string }) => a.action))).to.equal(new Set(['unchanged']));
        });

        it('blocks an unfilled export: every secret and key the export left out is a requirement', async () => {
            const res = await plan('fresh', exported);
            expect(res.status).to.equal(200);
            expect(res.body.blocked).to.be.true();
            const blocked = res.body.actions.filter((a: { action: string }) => a.action === 'blocked').map((a: { kind: string; id: string; code: string }) => `${a.code} ${a.kind}/${a.id}`).sort();
            expect(blocked).to.equal([
                'CLIENT_SECRET_REQUIRED Client/src-admin',
                'CLIENT_SECRET_REQUIRED Client/src-web',
                'PRIVATE_KEY_REQUIRED KeyChain/in-db',
                'PRIVATE_KEY_REQUIRED KeyChain/issuer',
                'PRIVATE_KEY_REQUIRED KeyChain/verifier',
                'SECRET_REQUIRED AttributeProvider/claims',
                'SECRET_REQUIRED Badge/gold',
                'SECRET_REQUIRED WebhookEndpoint/hook'
            ]);
            expect(res.body.requirements.map((r: { code: string }) => r.code)).to.include(['CLIENT_SECRET_REQUIRED', 'PRIVATE_KEY_REQUIRED', 'SECRET_REQUIRED']);
            expect(JSON.stringify(res.body)).to.not.contain(SECRETS.webhook);
            const imported = await importAs('fresh', exported, res.body.planFingerprint);
            expect(imported.status).to.equal(409);
            expect(blocked.map((b: string) => b.split(' ')[0])).to.include(imported.body.code);
            expect(imported.body.details.blocked).to.be.true();
            expect(await t.server.registry.get(system('fresh'), tenantKind, 'fresh')).to.be.undefined();
        });

        it('blocks a missing reference and a changed status list layout, and plans updates with redacted changes', async () => {
            const bundle = fillRequirements(exported, 'src', 'dst');
            const noChain = structuredClone(bundle);
            noChain.documents = noChain.documents.filter((d) => d.path !== 'key-chains/in-db.json');
            const missing = await plan('other', rehash(noChain));
            const statusList = missing.body.actions.find((a: { kind: string }) => a.kind === 'StatusList');
            expect(statusList).to.include({ action: 'blocked', code: 'MISSING_RESOURCE_REFERENCE' });

            const layout = structuredClone(bundle);
            docOf(layout, 'StatusList', 'revocation').spec.capacity = 2048;
            docOf(layout, 'WebhookEndpoint', 'hook').spec.auth.config.value = 'another-secret-value';
            docOf(layout, 'WebhookEndpoint', 'hook').spec.name = 'Renamed';
            const changed = await plan('dst', rehash(layout));
            expect(changed.body.actions.find((a: { kind: string }) => a.kind === 'StatusList')).to.include({ action: 'blocked', code: 'STATUS_LIST_LAYOUT_IMMUTABLE' });
            const hook = changed.body.actions.find((a: { kind: string }) => a.kind === 'WebhookEndpoint');
            expect(hook.action).to.equal('update');
            expect(hook.changes).to.equal([
                { path: 'auth.config.value', before: '[redacted]', after: '[redacted]' },
                { path: 'name', before: 'Backend', after: 'Renamed' }
            ]);
            expect(JSON.stringify(changed.body)).to.not.contain('another-secret-value');
        });

        it('blocks a document older than the stored resource (STALE_GENERATION), and skips existing ones in mode create', async () => {
            const bundle = fillRequirements(exported, 'src', 'dst');
            await t.server.registry.write(system('dst'), trustListKind, { ...docOf(bundle, 'TrustList', 'demo').spec, description: 'changed by the API' });
            const stale = await plan('dst', bundle);
            expect(stale.body.actions.find((a: { kind: string }) => a.kind === 'TrustList')).to.include({ action: 'blocked', code: 'STALE_GENERATION' });
            // The same older document with the stored content changes nothing: unchanged, not blocked.
            const same = structuredClone(bundle);
            docOf(same, 'TrustList', 'demo').spec.description = 'changed by the API';
            const replanned = await plan('dst', rehash(same));
            expect(replanned.body.actions.find((a: { kind: string }) => a.kind === 'TrustList')).to.include({ action: 'unchanged' });
            expect(docOf(same, 'TrustList', 'demo').metadata!.generation as number).to.be.below((await t.server.registry.get(system('dst'), trustListKind, 'demo'))!.generation);
            // Mode create skips what exists, even a document that lacks its secrets; one it would create needs them.
            const create = await plan('dst', exported, 'create');
            expect(create.body.actions.find((a: { kind: string; id: string }) => a.kind === 'Client' && a.id === 'src-web')).to.include({ action: 'blocked', code: 'CLIENT_SECRET_REQUIRED' });
            expect(create.body.actions.find((a: { kind: string }) => a.kind === 'WebhookEndpoint')).to.include({ action: 'skip' });
            const createFilled = await plan('dst', bundle, 'create');
            expect(createFilled.body.blocked).to.be.false();
            expect(new Set(createFilled.body.actions.map((a: { action: string }) => a.action))).to.equal(new Set(['skip']));
            expect(createFilled.body.warnings.filter((w: { code: string }) => w.code === 'RESOURCE_EXISTS')).to.have.length(bundle.documents.length);
            const skippedAll = await importAs('dst', bundle, createFilled.body.planFingerprint, 'create');
            expect(skippedAll.status, JSON.stringify(skippedAll.body)).to.equal(200);
            const [report] = (await call('GET', '/api/config-bundles/operations?tenantId=dst', asRoot())).body.items;
            expect(report).to.include({ type: 'import', mode: 'create', status: 'succeeded' });
            expect(report.summary).to.equal({ skip: bundle.documents.length });
            const unfilledDst = fillRequirements(exported, 'src', 'dst');
            docOf(unfilledDst, 'WebhookEndpoint', 'hook').spec.auth.config.value = '${UNSET_HOOK_SECRET}';
            const skipped = await plan('dst', rehash(unfilledDst), 'create');
            expect(skipped.body.blocked).to.be.false();
            expect(skipped.body.actions.find((a: { kind: string }) => a.kind === 'WebhookEndpoint')).to.include({ action: 'skip', code: 'RESOURCE_EXISTS' });
            expect((await plan('dst', rehash(unfilledDst))).body.actions.find((a: { kind: string }) => a.kind === 'WebhookEndpoint')).to.include({ action: 'blocked', code: 'SECRET_REQUIRED' });
        });

        it('refuses a stale fingerprint, leaving the tenant as it was', async () => {
            const bundle = fillRequirements(exported, 'src', 'stale');
            const planned = await plan('stale', bundle);
            expect(planned.body.blocked).to.be.false();
            const mode = await importAs('stale', bundle, planned.body.planFingerprint, 'create');
            expect(mode.status).to.equal(409);
            expect(mode.body.code).to.equal('CONFIG_PLAN_STALE');
            const edited = structuredClone(bundle);
            docOf(edited, 'Badge', 'gold').spec.label = 'Silver';
            const changedBundle = await importAs('stale', rehash(edited), planned.body.planFingerprint);
            expect(changedBundle.body.code).to.equal('CONFIG_PLAN_STALE');
            expect(await t.server.registry.get(system('stale'), tenantKind, 'stale')).to.be.undefined();
            const ok = await importAs('stale', bundle, planned.body.planFingerprint);
            expect(ok.status, JSON.stringify(ok.body)).to.equal(200);
            // The target changed after the plan.
            const again = await plan('stale', bundle);
            await t.server.registry.write(system('stale'), badgeKind, { id: 'gold', label: 'Changed', keyChainId: 'issuer' });
            const late = await importAs('stale', bundle, again.body.planFingerprint);
            expect(late.body.code).to.equal('CONFIG_PLAN_STALE');
            expect((await t.server.registry.get(system('stale'), badgeKind, 'gold'))!.spec.label).to.equal('Changed');
        });

        it('replace deletes only what the same source imported, and needs confirmReplace', async () => {
            const bundle = fillRequirements(exported, 'src', 'rep');
            expect((await planAndImport('rep', bundle)).status).to.equal(200);
            await t.server.registry.write(system('rep'), trustListKind, { ...docOf(bundle, 'TrustList', 'demo').spec, id: 'manual', description: 'made through the API' });
            const other = structuredClone(bundle);
            other.manifest.source = 'other-pipeline';
            other.documents = other.documents.filter((d) => ['info.json', 'trust-lists/demo.json'].includes(d.path));
            docOf(rehash(other), 'TrustList', 'demo');
            const otherTrust = structuredClone(docOf(other, 'TrustList', 'demo'));
            otherTrust.spec.id = 'theirs';
            other.documents.push({ path: 'trust-lists/theirs.json', document: otherTrust as never });
            other.manifest.resources.push({ kind: 'TrustList', id: 'theirs', $schema: otherTrust.$schema, path: 'trust-lists/theirs.json', sha256: '' });
            expect((await planAndImport('rep', rehash(other))).status).to.equal(200);

            const smaller = structuredClone(bundle);
            smaller.documents = smaller.documents.filter((d) => d.path !== 'badges/gold.json');
            rehash(smaller);
            const refused = await call('POST', `/api/config-bundles/import?tenantId=rep&mode=replace&planFingerprint=${'0'.repeat(64)}`, asRoot(), smaller);
            expect(refused.status).to.equal(400);
            const planned = await plan('rep', smaller, 'replace');
            expect(planned.body.actions.filter((a: { action: string }) => a.action === 'delete')).to.equal([{ kind: 'Badge', id: 'gold', action: 'delete' }]);
            const done = await importAs('rep', smaller, planned.body.planFingerprint, 'replace', '&confirmReplace=true');
            expect(done.status, JSON.stringify(done.body)).to.equal(200);
            expect(await t.server.registry.get(system('rep'), badgeKind, 'gold')).to.be.undefined();
            expect(await t.server.registry.get(system('rep'), trustListKind, 'manual')).to.exist();
            expect(await t.server.registry.get(system('rep'), trustListKind, 'theirs')).to.exist();
        });

        it('lists ownership and sources, and detaches a resource so that replace keeps it', async () => {
            const bundle = fillRequirements(exported, 'src', 'det');
            expect((await planAndImport('det', bundle)).status).to.equal(200);
            const listed = await call('GET', '/api/config-bundles/resources?tenantId=det', asRoot());
            expect(listed.status).to.equal(200);
            expect(listed.body.items).to.have.length(bundle.documents.length);
            expect(listed.body.items.find((r: { kind: string; id: string }) => r.kind === 'Badge' && r.id === 'gold')).to.include({ ownership: 'file-managed', generation: 1, source: 'bundle' });
            const detached = await call('POST', '/api/config-bundles/resources/Badge/gold/detach?tenantId=det', asRoot());
            expect(detached.status, detached.res.payload).to.equal(200);
            expect(detached.body).to.equal({ kind: 'Badge', id: 'gold', ownership: 'unmanaged', generation: 2 });
            expect((await t.server.registry.get(system('det'), badgeKind, 'gold'))!.spec.token).to.equal(SECRETS.badge);
            expect((await call('POST', '/api/config-bundles/resources/Badge/gold/detach?tenantId=det', asRoot())).body.code).to.equal('NOT_FILE_MANAGED');
            expect((await call('POST', '/api/config-bundles/resources/Badge/nope/detach?tenantId=det', asRoot())).status).to.equal(404);
            expect((await call('POST', '/api/config-bundles/resources/Nothing/gold/detach?tenantId=det', asRoot())).status).to.equal(404);
            // A client keeps its secret when detached.
            expect((await call('POST', '/api/config-bundles/resources/Client/det-web/detach?tenantId=det', asRoot())).status).to.equal(200);
            expect(await tokenFor(t.server, 'det-web', SECRETS.client)).to.be.a.string();
            const after = (await call('GET', '/api/config-bundles/resources?tenantId=det', asRoot())).body.items.find((r: { id: string }) => r.id === 'gold');
            expect(after).to.include({ ownership: 'unmanaged' });
            expect(after.source).to.not.exist();
            const smaller = structuredClone(bundle);
            smaller.documents = smaller.documents.filter((d) => !['badges/gold.json', 'clients/det-web.json'].includes(d.path));
            const planned = await plan('det', rehash(smaller), 'replace');
            expect(planned.body.actions.filter((a: { action: string }) => a.action === 'delete')).to.equal([]);
            const reports = (await call('GET', '/api/config-bundles/operations?tenantId=det', asRoot())).body.items;
            expect(reports.filter((o: { type: string }) => o.type === 'detach')).to.have.length(2);
            // Someone else's tenant: not found.
            expect((await call('POST', '/api/config-bundles/resources/Badge/gold/detach?tenantId=det', admin)).status).to.equal(404);
        });

        it('plans a hand-written bundle: environment placeholders resolved, missing values blocked without a listed requirement', async () => {
            const schema = (file: string) => `https://schemas.hallmark.dev/config/v1/${file}.schema.json`;
            const publicJwk = docOf(exported, 'KeyChain', 'in-db').spec.keySource.publicJwk;
            const documents = [
                { path: 'info.json', document: { $schema: schema('TenantConfigFile'), spec: { name: 'Hand written', description: '${UNSET_DESCRIPTION}' } } },
                { path: 'webhook-endpoints/env.json', document: { $schema: schema('WebhookEndpointConfigFile'), spec: { id: 'env', name: 'From env', url: 'https://hooks.example.com/env', auth: { type: 'apiKey', config: { headerName: 'X-Key', value: '${BUNDLE_HOOK_SECRET}' } } } } },
                { path: 'webhook-endpoints/unset.json', document: { $schema: schema('WebhookEndpointConfigFile'), spec: { id: 'unset', name: 'Unset', url: 'https://hooks.example.com/unset', auth: { type: 'apiKey', config: { headerName: 'X-Key', value: '${UNSET_HOOK_SECRET}' } } } } },
                { path: 'clients/hand-web.json', document: { $schema: schema('ClientConfigFile'), spec: { clientId: 'hand-web', roles: ['issuance:offer'], secret: '${UNSET_CLIENT_SECRET}' } } },
                { path: 'key-chains/k.json', document: { $schema: schema('KeyChainConfigFile'), spec: { id: 'k', usageType: 'access', keySource: { type: 'required', publicJwk } } } }
            ];
            const res = await plan('hand', handWritten(documents, ['Tenant', 'WebhookEndpoint', 'WebhookEndpoint', 'Client', 'KeyChain']));
            expect(res.status, res.res.payload).to.equal(200);
            const byId = (id: string) => res.body.actions.find((a: { id: string }) => a.id === id);
            expect(byId('hand')).to.include({ action: 'create' });
            expect(byId('env')).to.include({ action: 'create' });
            expect(byId('unset')).to.include({ action: 'blocked', code: 'SECRET_REQUIRED' });
            expect(byId('hand-web')).to.include({ action: 'blocked', code: 'CLIENT_SECRET_REQUIRED' });
            expect(byId('k')).to.include({ action: 'blocked', code: 'PRIVATE_KEY_REQUIRED' });
            expect(res.body.requirements.map((r: { code: string; resource: string; path: string; placeholder?: string }) => `${r.code} ${r.resource} ${r.path} ${r.placeholder ?? ''}`).sort()).to.equal([
                'CLIENT_SECRET_REQUIRED Client/hand-web secret ${UNSET_CLIENT_SECRET}',
                'PRIVATE_KEY_REQUIRED KeyChain/k keySource ',
                'SECRET_REQUIRED WebhookEndpoint/unset auth.config.value ${UNSET_HOOK_SECRET}'
            ]);
            expect(res.body.warnings).to.include({ code: 'UNRESOLVED_PLACEHOLDER', resource: 'Tenant/hand', message: 'description holds an unresolved placeholder, kept as literal text' });
            expect(JSON.stringify(res.body)).to.not.contain(ENV_SECRET);

            // A placeholder that leaves the document invalid (too short for a client secret) blocks the same way.
            const short = handWritten([documents[0]!, { path: 'clients/hand-short.json', document: { $schema: schema('ClientConfigFile'), spec: { clientId: 'hand-short', roles: ['issuance:offer'], secret: '${X}' } } }], ['Tenant', 'Client']);
            expect((await plan('hand', short)).body.actions.find((a: { id: string }) => a.id === 'hand-short')).to.include({ action: 'blocked', code: 'CLIENT_SECRET_REQUIRED' });

            const ready = handWritten(documents.slice(0, 2), ['Tenant', 'WebhookEndpoint']);
            const planned = await plan('hand', ready);
            const done = await importAs('hand', ready, planned.body.planFingerprint);
            expect(done.status, JSON.stringify(done.body)).to.equal(200);
            expect((await t.server.registry.get(system('hand'), webhookEndpointKind, 'env'))!.spec.auth).to.equal({ type: 'apiKey', config: { headerName: 'X-Key', value: ENV_SECRET } });

            const mismatch = handWritten(documents.slice(0, 2), ['Tenant', 'TrustList']);
            const refused = await plan('hand', mismatch);
            expect(refused.body.code).to.equal('BUNDLE_INVALID');
            expect(JSON.stringify(refused.body.details)).to.contain('does not match the manifest kind');
            const otherSchema = handWritten(documents.slice(0, 2), ['Tenant', 'WebhookEndpoint']);
            otherSchema.manifest.resources[1]!.$schema = schema('WebhookEndpointConfigFile').replace('/v1/', '/v2/');
            expect(JSON.stringify((await plan('hand', otherSchema)).body.details)).to.contain('does not match the manifest');
            const noTenant = handWritten(documents.slice(1, 2), ['WebhookEndpoint']);
            expect((await plan('nowhere', noTenant)).body.details).to.equal([{ path: 'documents', message: 'needs the tenant document' }]);
            const otherId = handWritten(documents.slice(0, 2), ['Tenant', 'WebhookEndpoint']);
            otherId.manifest.resources[1]!.id = 'other';
            expect(JSON.stringify((await plan('hand', otherId)).body.details)).to.contain('the manifest names WebhookEndpoint other, the document env');
            // Two tenant documents both name the target tenant.
            const twoTenants = handWritten([documents[0]!, { ...documents[0]!, path: 'info-2.json', document: { ...documents[0]!.document, spec: { id: 'b', name: 'B' } } }], ['Tenant', 'Tenant']);
            expect(JSON.stringify((await plan('hand', twoTenants)).body.details)).to.contain('also defined by another document');
        });

        it('returns !generate client secrets once', async () => {
            const bundle = fillRequirements(exported, 'src', 'gen');
            docOf(bundle, 'Client', 'gen-web').spec.secret = '!generate';
            const res = await planAndImport('gen', rehash(bundle));
            expect(res.status, JSON.stringify(res.body)).to.equal(200);
            expect(res.body.generatedSecrets).to.have.length(1);
            const [generated] = res.body.generatedSecrets;
            expect(generated).to.include({ kind: 'Client', id: 'gen-web' });
            expect(await tokenFor(t.server, 'gen-web', generated.secret)).to.be.a.string();
            const operations = await call('GET', '/api/config-bundles/operations?tenantId=gen', asRoot());
            expect(JSON.stringify(operations.body)).to.not.contain(generated.secret);
        });

        it('rolls back everything when a write fails mid-way', async () => {
            // The client id is taken by another tenant: the plan cannot see it (ids are global), the write fails after
            // the tenant, key chains and others were written.
            const bundle = fillRequirements(exported, 'src', 'dst');
            const planned = await plan('broken', bundle);
            expect(planned.body.blocked).to.be.false();
            const res = await importAs('broken', bundle, planned.body.planFingerprint);
            expect(res.status).to.equal(409);
            expect(await t.server.registry.get(system('broken'), tenantKind, 'broken')).to.be.undefined();
            const snapshot = await tenantSnapshot(t.server, 'broken');
            expect(Object.values(snapshot).flat().filter((row) => !row.includes('"type":"import"'))).to.equal([]);
            const [report] = (await call('GET', '/api/config-bundles/operations?tenantId=broken', asRoot())).body.items;
            expect(report).to.include({ type: 'import', status: 'failed', actor: 'root', mode: 'upsert' });
            expect(await t.server.db.model(BundleLockModel).query().where({ tenantId: 'broken' })).to.equal([]);
        });

        it('runs one import per tenant at a time, also against another replica\'s lock', async () => {
            const bundle = fillRequirements(exported, 'src', 'lock');
            const planned = await plan('lock', bundle);
            const [a, b] = await Promise.all([importAs('lock', bundle, planned.body.planFingerprint), importAs('lock', bundle, planned.body.planFingerprint)]);
            expect([a.status, b.status].sort()).to.equal([200, 409]);
            expect([a, b].find((r) => r.status === 409)!.body.code).to.equal('OPERATION_IN_PROGRESS');
            await t.server.db.model(BundleLockModel).query().insert({ tenantId: 'lock', operationId: '00000000-0000-4000-8000-000000000000', acquiredAt: new Date().toISOString() });
            const replan = await plan('lock', bundle);
            const held = await importAs('lock', bundle, replan.body.planFingerprint);
            expect(held.status).to.equal(409);
            expect(held.body.code).to.equal('OPERATION_IN_PROGRESS');
            await t.server.db.model(BundleLockModel).query().delete().where({ tenantId: 'lock' });
        });

        it('tells a running import of another process from an interrupted one', async () => {
            const id = Crypto.randomUUID();
            const Operations = t.server.db.model(BundleOperationModel);
            const dead = ChildProcess.spawnSync(process.execPath, ['-e', '0']).pid!;
            await Operations.query().insert({ id, tenantId: 'src', type: 'import', mode: 'upsert', status: 'running', actor: 'elsewhere', startedAt: new Date().toISOString(), finishedAt: null, summary: {}, workerHost: Os.hostname(), workerPid: dialect === 'sqlite' ? process.ppid : dead });
            const statusOf = async () => (await call('GET', `/api/config-bundles/operations/${id}`, admin)).body.status;
            const acknowledge = () => call('POST', `/api/config-bundles/operations/${id}/acknowledge-interruption?confirmWorkerStopped=true`, admin);
            if (dialect === 'sqlite') {
                // The worker process (here: the test runner's parent) is alive.
                expect(await statusOf()).to.equal('running');
                expect((await acknowledge()).body.code).to.equal('OPERATION_IN_PROGRESS');
                await Operations.query().findById(id).patch({ workerPid: dead });
                expect(await statusOf()).to.equal('interrupted');
            }
            else {
                // Another replica's import holds its advisory lock for as long as its transaction lives.
                let release!: () => void;
                const held = new Promise<void>((resolve) => (release = resolve));
                let locked!: () => void;
                const acquired = new Promise<void>((resolve) => (locked = resolve));
                const replica = t.server.db.knex.transaction(async (trx) => {
                    await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`hallmark-bundle-import:${id}`]);
                    locked();
                    await held;
                });
                await acquired;
                expect(await statusOf()).to.equal('running');
                expect((await acknowledge()).body.code).to.equal('OPERATION_IN_PROGRESS');
                release();
                await replica;
                expect(await statusOf()).to.equal('interrupted');
            }
            const acknowledged = await acknowledge();
            expect(acknowledged.status).to.equal(200);
            expect(acknowledged.body).to.include({ status: 'interrupted', actor: 'elsewhere' });
            expect(acknowledged.body.summary).to.equal({ acknowledgedBy: 'src-admin' });
            expect((await acknowledge()).body.code).to.equal('OPERATION_NOT_INTERRUPTED');
        });

        it('lists the latest operation reports and audits exports and imports', async () => {
            const list = await call('GET', '/api/config-bundles/operations', admin);
            expect(list.status).to.equal(200);
            const startedAt = list.body.items.map((o: { startedAt: string }) => o.startedAt);
            expect(startedAt).to.equal([...startedAt].sort().reverse());
            const exportReport = list.body.items.find((o: { type: string }) => o.type === 'export');
            expect(exportReport).to.include({ type: 'export', status: 'succeeded', actor: 'src-admin' });
            expect(exportReport.summary).to.include({ resources: exported.documents.length });
            const one = await call('GET', `/api/config-bundles/operations/${exportReport.id}`, admin);
            expect(one.body).to.equal(exportReport);
            const dst = (await call('GET', '/api/config-bundles/operations?tenantId=dst', asRoot())).body.items;
            expect(dst.find((o: { type: string; status: string; mode: string }) => o.type === 'import' && o.status === 'succeeded' && o.mode === 'upsert').summary).to.include({ create: exported.documents.length });
            // Another tenant's report is not found.
            const foreign = dst[0].id;
            expect((await call('GET', `/api/config-bundles/operations/${foreign}`, admin)).status).to.equal(404);
            const audit = await t.server.inject({ method: 'GET', url: '/api/admin/audit-logs?kind=ConfigBundle', headers: admin });
            expect((audit.result as { items: Array<{ action: string }> }).items.map((i) => i.action)).to.include('export');
            // Only the latest 50.
            const many = Array.from({ length: 60 }, (_, i) => ({ id: Crypto.randomUUID(), tenantId: 'many', type: 'export' as const, mode: null, status: 'succeeded' as const, actor: 'x', startedAt: new Date(Date.UTC(2026, 0, 1, 0, i)).toISOString(), finishedAt: null, summary: { n: i } }));
            for (const row of many) {
                await t.server.db.model(BundleOperationModel).query().insert(row);
            }
            const latest = (await call('GET', '/api/config-bundles/operations?tenantId=many', asRoot())).body.items;
            expect(latest).to.have.length(50);
            expect(latest[0].summary).to.equal({ n: 59 });
            expect(latest[49].summary).to.equal({ n: 10 });
        });

        it('checks roles and tenants', async () => {
            const offer = bearer((await clientWithToken(t.server, root, { clientId: 'src-offer', roles: ['issuance:offer'], tenantId: 'src' })).token);
            expect((await call('GET', '/api/config-bundles/export', offer)).status).to.equal(403);
            expect((await call('POST', '/api/config-bundles/plan', offer, exported)).status).to.equal(403);
            expect((await call('GET', '/api/config-bundles/export?tenantId=dst', admin)).status).to.equal(404);
            expect((await call('GET', '/api/config-bundles/export', asRoot())).status).to.equal(400);
            expect((await call('GET', '/api/config-bundles/export?tenantId=nobody', asRoot())).status).to.equal(404);
            expect((await t.server.inject({ method: 'GET', url: '/api/config-bundles/export' })).statusCode).to.equal(401);
        });

        it('refuses malformed JSON bundles with BUNDLE_INVALID and details', async () => {
            const bundle = fillRequirements(exported, 'src', 'bad');
            const expectInvalid = async (b: unknown, detail: RegExp) => {
                const res = await call('POST', '/api/config-bundles/plan?tenantId=bad', asRoot(), b);
                expect(res.status, res.res.payload).to.equal(400);
                expect(res.body.code).to.equal('BUNDLE_INVALID');
                expect(JSON.stringify(res.body.details)).to.match(detail);
            };
            const checksum = structuredClone(bundle);
            docOf(checksum, 'Badge', 'gold').spec.label = 'tampered';
            await expectInvalid(checksum, /checksum mismatch/);
            const unknown = structuredClone(bundle);
            docOf(unknown, 'Badge', 'gold').$schema = 'https://schemas.hallmark.dev/config/v1/NoSuchConfigFile.schema.json';
            unknown.manifest.resources.find((r) => r.id === 'gold')!.$schema = docOf(unknown, 'Badge', 'gold').$schema;
            await expectInvalid(rehash(unknown), /not a schema this service knows/);
            const newer = structuredClone(bundle);
            docOf(newer, 'Badge', 'gold').$schema = 'https://schemas.hallmark.dev/config/v2/BadgeConfigFile.schema.json';
            newer.manifest.resources.find((r) => r.id === 'gold')!.$schema = docOf(newer, 'Badge', 'gold').$schema;
            await expectInvalid(rehash(newer), /too new/);
            const escape = structuredClone(bundle);
            escape.manifest.resources.find((r) => r.id === 'gold')!.path = '../gold.json';
            escape.documents.find((d) => d.path === 'badges/gold.json')!.path = '../gold.json';
            await expectInvalid(escape, /\.\. segments/);
            const duplicate = structuredClone(bundle);
            duplicate.documents.push(duplicate.documents.find((d) => d.path === 'badges/gold.json')!);
            await expectInvalid(duplicate, /appears twice/);
            const unlisted = structuredClone(bundle);
            unlisted.documents.push({ path: 'badges/extra.json', document: docOf(bundle, 'Badge', 'gold') as never });
            await expectInvalid(unlisted, /not listed/);
            const sameResource = structuredClone(bundle);
            sameResource.documents.push({ path: 'badges/copy.json', document: docOf(bundle, 'Badge', 'gold') as never });
            sameResource.manifest.resources.push({ ...sameResource.manifest.resources.find((r) => r.id === 'gold')!, path: 'badges/copy.json' });
            await expectInvalid(sameResource, /listed twice/);
            const format = structuredClone(bundle);
            format.manifest.formatVersion = 3;
            await expectInvalid(format, /formatVersion/);
            const invalid = structuredClone(bundle);
            docOf(invalid, 'Badge', 'gold').spec.unknownField = true;
            await expectInvalid(rehash(invalid), /unknownField/);
            const asset = structuredClone(bundle);
            asset.assets = [{ path: 'images/logo.png', contentType: 'image/png', data: Buffer.from('png bytes').toString('base64') }];
            asset.manifest.assets = [{ path: 'images/logo.png', contentType: 'image/png', sha256: sha256Hex(Buffer.from('other bytes')) }];
            await expectInvalid(asset, /images\/logo.png: checksum mismatch/);
            asset.manifest.assets[0]!.sha256 = sha256Hex(Buffer.from('png bytes'));
            const withAsset = await call('POST', '/api/config-bundles/plan?tenantId=bad', asRoot(), asset);
            expect(withAsset.status).to.equal(200);
            expect(withAsset.body.warnings.map((w: { code: string }) => w.code)).to.include('ASSETS_NOT_STORED');
            const extraField = await call('POST', '/api/config-bundles/plan?tenantId=bad', asRoot(), { ...bundle, extra: 1 });
            expect(extraField.status).to.equal(400);
            const wrongType = await call('POST', '/api/config-bundles/plan?tenantId=bad&mode=merge', asRoot(), bundle);
            expect(wrongType.status).to.equal(400);
        });

        describe('ZIP bundles', () => {
            const zip = async (files: Array<[string, Buffer | string]>) => {
                const archive = new Yazl.ZipFile();
                for (const [name, data] of files) {
                    archive.addBuffer(Buffer.isBuffer(data) ? data : Buffer.from(data), name);
                }
                archive.end();
                const chunks: Buffer[] = [];
                for await (const chunk of archive.outputStream as AsyncIterable<Buffer>) {
                    chunks.push(chunk);
                }
                return Buffer.concat(chunks);
            };
            const multipart = (archive: Buffer) => {
                const boundary = '----hallmark-test';
                const payload = Buffer.concat([
                    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="bundle"; filename="bundle.zip"\r\nContent-Type: application/zip\r\n\r\n`),
                    archive,
                    Buffer.from(`\r\n--${boundary}--\r\n`)
                ]);
                return { payload, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
            };
            const send = async (path: string, archive: Buffer) => {
                const { payload, headers } = multipart(archive);
                const res = await t.server.inject({ method: 'POST', url: path, headers: { ...headers, ...asRoot() }, payload });
                return { status: res.statusCode, body: res.result as any, res };
            };
            /** The filled bundle as ZIP files (documents pretty-printed as the export writes them). */
            const zipFiles = (bundle: JsonBundle): Array<[string, Buffer]> => {
                const files = bundle.documents.map((d) => [d.path, Buffer.from(JSON.stringify(d.document, null, 2))] as [string, Buffer]);
                const m = structuredClone(bundle.manifest);
                m.resources = m.resources.map((r) => ({ ...r, sha256: sha256Hex(files.find(([p]) => p === r.path)![1]) }));
                return [['manifest.json', Buffer.from(JSON.stringify(m))], ...files];
            };

            it('plans and imports a ZIP bundle', async () => {
                const archive = await zip(zipFiles(fillRequirements(exported, 'src', 'zipped')));
                const planned = await send('/api/config-bundles/plan/archive?tenantId=zipped', archive);
                expect(planned.status, planned.res.payload).to.equal(200);
                expect(planned.body.blocked).to.be.false();
                const done = await send(`/api/config-bundles/import/archive?tenantId=zipped&planFingerprint=${planned.body.planFingerprint}`, archive);
                expect(done.status, done.res.payload).to.equal(200);
                expect(await t.server.registry.get(system('zipped'), badgeKind, 'gold')).to.exist();
            });

            it('refuses a zip bomb from its declared size, before inflating it', async () => {
                const bomb = await zip([['manifest.json', '{}'], ['big.bin', Buffer.alloc(101 * 1024 * 1024)]]);
                expect(bomb.length).to.be.below(1024 * 1024);
                const res = await send('/api/config-bundles/plan/archive?tenantId=bomb', bomb);
                expect(res.status).to.equal(413);
                expect(res.body.message).to.contain('100 MiB');
            });

            it('refuses escaping, duplicate, unlisted and tampered entries', async () => {
                const files = zipFiles(fillRequirements(exported, 'src', 'zbad'));
                const expectInvalid = async (archive: Buffer, detail: RegExp) => {
                    const res = await send('/api/config-bundles/plan/archive?tenantId=zbad', archive);
                    expect(res.status, res.res.payload).to.equal(400);
                    expect(res.body.code).to.equal('BUNDLE_INVALID');
                    expect(JSON.stringify(res.body)).to.match(detail);
                };
                // yazl refuses to write such names: the archive is patched afterwards, in both of each name's headers.
                const patched = (archive: Buffer, from: string, to: string) => Buffer.from(archive.toString('latin1').split(from).join(to), 'latin1');
                await expectInvalid(patched(await zip([...files, ['xx/evil.json', '{}']]), 'xx/evil.json', '../evil.json'), /invalid relative path|\.\. segments/);
                await expectInvalid(patched(await zip([...files, ['qabsolute.json', '{}']]), 'qabsolute.json', '/absolute.json'), /absolute path|must be relative/);
                await expectInvalid(patched(await zip([...files, ['badges/gold.jsoX', '{}']]), 'badges/gold.jsoX', 'badges/gold.json'), /appears twice/);
                await expectInvalid(await zip([...files, ['notes.txt', 'hello']]), /notes\.txt is not listed/);
                await expectInvalid(await zip(files.map(([p, d]) => [p, p === 'badges/gold.json' ? Buffer.concat([d, Buffer.from(' ')]) : d] as [string, Buffer])), /checksum mismatch/);
                await expectInvalid(await zip(files.filter(([p]) => p !== 'manifest.json')), /no manifest/);
                await expectInvalid(Buffer.from('not a zip at all'), /not a readable ZIP/);
            });

            it('reads an uploaded archive from a temporary file that is gone after the response, whatever the answer', async () => {
                // The files go once the response is sent (onPostResponse), which may be just after inject resolves.
                const leftovers = async () => {
                    for (let i = 0; i < 100 && Fs.readdirSync(UPLOADS_FOLDER).length; i++) {
                        await new Promise((resolve) => setTimeout(resolve, 10));
                    }
                    return Fs.readdirSync(UPLOADS_FOLDER);
                };
                const archive = await zip(zipFiles(fillRequirements(exported, 'src', 'tmpfiles')));
                expect((await send('/api/config-bundles/plan/archive?tenantId=tmpfiles', archive)).status).to.equal(200);
                expect(await leftovers(), 'after a plan').to.equal([]);
                expect((await send('/api/config-bundles/plan/archive?tenantId=tmpfiles', Buffer.from('not a zip'))).status).to.equal(400);
                expect(await leftovers(), 'after a refused archive').to.equal([]);
                // Refused by query validation after the upload was written.
                expect((await send('/api/config-bundles/plan/archive?tenantId=tmpfiles&mode=sideways', archive)).status).to.equal(400);
                expect(await leftovers(), 'after a refused query').to.equal([]);
                // A plain field (no filename) is not a file.
                const boundary = '----hallmark-plain';
                const res = await t.server.inject({
                    method: 'POST',
                    url: '/api/config-bundles/plan/archive?tenantId=tmpfiles',
                    headers: { 'content-type': `multipart/form-data; boundary=${boundary}`, ...asRoot() },
                    payload: `--${boundary}\r\nContent-Disposition: form-data; name="bundle"\r\n\r\n/etc/passwd\r\n--${boundary}--\r\n`
                });
                expect(res.statusCode).to.equal(400);
                expect(JSON.stringify(res.result)).to.contain('must be a file');
            });

            it('refuses an archive over 50 MiB with 413', async () => {
                const res = await send('/api/config-bundles/plan/archive?tenantId=big', Buffer.alloc(51 * 1024 * 1024));
                expect(res.status).to.equal(413);
            });
        });
    });
}
