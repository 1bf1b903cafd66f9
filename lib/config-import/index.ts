import { ValidationError } from '../errors';
import type { Logger } from '../logging';
import type { ResourceKind, TenantContext } from '../registry/kind';
import type { Registry } from '../registry/registry';
import { TENANT_ID_PATTERN } from '../../resources/tenant';
import { kindFiles, listTenantFolders, readJsonFile, type FolderFile, type TenantFolder } from './folder';
import { applyPlan, DocumentProblems, planDocuments, type AppliedImport, type PlanDocument } from './plan';
import { substitutePlaceholders, type Variables } from './placeholders';

/**
 * The startup import: every tenant folder under CONFIG_FOLDER is applied through the registry, one transaction per
 * tenant, so a tenant is imported whole or not at all while the other tenants go on.
 */

export const CONFIG_IMPORT_ACTOR = 'system:config-import';

/** The source a folder import records: replace imports of bundles never delete what the folder wrote. */
export const FOLDER_SOURCE = 'config-folder';

/** The contexts of folder imports: client ids are chosen by API clients, so `CONFIG_IMPORT_ACTOR` proves nothing. */
const folderImports = new WeakSet<TenantContext>();

/** Whether a write comes from the operator's folder import (its files are trusted), not from an API client. */
export const isFolderImport = (ctx: TenantContext | undefined): boolean => !!ctx && folderImports.has(ctx);


export interface TenantImportResult {
    tenantId: string;
    status: 'imported' | 'skipped' | 'failed';
    created: number;
    updated: number;
    unchanged: number;
    warnings: string[];
    /** Values made for `!generate` fields (client secrets) of resources this import created: their only copy. */
    generatedSecrets?: GeneratedSecret[];
    error?: string;
}

export interface GeneratedSecret {
    kind: string;
    id: string;
    secret: string;
}

export interface ImportReport {
    tenants: TenantImportResult[];
}

export interface ImportOptions {
    folder: string;
    registry: Registry;
    log: Logger;
    variables: Variables;
    unresolvedPlaceholders: 'fail-tenant' | 'warn';
}

interface Prepared {
    file: FolderFile;
    kind: ResourceKind;
    version: number;
    spec: unknown;
    /** The stored id: the kind name for singletons. */
    id: string;
}

/** A problem with one file; its message starts with the file's relative path. */
class FileProblem extends Error {
    constructor(readonly file: string, message: string) {
        super(`${file}: ${message}`);
    }
}

/** A plan with blocked documents: each is a problem of its file. */
class PlanBlocked extends Error {
    constructor(readonly problems: FileProblem[]) {
        super(problems[0]?.message);
    }
}

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);

const valueAt = (spec: unknown, path: string): unknown =>
    path.split('.').reduce<unknown>((v, key) => (v && typeof v === 'object' ? (v as Record<string, unknown>)[key] : undefined), spec);

/** Joi quotes offending values in some messages (e.g. pattern mismatches); those values may be secrets. */
const describe = (err: unknown, spec?: unknown): string => {
    let message = err instanceof Error ? err.message : String(err);
    if (err instanceof ValidationError) {
        for (const detail of err.details ?? []) {
            const value = valueAt(spec, detail.path);
            if (typeof value === 'string' && value) {
                message = message.split(`"${value}"`).join('"[redacted]"');
            }
        }
    }
    return message;
};

const tenantKindOf = (registry: Registry): ResourceKind => {
    const kind = registry.ordered().find((k) => k.isTenant);
    if (!kind) {
        throw new Error('The configuration import needs a registered tenant kind');
    }
    return kind;
};

