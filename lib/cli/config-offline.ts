import Crypto from 'node:crypto';
import Fs from 'node:fs/promises';
import Os from 'node:os';
import Path from 'node:path';
import Pino from 'pino';
import { createServer, type Manifest } from '../compose';
import { loadConfig, type Config } from '../../manifests/environment';
import { ValidationError, type ErrorDetail } from '../errors';
import type { ResourceKind } from '../registry/kind';
import type { Registry } from '../registry/registry';
import { kindFiles, listTenantFolders, readJsonFile, type TenantFolder } from '../config-import/folder';
import { substitutePlaceholders, type Variables } from '../config-import/placeholders';
import { writeZip } from '../../plugins/bundles/archive';
import { BUNDLE_FORMAT_VERSION, MANIFEST_PATH, decodeJsonBundle, decodeZipBundle, jcs, jsonBundleSchema, sha256Hex, type Bundle, type JsonBundle } from '../../plugins/bundles/bundle';
import { BundleError } from '../../plugins/bundles/errors';
import { holdsPlaceholder, upgradeDocument } from '../../plugins/bundles/upgrade';

/**
 * The offline half of `hallmark config`: the registry of the manifest's plugins (built-in and third-party kinds),
 * composed on a throwaway SQLite file that is never opened, so upgrade and validate need no database, no secrets
 * and no running service.
 */
export const withOfflineRegistry = async <T>(fn: (registry: Registry) => Promise<T>): Promise<T> => {
    const folder = await Fs.mkdtemp(Path.join(Os.tmpdir(), 'hallmark-config-'));
    // Only what composing needs: the database and secrets are never used, so the operator's own are left out.
    const env: Record<string, string | undefined> = {
        NODE_ENV: 'production',
        PUBLIC_URL: 'http://offline.invalid',
        MASTER_SECRET: Crypto.randomBytes(32).toString('hex'),
        AUTH_CLIENT_ID: 'offline',
        AUTH_CLIENT_SECRET: Crypto.randomBytes(24).toString('hex'),
        DB_TYPE: 'sqlite',
        FOLDER: folder,
        WORKER: 'off',
        LOG_LEVEL: 'error',
        HALLMARK_MANIFEST: process.env.HALLMARK_MANIFEST
    };
    const config = loadConfig(env);
    const server = await createServer(loadManifest(config), { logger: Pino({ level: 'silent' }) });
    try {
        server.registry.seal();
        return await fn(server.registry);
    }
    finally {
        await server.stop();
        await Fs.rm(folder, { recursive: true, force: true });
    }
};

const loadManifest = (config: Config): Manifest => {
    const mod = config.manifest ? require(require.resolve(config.manifest, { paths: [process.cwd()] })) : require('../../manifests/default');
    const exported: Manifest | ((c: Config) => Manifest) = mod.manifest ?? mod.default ?? mod;
    return typeof exported === 'function' ? exported(config) : exported;
};

/** What a path holds: one document, a tenant folder (or a folder of them), or a bundle. */
export type ConfigInput =
    | { type: 'document'; path: string; value: unknown }
    | { type: 'folder'; path: string; tenants: TenantFolder[] }
    | { type: 'json-bundle'; path: string; value: JsonBundle }
    | { type: 'zip-bundle'; path: string; bytes: Buffer };

export class InputError extends Error {}

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);

export const readInput = async (path: string): Promise<ConfigInput> => {
    const stat = await Fs.stat(path).catch(() => undefined);
    if (!stat) {
        throw new InputError(`${path}: no such file or directory`);
    }
    if (stat.isDirectory()) {
        // A CONFIG_FOLDER root holds tenant folders (with info.json); anything else is read as one tenant folder.
        const own: TenantFolder = { name: Path.basename(Path.resolve(path)), path };
        const hasInfo = async (folder: string) => !!(await Fs.stat(Path.join(folder, 'info.json')).catch(() => undefined))?.isFile();
        const listed = (await listTenantFolders(path))?.tenants ?? [];
        const tenants = await hasInfo(path) ? [] : (await Promise.all(listed.map(async (t) => (await hasInfo(t.path) ? t : undefined)))).filter((t): t is TenantFolder => !!t);
        return { type: 'folder', path, tenants: tenants.length ? tenants : [own] };
    }
    const bytes = await Fs.readFile(path);
    if (bytes.subarray(0, 4).equals(Buffer.from('PK\u0003\u0004', 'latin1'))) {
        return { type: 'zip-bundle', path, bytes };
    }
    const value = await readJsonFile({ relative: path, path }).catch((err: Error) => { throw new InputError(`${path}: ${err.message}`); });
    if (isObject(value) && 'manifest' in value && 'documents' in value) {
        const { value: bundle, error } = jsonBundleSchema.validate(value, { abortEarly: false });
        if (error) {
            throw new InputError(`${path}: not a valid JSON bundle: ${error.message}`);
        }
        return { type: 'json-bundle', path, value: bundle };
    }
    return { type: 'document', path, value };
};

