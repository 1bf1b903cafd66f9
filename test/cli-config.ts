import ChildProcess from 'node:child_process';
import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import type { TenantContext } from '../lib/registry/kind';
import { PassThrough } from 'node:stream';
import { runConfigCommand } from '../lib/cli/config';
import { writeZip } from '../plugins/bundles/archive';
import { jcs, sha256Hex, type JsonBundle } from '../plugins/bundles/bundle';
import { tenantKind } from '../resources/tenant';
import { trustListKind } from '../resources/trust-list';
import { DIALECTS } from './helpers/databases';
import { ROOT_CLIENT, startTestServer, type TestServer } from './helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const root = Path.join(__dirname, '..');
const demoFolder = Path.join(root, 'examples/config/demo');
const schemaOf = (file: string, version: number) => `https://schemas.hallmark.dev/config/v${version}/${file}.schema.json`;
const demo = (path: string) => JSON.parse(Fs.readFileSync(Path.join(demoFolder, path), 'utf8')) as { $schema: string; spec: Record<string, any> };
const SLOW = { timeout: 120_000 };

interface Run { status: number | null; stdout: string; stderr: string }

/**
 * The CLI as a child process on the TypeScript sources. Asynchronous: the test server answering it runs in this
 * process. stdin is not a terminal, as in CI.
 */