/** Reads, substitutes, parses and validates one file: everything that needs no database. */
const prepareFile = async (file: FolderFile, kind: ResourceKind, tenantId: string, options: ImportOptions, warnings: string[]): Promise<Prepared> => {
    const { registry, variables, log } = options;
    const raw = await readJsonFile(file).catch((err: Error) => { throw new FileProblem(file.relative, err.message); });
    const { value, unresolved } = substitutePlaceholders(raw, variables);
    if (unresolved.length) {
        const names = unresolved.map((n) => `\${${n}}`).join(', ');
        if (options.unresolvedPlaceholders === 'fail-tenant') {
            throw new FileProblem(file.relative, `unresolved placeholder ${names}: set the environment variable or give a default (\${VAR:default})`);
        }
        const warning = `${file.relative}: unresolved placeholder ${names} kept as literal text`;
        warnings.push(warning);
        log.warn({ tenant: tenantId, file: file.relative, variables: unresolved }, 'Unresolved placeholder kept as literal text');
    }
    let spec: unknown = value;
    let version = kind.version;
    let id: string;
    try {
        // A document names its kind in $schema; a bare file is the spec alone, in the current version.
        if (isObject(value) && '$schema' in value) {
            const doc = registry.parseDocument(value);
            if (doc.kind.kind !== kind.kind) {
                throw new ValidationError(`$schema names ${doc.kind.kind}, but this path holds ${kind.kind}`);
            }
            ({ spec, version } = doc);
        }
        spec = kind.fromFolder?.(spec, tenantId) ?? spec;
        // Validated here as well as in write, so every broken file is reported before a transaction is opened.
        const valid = registry.validate(kind, spec, version).spec;
        id = kind.singleton ? kind.kind : kind.id(valid);
    }
    catch (err) {
        throw new FileProblem(file.relative, describe(err, spec));
    }
    return { file, kind, version, spec, id };
};

/** Every document of a tenant folder in dependency order, or every problem found in it. */
const prepareTenant = async (tenant: TenantFolder, kinds: ResourceKind[], options: ImportOptions, warnings: string[]) => {
    const documents: Prepared[] = [];
    const problems: FileProblem[] = [];
    const seen = new Map<string, string>();
    for (const kind of kinds) {
        for (const file of await kindFiles(tenant, kind)) {
            try {
                const doc = await prepareFile(file, kind, tenant.name, options, warnings);
                const key = `${kind.kind}/${doc.id}`;
                if (seen.has(key)) {
                    throw new FileProblem(file.relative, `${kind.kind} ${doc.id} is also defined in ${seen.get(key)}`);
                }
                seen.set(key, file.relative);
                documents.push(doc);
            }
            catch (err) {
                problems.push(err instanceof FileProblem ? err : new FileProblem(file.relative, describe(err)));
            }
        }
    }
    return { documents, problems };
};