export interface FileReport {
    file: string;
    problems: string[];
    warnings: string[];
    /** upgrade: the version it had, when older than the current one. */
    upgradedFrom?: number;
}

const problemsOf = (err: unknown): string[] => {
    if (err instanceof ValidationError || err instanceof BundleError) {
        const details = err.details as ErrorDetail[] | undefined;
        return details?.length ? details.map((d) => (d.path ? `${d.path}: ${d.message}` : d.message)) : [err.message];
    }
    throw err;
};

/**
 * Parses, upgrades and validates one document as an import would: placeholders resolved from `variables` (an
 * unresolved one is a warning: the target may set it), a bare file (no `$schema`) read as the current version of
 * the kind its folder location names.
 */
const checkDocument = (registry: Registry, raw: unknown, options: { file: string; tenantId: string; kind?: ResourceKind; variables: Variables }): FileReport => {
    const report: FileReport = { file: options.file, problems: [], warnings: [] };
    const { value, unresolved } = substitutePlaceholders(raw, options.variables);
    report.warnings.push(...unresolved.map((name) => `unresolved placeholder \${${name}}: the import needs it set`));
    try {
        let kind = options.kind;
        let spec: unknown = value;
        let version: number | undefined;
        if (isObject(value) && '$schema' in value) {
            const doc = registry.parseDocument(value);
            if (kind && doc.kind.kind !== kind.kind) {
                throw new ValidationError(`$schema names ${doc.kind.kind}, but this path holds ${kind.kind}`);
            }
            ({ kind, spec, version } = doc);
        }
        if (!kind) {
            throw new ValidationError('not a configuration document: it has no $schema');
        }
        spec = kind.fromFolder?.(spec, options.tenantId) ?? spec;
        try {
            const { warnings } = registry.validate(kind, spec, version ?? kind.version);
            report.warnings.push(...warnings.map((w) => `${w.code}: ${w.message}`));
        }
        catch (err) {
            // An unresolved placeholder is already a warning; what its literal text breaks is not a second problem.
            if (!(err instanceof ValidationError) || !err.details?.length) {
                throw err;
            }
            const upgraded = registry.upgrade(kind, spec, version ?? kind.version).spec;
            const problems = err.details.filter((d) => !holdsPlaceholder(upgraded, d.path));
            if (problems.length) {
                throw new ValidationError(err.message, problems);
            }
        }
        if (version !== undefined && version < kind.version) {
            report.upgradedFrom = version;
        }
    }
    catch (err) {
        report.problems.push(...problemsOf(err));
    }
    return report;
};

const decodeBundle = async (input: ConfigInput & { type: 'json-bundle' | 'zip-bundle' }): Promise<Bundle> =>
    // Offline bundles are rewritten with their assets (upgrade), so their bytes are kept.
    input.type === 'zip-bundle' ? decodeZipBundle(input.bytes, undefined, { keepAssets: true }) : decodeJsonBundle(input.value);

/** Every configuration file of the tenant folders, parsed; a file that does not parse is reported and skipped. */
async function* folderDocuments(registry: Registry, tenants: TenantFolder[], reports: FileReport[]) {
    for (const tenant of tenants) {
        for (const kind of registry.ordered()) {
            for (const file of await kindFiles(tenant, kind)) {
                let raw: unknown;
                try {
                    raw = await readJsonFile(file);
                }
                catch (err) {
                    reports.push({ file: file.relative, problems: [(err as Error).message], warnings: [] });
                    continue;
                }
                yield { tenant, kind, file, raw };
            }
        }
    }
}

/** Every problem and warning of a document, a folder or a bundle; nothing is written. */
export const validateInput = async (registry: Registry, input: ConfigInput, variables: Variables): Promise<FileReport[]> => {
    if (input.type === 'document') {
        return [checkDocument(registry, input.value, { file: input.path, tenantId: 'offline', variables })];
    }
    if (input.type === 'folder') {
        const reports: FileReport[] = [];
        for await (const { tenant, kind, file, raw } of folderDocuments(registry, input.tenants, reports)) {
            reports.push(checkDocument(registry, raw, { file: file.relative, tenantId: tenant.name, kind, variables }));
        }
        if (!reports.length) {
            throw new InputError(`${input.path}: no configuration files found (expected a tenant folder such as info.json, clients/*.json, presentation/*.json)`);
        }
        return reports;
    }
    let bundle: Bundle;
    try {
        bundle = await decodeBundle(input);
    }
    catch (err) {
        return [{ file: input.path, problems: problemsOf(err), warnings: [] }];
    }
    return bundle.documents.map(({ entry, document }) =>
        checkDocument(registry, document, { file: entry.path, tenantId: bundle.manifest.tenant ?? 'bundle', kind: registry.has({ kind: entry.kind }) ? registry.kind({ kind: entry.kind }) : undefined, variables }));
};