const cli = (args: string[], env: Record<string, string> = {}): Promise<Run> => new Promise((resolve, reject) => {
    const child = ChildProcess.spawn(process.execPath, ['-r', Path.join(root, 'scripts/register-ts.js'), Path.join(root, 'bin/hallmark.ts'), 'config', ...args],
        { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdin.end();
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('error', reject);
    child.on('close', (status) => {
        clearTimeout(timer);
        resolve({ status, stdout, stderr });
    });
});

const tempDir = () => Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-cli-config-'));

const v1Presentation = () => {
    const spec = demo('presentation/identify.json').spec;
    return {
        $schema: schemaOf('PresentationConfigFile', 1),
        spec: { ...spec, registration_cert: { id: 'reg-1', body: { privacy_policy: 'https://shop.example.com/privacy', purpose: [{ lang: 'en', content: 'Sign-in' }], provided_attestations: [{ format: 'dc+sd-jwt', meta: { vct_values: ['urn:eudi:pid:1'] } }] } } }
    };
};

describe('hallmark config (offline)', () => {
    const dirs: string[] = [];
    after(() => dirs.forEach((d) => Fs.rmSync(d, { recursive: true, force: true })));

    it('upgrades a PresentationConfig v1 document to v3 on stdout, with the warning on stderr', SLOW, async () => {
        const dir = tempDir();
        dirs.push(dir);
        const file = Path.join(dir, 'identify.json');
        Fs.writeFileSync(file, JSON.stringify(v1Presentation()));
        const res = await cli(['upgrade', file]);
        expect(res.status, res.stderr).to.equal(0);
        const upgraded = JSON.parse(res.stdout);
        expect(upgraded.$schema).to.equal(schemaOf('PresentationConfigFile', 3));
        expect(upgraded.spec.registration_cert.body).to.equal({ privacy_policy: 'https://shop.example.com/privacy', purpose: [{ lang: 'en', content: 'Sign-in' }] });
        expect(upgraded.spec.dcql_query).to.equal(demo('presentation/identify.json').spec.dcql_query);
        expect(res.stderr).to.contain('PROVIDED_ATTESTATIONS_REMOVED');
        expect(res.stderr).to.contain('1 of 1 document(s) upgraded');
        // Not written in place without --write.
        expect(JSON.parse(Fs.readFileSync(file, 'utf8')).$schema).to.equal(schemaOf('PresentationConfigFile', 1));
    });

    it('validates a good tenant folder (a v1 document in it) and rewrites it in place with upgrade --write', SLOW, async () => {
        const dir = tempDir();
        dirs.push(dir);
        const tenant = Path.join(dir, 'shop');
        Fs.cpSync(demoFolder, tenant, { recursive: true });
        Fs.writeFileSync(Path.join(tenant, 'presentation/identify.json'), JSON.stringify(v1Presentation()));
        const valid = await cli(['validate', tenant]);
        expect(valid.status, valid.stderr).to.equal(0);
        expect(valid.stderr).to.contain('✓ shop/presentation/identify.json (from version 1)');
        expect(valid.stderr).to.contain('8 document(s) valid');

        // The CONFIG_FOLDER root (tenant folders under it) is read the same way.
        const written = await cli(['upgrade', dir, '--write']);
        expect(written.status, written.stderr).to.equal(0);
        expect(written.stderr).to.contain('1 of 8 document(s) upgraded');
        const rewritten = JSON.parse(Fs.readFileSync(Path.join(tenant, 'presentation/identify.json'), 'utf8'));
        expect(rewritten.$schema).to.equal(schemaOf('PresentationConfigFile', 3));
        expect(rewritten.spec.registration_cert.body.provided_attestations).to.not.exist();
    });

    it('reports every broken file of a bad folder with exit code 1', SLOW, async () => {
        const parent = tempDir();
        dirs.push(parent);
        const dir = Path.join(parent, 'broken-shop');
        Fs.cpSync(demoFolder, dir, { recursive: true });
        const trust = demo('trust-lists/demo.json');
        Fs.writeFileSync(Path.join(dir, 'trust-lists/demo.json'), JSON.stringify({ ...trust, spec: { ...trust.spec, colour: 'red' } }));
        Fs.writeFileSync(Path.join(dir, 'presentation/newer.json'), JSON.stringify({ ...demo('presentation/identify.json'), $schema: schemaOf('PresentationConfigFile', 4) }));
        Fs.writeFileSync(Path.join(dir, 'presentation/broken.json'), '{"$schema": ');
        const empty = v1Presentation() as { $schema: string; spec: Record<string, any> };
        empty.$schema = schemaOf('PresentationConfigFile', 2);
        delete (empty.spec.registration_cert.body as Record<string, unknown>).provided_attestations;
        empty.spec.dcql_query.credentials[0].claims[0].values = [];
        Fs.writeFileSync(Path.join(dir, 'presentation/empty-values.json'), JSON.stringify(empty));
        const res = await cli(['validate', dir, '--quiet']);
        expect(res.status).to.equal(1);
        const name = 'broken-shop';
        expect(res.stderr).to.contain(`✗ ${name}/trust-lists/demo.json\n    colour: "colour" is not allowed`);
        expect(res.stderr).to.contain(`✗ ${name}/presentation/newer.json\n    $schema: version is too new`);
        expect(res.stderr).to.contain(`✗ ${name}/presentation/broken.json\n    not valid JSON`);
        expect(res.stderr).to.contain(`✗ ${name}/presentation/empty-values.json\n    dcql_query.credentials.0.claims.0.values: is empty`);
        expect(res.stderr).to.not.contain('✓');
        expect(res.stderr).to.contain('4 of 11 document(s) invalid');

        // upgrade --write on the same folder writes nothing while a file fails.
        const before = Fs.readFileSync(Path.join(dir, 'presentation/identify.json'), 'utf8');
        const upgrade = await cli(['upgrade', dir, '--write']);
        expect(upgrade.status).to.equal(1);
        expect(Fs.readFileSync(Path.join(dir, 'presentation/identify.json'), 'utf8')).to.equal(before);
    });

    it('validates and upgrades a JSON bundle: placeholders kept, new $schema and checksums in the manifest', SLOW, async () => {
        const dir = tempDir();
        dirs.push(dir);
        const presentation = v1Presentation();
        const hook = { $schema: schemaOf('WebhookEndpointConfigFile', 1), spec: { id: 'hook', name: 'Backend', url: '${CLI_TEST_HOOK_URL}', auth: { type: 'apiKey', config: { headerName: 'X-Key', value: '${CLI_TEST_HOOK_SECRET}' } } } };
        const bundle: JsonBundle = {
            manifest: {
                format: 'hallmark.config-bundle', formatVersion: 1, assets: [], requirements: [], warnings: [],
                resources: [
                    { kind: 'PresentationConfig', id: 'identify', $schema: presentation.$schema, path: 'presentation/identify.json', sha256: sha256Hex(jcs(presentation)) },
                    { kind: 'WebhookEndpoint', id: 'hook', $schema: hook.$schema, path: 'webhook-endpoints/hook.json', sha256: sha256Hex(jcs(hook)) }
                ]
            },
            documents: [{ path: 'presentation/identify.json', document: presentation }, { path: 'webhook-endpoints/hook.json', document: hook }],
            assets: []
        };
        const file = Path.join(dir, 'bundle.json');
        Fs.writeFileSync(file, JSON.stringify(bundle));
        const valid = await cli(['validate', file]);
        expect(valid.status, valid.stderr).to.equal(0);
        expect(valid.stderr).to.contain('warning unresolved placeholder ${CLI_TEST_HOOK_URL}');
        expect(valid.stderr).to.contain('2 document(s) valid');

        const out = Path.join(dir, 'upgraded.json');
        const upgraded = await cli(['upgrade', file, '--out', out]);
        expect(upgraded.status, upgraded.stderr).to.equal(0);
        const result = JSON.parse(Fs.readFileSync(out, 'utf8')) as JsonBundle;
        expect(result.manifest.formatVersion).to.equal(2);
        expect(result.manifest.resources.map((r) => r.$schema)).to.equal([schemaOf('PresentationConfigFile', 3), schemaOf('WebhookEndpointConfigFile', 1)]);
        for (const entry of result.manifest.resources) {
            expect(entry.sha256).to.equal(sha256Hex(jcs(result.documents.find((d) => d.path === entry.path)!.document)));
        }
        expect(result.documents[1]!.document).to.equal(hook);
    });

    it('answers usage errors with exit code 2 and the subcommand help, and --help with 0', SLOW, async () => {
        const res = await cli(['plan', 'bundle.json', '--mode', 'merge']);
        expect(res.status).to.equal(2);
        expect(res.stderr).to.contain('--mode must be one of create, upsert, replace');
        expect(res.stderr).to.contain('Usage: hallmark config plan');
        const help = await cli(['import', '--help']);
        expect(help.status).to.equal(0);
        expect(help.stdout).to.contain('Usage: hallmark config import');
        expect(help.stdout).to.contain('3 plan blocked');
    });
});

/** runConfigCommand in this process, stdin not a terminal: the same code the child runs, measured for coverage. */
const inProcess = async (args: string[], env: Record<string, string> = {}) => {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let out = '';
    let err = '';
    stdout.on('data', (c: Buffer) => (out += c.toString()));
    stderr.on('data', (c: Buffer) => (err += c.toString()));
    const stdin = new PassThrough();
    const status = await runConfigCommand(args, { stdin, stdout, stderr, env });
    return { status, out, err };
};

describe('hallmark config in process', () => {
    const dirs: string[] = [];
    after(() => dirs.forEach((d) => Fs.rmSync(d, { recursive: true, force: true })));

    it('answers every usage error with 2 and the right help, and unreadable input with 1', SLOW, async () => {
        const dir = tempDir();
        dirs.push(dir);
        const notJson = Path.join(dir, 'notes.txt');
        Fs.writeFileSync(notJson, 'hello');
        const remote = { HALLMARK_URL: 'http://127.0.0.1:9', HALLMARK_CLIENT_ID: 'x', HALLMARK_CLIENT_SECRET: 'y' };
        const cases: Array<[string[], number, string, Record<string, string>?]> = [
            [[], 2, ''],
            [['--help'], 0, ''],
            [['frobnicate'], 2, 'Unknown config command frobnicate'],
            [['validate'], 2, 'a path is required'],
            [['validate', 'a', 'b'], 2, 'give one path'],
            [['validate', dir, '--write'], 2, 'validate writes nothing'],
            [['upgrade', dir, '--quiet'], 2, '--quiet belongs to validate'],
            [['upgrade', dir, '--out', 'x.json'], 2, 'a folder is upgraded in place'],
            [['validate', dir, '--bogus'], 2, "Unknown option '--bogus'"],
            [['validate', Path.join(dir, 'missing.json')], 1, 'no such file or directory'],
            [['validate', notJson], 1, 'not valid JSON'],
            [['validate', dir], 1, 'no configuration files found'],
            [['export', 'bundle.json'], 2, 'export takes no bundle'],
            [['export', '--format', 'tar'], 2, '--format must be json or zip'],
            [['plan'], 2, 'a bundle (JSON or ZIP file) is required'],
            [['plan', 'a', 'b'], 2, 'give one bundle'],
            [['plan', notJson, '--format', 'yaml'], 2, '--format must be table or json'],
            [['plan', notJson, '--out', 'x'], 2, '--out belongs to export'],
            [['plan', notJson, '--yes'], 2, '--yes belongs to import'],
            [['plan', notJson], 1, 'neither a ZIP nor a JSON bundle', remote],
            [['plan', Path.join(dir, 'missing.json')], 1, 'cannot be read', remote],
            [['export'], 2, '--url (or HALLMARK_URL) is required'],
            [['export', '--url', 'ftp://x'], 2, 'is not an http(s) URL'],
            [['export', '--url', 'http://127.0.0.1:9'], 2, 'client credentials are required'],
            [['export'], 1, 'cannot be reached', remote]
        ];
        for (const [args, status, message, env] of cases) {
            const res = await inProcess(args, env);
            expect(res.status, `${args.join(' ')}: ${res.err}`).to.equal(status);
            expect(res.err, args.join(' ')).to.contain(message);
        }
    });

    it('upgrades and validates documents, folders and bundles (JSON and ZIP)', SLOW, async () => {
        const dir = tempDir();
        dirs.push(dir);
        const tenant = Path.join(dir, 'shop');
        Fs.cpSync(demoFolder, tenant, { recursive: true });
        Fs.writeFileSync(Path.join(tenant, 'presentation/identify.json'), JSON.stringify(v1Presentation()));
        const doc = Path.join(dir, 'identify.json');
        Fs.writeFileSync(doc, JSON.stringify(v1Presentation()));

        const printed = await inProcess(['upgrade', doc]);
        expect(printed.status, printed.err).to.equal(0);
        expect(JSON.parse(printed.out).$schema).to.equal(schemaOf('PresentationConfigFile', 3));
        const inPlace = await inProcess(['upgrade', doc, '--write']);
        expect(inPlace.status).to.equal(0);
        expect(JSON.parse(Fs.readFileSync(doc, 'utf8')).$schema).to.equal(schemaOf('PresentationConfigFile', 3));
        const bare = Path.join(dir, 'bare.json');
        Fs.writeFileSync(bare, JSON.stringify(demo('trust-lists/demo.json').spec));
        const bareRes = await inProcess(['validate', bare]);
        expect(bareRes.status).to.equal(1);
        expect(bareRes.err).to.contain('not a configuration document: it has no $schema');
        const bareUpgrade = await inProcess(['upgrade', bare]);
        expect(bareUpgrade.status).to.equal(1);

        const dryRun = await inProcess(['upgrade', tenant]);
        expect(dryRun.status).to.equal(0);
        expect(dryRun.err).to.contain('(dry run: --write rewrites them)');
        expect(JSON.parse(Fs.readFileSync(Path.join(tenant, 'presentation/identify.json'), 'utf8')).$schema).to.equal(schemaOf('PresentationConfigFile', 1));
        const valid = await inProcess(['validate', tenant, '--quiet']);
        expect(valid.status).to.equal(0);
        expect(valid.err).to.equal('8 document(s) valid\n');

        // A bundle made from the folder's documents, as JSON and as ZIP.
        const files = ['trust-lists/demo.json', 'presentation/identify.json'];
        const documents = files.map((path) => ({ path, document: JSON.parse(Fs.readFileSync(Path.join(tenant, path), 'utf8')) }));
        const bundle: JsonBundle = {
            manifest: {
                format: 'hallmark.config-bundle', formatVersion: 2, tenant: 'shop', assets: [], requirements: [], warnings: [],
                resources: documents.map((d, i) => ({ kind: ['TrustList', 'PresentationConfig'][i]!, id: d.document.spec.id, $schema: d.document.$schema, path: d.path, sha256: sha256Hex(jcs(d.document)) }))
            },
            documents,
            assets: []
        };
        const jsonFile = Path.join(dir, 'bundle.json');
        Fs.writeFileSync(jsonFile, JSON.stringify(bundle));
        expect((await inProcess(['validate', jsonFile])).status).to.equal(0);
        const jsonOut = await inProcess(['upgrade', jsonFile]);
        expect(jsonOut.status).to.equal(0);
        expect(JSON.parse(jsonOut.out).manifest.resources[1].$schema).to.equal(schemaOf('PresentationConfigFile', 3));

        const zipManifest = { ...bundle.manifest, resources: bundle.manifest.resources.map((r, i) => ({ ...r, sha256: sha256Hex(Buffer.from(JSON.stringify(documents[i]!.document))) })) };
        const zipFile = Path.join(dir, 'bundle.zip');
        Fs.writeFileSync(zipFile, await writeZip([
            { path: 'manifest.json', data: Buffer.from(JSON.stringify(zipManifest)) },
            ...documents.map((d) => ({ path: d.path, data: Buffer.from(JSON.stringify(d.document)) }))
        ], new Date()));
        expect((await inProcess(['validate', zipFile])).status).to.equal(0);
        const noOut = await inProcess(['upgrade', zipFile]);
        expect(noOut.status).to.equal(1);
        expect(noOut.err).to.contain('give --out <file.zip>');
        const zipOut = Path.join(dir, 'upgraded.zip');
        expect((await inProcess(['upgrade', zipFile, '--out', zipOut])).status).to.equal(0);
        const upgradedZip = await inProcess(['validate', zipOut]);
        expect(upgradedZip.status, upgradedZip.err).to.equal(0);
        expect(upgradedZip.err).to.not.contain('from version');

        // A checksum mismatch is BUNDLE_INVALID for validate and upgrade alike.
        bundle.manifest.resources[0]!.sha256 = '0'.repeat(64);
        Fs.writeFileSync(jsonFile, JSON.stringify(bundle));
        const mismatch = await inProcess(['validate', jsonFile]);
        expect(mismatch.status).to.equal(1);
        expect(mismatch.err).to.contain('✗');
        expect((await inProcess(['upgrade', jsonFile])).status).to.equal(1);
        Fs.writeFileSync(jsonFile, JSON.stringify({ manifest: {}, documents: 'no' }));
        expect((await inProcess(['validate', jsonFile])).err).to.contain('not a valid JSON bundle');
    });
});

const system = (tenantId?: string): TenantContext => ({ ...(tenantId ? { tenantId } : {}), clientId: 'system:test', roles: [] });

/** Recomputes the checksums of a JSON bundle after the test edited it. */
const rehash = (bundle: JsonBundle): JsonBundle => {
    for (const entry of bundle.manifest.resources) {
        entry.sha256 = sha256Hex(jcs(bundle.documents.find((d) => d.path === entry.path)!.document));
    }
    return bundle;
};

for (const dialect of DIALECTS) {
    describe(`hallmark config against a running service (${dialect})`, () => {
        let t: TestServer;
        let dir: string;
        let env: Record<string, string>;
        const tenantId = 'cli-shop';

        before(async () => {
            t = await startTestServer(dialect, { listen: true });
            dir = tempDir();
            env = { HALLMARK_URL: t.server.info.uri, HALLMARK_CLIENT_ID: ROOT_CLIENT.id, HALLMARK_CLIENT_SECRET: ROOT_CLIENT.secret };
            await t.server.registry.write(system(), tenantKind, { ...demo('info.json').spec, id: tenantId });
            await t.server.registry.write(system(tenantId), trustListKind, demo('trust-lists/demo.json').spec);
        });

        after(async () => {
            await t?.stop();
            Fs.rmSync(dir, { recursive: true, force: true });
        });

        it('exports, plans and imports a changed bundle end to end', SLOW, async () => {
            const exportFile = Path.join(dir, 'export.json');
            const exported = await cli(['export', '--tenant', tenantId, '--out', exportFile], env);
            expect(exported.status, exported.stderr).to.equal(0);
            expect(exported.stderr).to.contain('2 resource(s) exported');
            const bundle = JSON.parse(Fs.readFileSync(exportFile, 'utf8')) as JsonBundle;
            expect(bundle.manifest.tenant).to.equal(tenantId);

            // An edited description: the plan shows one update, and importing needs --yes off a terminal.
            const trust = bundle.documents.find((d) => d.path === 'trust-lists/demo.json')!;
            (trust.document.spec as { description: string }).description = 'Edited in Git';
            const edited = Path.join(dir, 'edited.json');
            Fs.writeFileSync(edited, JSON.stringify(rehash(bundle)));
            const plan = await cli(['plan', edited, '--tenant', tenantId], env);
            expect(plan.status, plan.stderr).to.equal(0);
            expect(plan.stdout).to.match(/^update\s+TrustList\s+demo\s+description$/m);
            expect(plan.stdout).to.match(/^unchanged\s+Tenant\s+cli-shop/m);
            expect(plan.stdout).to.contain('0 create, 1 update, 0 delete, 1 unchanged, 0 skip, 0 blocked');

            const refused = await cli(['import', edited, '--tenant', tenantId], env);
            expect(refused.status).to.equal(2);
            expect(refused.stderr).to.contain('run again with --yes');
            expect((await t.server.registry.get(system(tenantId), trustListKind, 'demo'))!.spec.description).to.equal(demo('trust-lists/demo.json').spec.description);

            const imported = await cli(['import', edited, '--tenant', tenantId, '--yes', '--format', 'json'], env);
            expect(imported.status, imported.stderr).to.equal(0);
            expect(imported.stderr).to.contain('Importing 1 change(s) into tenant cli-shop');
            const result = JSON.parse(imported.stdout);
            expect(result.actions.find((a: { kind: string }) => a.kind === 'TrustList').action).to.equal('update');
            expect((await t.server.registry.get(system(tenantId), trustListKind, 'demo'))!.spec.description).to.equal('Edited in Git');
        });

        it('exports a ZIP and plans it unchanged', SLOW, async () => {
            const zipFile = Path.join(dir, 'export.zip');
            const exported = await cli(['export', '--tenant', tenantId, '--format', 'zip', '--out', zipFile], env);
            expect(exported.status, exported.stderr).to.equal(0);
            expect(Fs.readFileSync(zipFile).subarray(0, 2).toString('latin1')).to.equal('PK');
            const plan = await cli(['plan', zipFile, '--tenant', tenantId, '--format', 'json'], env);
            expect(plan.status, plan.stderr).to.equal(0);
            const body = JSON.parse(plan.stdout);
            expect(body.blocked).to.be.false();
            expect(body.actions.map((a: { action: string }) => a.action)).to.equal(['unchanged', 'unchanged']);
        });

        it('asks on a terminal and imports only after yes (in process)', SLOW, async () => {
            const bundle = JSON.parse(Fs.readFileSync(Path.join(dir, 'export.json'), 'utf8')) as JsonBundle;
            const trust = bundle.documents.find((d) => d.path === 'trust-lists/demo.json')!.document;
            (trust.spec as { description: string }).description = 'Confirmed on a terminal';
            // The earlier import raised the stored generations (the tenant's too, for its new ownership) past the
            // exported ones: with them the plan would block with STALE_GENERATION.
            bundle.documents.forEach((d) => delete d.document.metadata);
            const file = Path.join(dir, 'terminal.json');
            Fs.writeFileSync(file, JSON.stringify(rehash(bundle)));
            const run = async (answer: string) => {
                const stdin = Object.assign(new PassThrough(), { isTTY: true });
                const stdout = new PassThrough();
                const stderr = new PassThrough();
                let out = '';
                let err = '';
                stdout.on('data', (c: Buffer) => (out += c.toString()));
                stderr.on('data', (c: Buffer) => (err += c.toString()));
                stdin.write(`${answer}\n`);
                const status = await runConfigCommand(['import', file, '--tenant', tenantId], { stdin, stdout, stderr, env });
                return { status, out, err };
            };
            const description = async () => (await t.server.registry.get(system(tenantId), trustListKind, 'demo'))!.spec.description;
            const declined = await run('n');
            expect(declined.status, declined.out + declined.err).to.equal(1);
            expect(declined.err).to.contain('Import 1 change(s) into tenant cli-shop? [y/N]');
            expect(declined.err).to.contain('declined: nothing was imported');
            expect(declined.out).to.match(/^update\s+TrustList\s+demo\s+description$/m);
            expect(await description()).to.equal('Edited in Git');
            const accepted = await run('y');
            expect(accepted.status, accepted.err).to.equal(0);
            expect(accepted.err).to.contain('Imported in');
            expect(await description()).to.equal('Confirmed on a terminal');
        });

        it('exports, plans and imports in process as well (stdout export, nothing to import, wrong tenant)', SLOW, async () => {
            const exported = await inProcess(['export', '--tenant', tenantId], env);
            expect(exported.status, exported.err).to.equal(0);
            const bundle = JSON.parse(exported.out) as JsonBundle;
            expect(bundle.manifest.resources.map((r) => r.kind).sort()).to.equal(['Tenant', 'TrustList']);
            const file = Path.join(dir, 'fresh.json');
            Fs.writeFileSync(file, exported.out);
            const zip = Path.join(dir, 'fresh.zip');
            expect((await inProcess(['export', '--tenant', tenantId, '--format', 'zip', '--out', zip], env)).status).to.equal(0);

            const plan = await inProcess(['plan', zip, '--tenant', tenantId], env);
            expect(plan.status, plan.err).to.equal(0);
            expect(plan.out).to.contain('0 create, 0 update, 0 delete, 2 unchanged, 0 skip, 0 blocked');
            const nothing = await inProcess(['import', file, '--tenant', tenantId, '--format', 'json'], env);
            expect(nothing.status, nothing.err).to.equal(0);
            expect(nothing.err).to.contain('Nothing to import');
            expect(JSON.parse(nothing.out).operationId).to.be.null();
            const wrongSecret = await inProcess(['plan', file, '--tenant', tenantId], { ...env, HALLMARK_CLIENT_SECRET: 'wrong' });
            expect(wrongSecret.status).to.equal(1);
            expect(wrongSecret.err).to.contain('no token: 401 invalid_client');
            const noExport = await inProcess(['export', '--tenant', 'no-such-tenant'], env);
            expect(noExport.status).to.equal(1);
            expect(noExport.err).to.contain('export refused: 404');
        });

        it('stops a blocked plan with exit code 3 and imports nothing; a wrong secret fails with 1', SLOW, async () => {
            const bundle = JSON.parse(Fs.readFileSync(Path.join(dir, 'export.json'), 'utf8')) as JsonBundle;
            const hook = { $schema: schemaOf('WebhookEndpointConfigFile', 1), spec: { id: 'hook', name: 'Backend', url: 'https://hooks.example.com/in', auth: { type: 'apiKey', config: { headerName: 'X-Key', value: '${CLI_TEST_UNSET_HOOK_SECRET}' } } } };
            bundle.documents.push({ path: 'webhook-endpoints/hook.json', document: hook });
            bundle.manifest.resources.push({ kind: 'WebhookEndpoint', id: 'hook', $schema: hook.$schema, path: 'webhook-endpoints/hook.json', sha256: sha256Hex(jcs(hook)) });
            const blockedFile = Path.join(dir, 'blocked.json');
            Fs.writeFileSync(blockedFile, JSON.stringify(bundle));
            const imported = await cli(['import', blockedFile, '--tenant', tenantId, '--yes'], env);
            expect(imported.status).to.equal(3);
            expect(imported.stdout).to.contain('BLOCKED');
            expect(imported.stdout).to.match(/^blocked\s+WebhookEndpoint\s+hook\s+SECRET_REQUIRED/m);
            expect(imported.stdout).to.contain('${CLI_TEST_UNSET_HOOK_SECRET}');
            expect(imported.stderr).to.contain('nothing was imported');
            const resources = await t.server.inject({ method: 'GET', url: `/api/config-bundles/resources?tenantId=${tenantId}`, headers: { authorization: `Bearer ${await tokenOf(t)}` } });
            expect((resources.result as { items: Array<{ kind: string }> }).items.map((r) => r.kind).sort()).to.equal(['Tenant', 'TrustList']);

            const wrong = await cli(['plan', blockedFile, '--tenant', tenantId], { ...env, HALLMARK_CLIENT_SECRET: 'not-the-secret' });
            expect(wrong.status).to.equal(1);
            expect(wrong.stderr).to.contain('no token: 401');
        });
    });
}

const tokenOf = async (t: TestServer): Promise<string> => {
    const res = await t.server.inject({ method: 'POST', url: '/api/oauth2/token', payload: { grant_type: 'client_credentials', client_id: ROOT_CLIENT.id, client_secret: ROOT_CLIENT.secret } });
    return (res.result as { access_token: string }).access_token;
};