const importTenant = async (tenant: TenantFolder, options: ImportOptions): Promise<TenantImportResult> => {
    const { registry, log } = options;
    const result: TenantImportResult = { tenantId: tenant.name, status: 'failed', created: 0, updated: 0, unchanged: 0, warnings: [] };
    const fail = (problems: FileProblem[]) => {
        for (const p of problems) {
            log.error({ tenant: tenant.name, file: p.file }, p.message);
        }
        log.error({ tenant: tenant.name, problems: problems.length }, `Tenant ${tenant.name} not imported: nothing was written`);
        return { ...result, status: 'failed' as const, error: problems.map((p) => p.message).join('; ') };
    };

    if (!TENANT_ID_PATTERN.test(tenant.name)) {
        return fail([new FileProblem(tenant.name, `folder name is not a valid tenant id (${TENANT_ID_PATTERN.source})`)]);
    }
    const tenantKind = tenantKindOf(registry);
    const ctx: TenantContext & { tenantId: string } = { tenantId: tenant.name, clientId: CONFIG_IMPORT_ACTOR, roles: [] };
    folderImports.add(ctx);
    if (!(await kindFiles(tenant, tenantKind)).length && !(await registry.get(ctx, tenantKind, tenant.name))) {
        const location = 'file' in tenantKind.location ? tenantKind.location.file : tenantKind.location.dir;
        const warning = `${tenant.name}: the tenant does not exist and the folder has no ${location} to create it`;
        log.warn({ tenant: tenant.name }, warning);
        return { ...result, status: 'skipped', warnings: [warning] };
    }

    // The tenant kind goes first whatever the registration order: every other document belongs to the tenant.
    const kinds = [tenantKind, ...registry.ordered().filter((k) => k !== tenantKind)];
    const { documents: prepared, problems } = await prepareTenant(tenant, kinds, options, result.warnings);
    if (problems.length) {
        return fail(problems);
    }

    // The same plan and apply as a bundle import in mode upsert (lib/config-import/plan.ts), so both paths decide alike.
    const documents: PlanDocument[] = prepared.map((doc) => ({ kind: doc.kind, version: doc.version, spec: doc.spec, path: doc.file.relative }));
    const specAt = new Map(prepared.map((doc) => [doc.file.relative, doc.spec]));
    let applied: AppliedImport;
    let warnings: string[];
    try {
        ({ applied, warnings } = await registry.transaction(async () => {
            const planned = await planDocuments({ registry, ctx, documents, mode: 'upsert', source: FOLDER_SOURCE, fingerprintInput: null });
            const blocked = planned.steps.filter((step) => step.action.action === 'blocked');
            if (blocked.length) {
                throw new PlanBlocked(blocked.map((step) => new FileProblem(step.path!, `${step.action.code}: ${step.action.message}`)));
            }
            const done = await applyPlan({ registry, ctx, planned, failed: (step, err) => new FileProblem(step.path!, describe(err, step.spec)) });
            const pathOf = new Map(planned.steps.map((step) => [`${step.action.kind}/${step.action.id}`, step.path]));
            return {
                applied: done,
                warnings: planned.plan.warnings.map((w) => `${pathOf.get(w.resource) ?? pathOf.get(`${w.resource}/${w.resource}`) ?? w.resource}: ${w.code}: ${w.message}`)
            };
        }));
    }
    catch (err) {
        if (err instanceof PlanBlocked) {
            return fail(err.problems);
        }
        if (err instanceof DocumentProblems) {
            return fail(err.details.map((d) => {
                const file = d.path.split('#')[0]!;
                return new FileProblem(file, describe(new ValidationError(d.message.slice(file.length + 2)), specAt.get(file)));
            }));
        }
        return fail([err instanceof FileProblem ? err : new FileProblem(tenant.name, describe(err))]);
    }
    const counts = { create: applied.counts.create ?? 0, update: applied.counts.update ?? 0, unchanged: applied.counts.unchanged ?? 0 };
    const { generatedSecrets } = applied;
    for (const w of warnings) {
        log.warn({ tenant: tenant.name }, w);
    }
    for (const { kind, id } of generatedSecrets) {
        // Secrets never reach a log line; the report holds the value for a caller that can show it once.
        log.warn({ tenant: tenant.name, kind, id },
            `${kind} ${id} was created with a generated secret, which is not logged: replace it through the API (a client: POST /api/clients/${id}/rotate-secret)`);
    }
    log.info({ tenant: tenant.name, created: counts.create, updated: counts.update, unchanged: counts.unchanged },
        `Tenant ${tenant.name} imported from the configuration folder`);
    return {
        ...result,
        status: 'imported',
        created: counts.create,
        updated: counts.update,
        unchanged: counts.unchanged,
        warnings: [...result.warnings, ...warnings],
        ...(generatedSecrets.length ? { generatedSecrets } : {})
    };
};

export const importConfigFolder = async (options: ImportOptions): Promise<ImportReport> => {
    const { folder, log } = options;
    tenantKindOf(options.registry);
    const listing = await listTenantFolders(folder);
    if (!listing) {
        log.warn({ folder }, 'The configuration folder does not exist or is not a directory; nothing imported');
        return { tenants: [] };
    }
    for (const name of listing.ignored) {
        log.warn({ folder, entry: name }, 'Ignoring an entry of the configuration folder that cannot be read (broken link?)');
    }
    const tenants: TenantImportResult[] = [];
    for (const tenant of listing.tenants) {
        try {
            tenants.push(await importTenant(tenant, options));
        }
        catch (err) {
            // e.g. the database is unreachable: still report this tenant and try the next one.
            log.error({ tenant: tenant.name }, describe(err));
            tenants.push({ tenantId: tenant.name, status: 'failed', created: 0, updated: 0, unchanged: 0, warnings: [], error: describe(err) });
        }
    }
    const count = (status: TenantImportResult['status']) => tenants.filter((t) => t.status === status).length;
    log.info({ folder, imported: count('imported'), skipped: count('skipped'), failed: count('failed') }, 'Configuration folder import finished');
    return { tenants };
};