const jsonText = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

export interface UpgradeOutcome {
    reports: FileReport[];
    /** A single document or a JSON bundle without --write/--out: what goes to stdout. */
    output?: string;
    written: string[];
}

/**
 * Upgrades every document to the current version of its kind. A document or JSON bundle is printed unless `out`
 * names a file (or `write` rewrites it in place); a folder is rewritten in place with `write`, else only reported;
 * a ZIP bundle is written to `out`. A bundle's manifest gets the new `$schema`s and checksums, formatVersion 2.
 */
export const upgradeInput = async (registry: Registry, input: ConfigInput, options: { write: boolean; out?: string }): Promise<UpgradeOutcome> => {
    const reports: FileReport[] = [];
    const written: string[] = [];
    const upgradeOne = (file: string, raw: unknown, folder?: { tenantId: string }) => {
        const report: FileReport = { file, problems: [], warnings: [] };
        reports.push(report);
        try {
            const from = registry.parseDocument(raw).version;
            const upgraded = upgradeDocument(registry, raw, folder);
            report.warnings.push(...upgraded.warnings.map((w) => `${w.code}: ${w.message}`));
            if (from < registry.kindForSchema(upgraded.document.$schema).version) {
                report.upgradedFrom = from;
            }
            return upgraded.document;
        }
        catch (err) {
            report.problems.push(...problemsOf(err));
            return undefined;
        }
    };
    const failed = () => reports.some((r) => r.problems.length);

    if (input.type === 'document') {
        const document = upgradeOne(input.path, input.value);
        if (!document) {
            return { reports, written };
        }
        const target = options.out ?? (options.write ? input.path : undefined);
        if (target) {
            await Fs.writeFile(target, jsonText(document));
            written.push(target);
            return { reports, written };
        }
        return { reports, output: jsonText(document), written };
    }

    if (input.type === 'folder') {
        const changes: Array<{ path: string; text: string }> = [];
        for await (const { tenant, file, raw } of folderDocuments(registry, input.tenants, reports)) {
            // Bare files carry no version: they are read as the current one.
            if (!isObject(raw) || !('$schema' in raw)) {
                continue;
            }
            const document = upgradeOne(file.relative, raw, { tenantId: tenant.name });
            if (document && reports.at(-1)!.upgradedFrom !== undefined) {
                changes.push({ path: file.path, text: jsonText(document) });
            }
        }
        // All or nothing: a folder with one broken file is left as it was.
        if (options.write && !failed()) {
            for (const change of changes) {
                await Fs.writeFile(change.path, change.text);
                written.push(change.path);
            }
        }
        return { reports, written };
    }

    let bundle: Bundle;
    try {
        bundle = await decodeBundle(input);
    }
    catch (err) {
        return { reports: [{ file: input.path, problems: problemsOf(err), warnings: [] }], written };
    }
    const documents = bundle.documents.map(({ entry, document }) => ({ entry, document: upgradeOne(entry.path, document) }));
    if (failed()) {
        return { reports, written };
    }
    const files = documents.map(({ entry, document }) => ({ entry, document: document!, bytes: Buffer.from(jsonText(document)) }));
    const manifest = (digest: (f: (typeof files)[number]) => string) => ({
        ...bundle.manifest,
        formatVersion: BUNDLE_FORMAT_VERSION,
        resources: files.map((f) => ({ ...f.entry, $schema: f.document.$schema, sha256: digest(f) }))
    });
    if (input.type === 'json-bundle') {
        const upgraded: JsonBundle = { manifest: manifest((f) => sha256Hex(jcs(f.document))), documents: files.map((f) => ({ path: f.entry.path, document: f.document })), assets: input.value.assets };
        const target = options.out ?? (options.write ? input.path : undefined);
        if (target) {
            await Fs.writeFile(target, jsonText(upgraded));
            written.push(target);
            return { reports, written };
        }
        return { reports, output: jsonText(upgraded), written };
    }
    const target = options.out ?? (options.write ? input.path : undefined);
    if (!target) {
        throw new InputError('A ZIP bundle is upgraded into a file: give --out <file.zip> (or --write to replace it)');
    }
    const zip = await writeZip([
        { path: MANIFEST_PATH, data: Buffer.from(jsonText(manifest((f) => sha256Hex(f.bytes)))) },
        ...files.map((f) => ({ path: f.entry.path, data: f.bytes })),
        ...bundle.assets.map((a) => ({ path: a.entry.path, data: a.data! }))
    ], new Date());
    await Fs.writeFile(target, zip);
    written.push(target);
    return { reports, written };
};
