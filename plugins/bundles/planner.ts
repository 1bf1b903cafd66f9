import type { Database } from '../../lib/db/database';
import { ValidationError, type ErrorDetail } from '../../lib/errors';
import { DocumentProblems, planDocuments, type ImportMode, type PlanDocument, type PlannedImport, type PlanWarning, type SourceRecords } from '../../lib/config-import/plan';
import { substitutePlaceholders, type Variables } from '../../lib/config-import/placeholders';
import type { ResourceKind, TenantContext } from '../../lib/registry/kind';
import type { Registry } from '../../lib/registry/registry';
import { DEFAULT_SOURCE, type Bundle } from './bundle';
import { bundleInvalid } from './errors';
import { BundleSourceModel } from './models';

const PLACEHOLDER = /\$\{([A-Z0-9_]+)(?::[^}]*)?\}/g;

/** Dot paths of string values that still hold one of the unresolved placeholders. */
const unresolvedPaths = (value: unknown, names: Set<string>, path: string[] = []): string[] => {
    if (typeof value === 'string') {
        return [...value.matchAll(PLACEHOLDER)].some((m) => names.has(m[1]!)) ? [path.join('.')] : [];
    }
    if (value && typeof value === 'object') {
        return Object.entries(value).flatMap(([k, v]) => unresolvedPaths(v, names, [...path, k]));
    }
    return [];
};

const matches = (pattern: string, path: string) => {
    const a = pattern.split('.');
    const b = path.split('.');
    return a.length === b.length && a.every((s, i) => s === '*' || s === b[i]);
};

const valueAt = (spec: unknown, path: string): unknown =>
    path.split('.').reduce<unknown>((v, key) => (v && typeof v === 'object' ? (v as Record<string, unknown>)[key] : undefined), spec);

/** The id a spec names, if it names one (a tenant-folder info.json has none: the folder names the tenant). */
const specId = (kind: ResourceKind, spec: unknown): string | undefined => {
    try {
        const id: unknown = kind.id(spec);
        return typeof id === 'string' ? id : undefined;
    }
    catch {
        return undefined;
    }
};

/** The bundles plugin's record of which source imported what (config_bundle_sources), in the current transaction. */
export const sourceRecords = (db: Database): SourceRecords => ({
    async read(tenantId) {
        const rows = await db.model(BundleSourceModel).query(db.current()).where({ tenantId });
        return new Map(rows.map((s) => [`${s.kind}/${s.resourceId}`, s.source]));
    },
    async record(tenantId, kind, resourceId, source) {
        await db.model(BundleSourceModel).query(db.current()).delete().where({ tenantId, kind, resourceId });
        await db.model(BundleSourceModel).query(db.current()).insert({ tenantId, kind, resourceId, source });
    },
    async forget(tenantId, kind, resourceId) {
        await db.model(BundleSourceModel).query(db.current()).delete().where({ tenantId, kind, resourceId });
    }
});

export interface PlanInput {
    db: Database;
    registry: Registry;
    ctx: TenantContext & { tenantId: string };
    bundle: Bundle;
    mode: ImportMode;
    variables: Variables;
}

/**
 * Plans the import of a bundle (spec 4.8): checks each document against the manifest, resolves placeholders (an
 * unresolved secret is a requirement that blocks), and hands the documents to the shared planner.
 */
export const planImport = async ({ db, registry, ctx, bundle, mode, variables }: PlanInput): Promise<PlannedImport> => {
    const tenantId = ctx.tenantId;
    const details: ErrorDetail[] = [];
    const warnings: PlanWarning[] = bundle.assets.length
        ? [{ code: 'ASSETS_NOT_STORED', resource: 'images', message: `${bundle.assets.length} asset(s) verified but not stored: this service keeps no image files; reference images by URL` }]
        : [];
    const usedVariables = new Set<string>();
    const requirementFor = (resource: string, path: string) => bundle.manifest.requirements.find((r) => r.resource === resource && r.path === path);

    // Parse every document first, so a malformed bundle is refused whole before anything is compared.
    const order = new Map(registry.ordered().map((k, i) => [k.kind, i]));
    const documents: PlanDocument[] = [];
    for (const { entry, document } of bundle.documents) {
        try {
            const doc = registry.parseDocument(document);
            if (doc.kind.kind !== entry.kind) {
                throw new ValidationError(`$schema names ${doc.kind.kind}, the manifest ${entry.kind}`, [{ path: '$schema', message: 'does not match the manifest kind' }]);
            }
            if ((document as { $schema: string }).$schema !== entry.$schema) {
                throw new ValidationError('$schema differs from the manifest', [{ path: '$schema', message: 'does not match the manifest' }]);
            }
            const documentId = doc.kind.singleton ? doc.kind.kind : specId(doc.kind, doc.spec);
            if (documentId !== undefined && documentId !== entry.id) {
                throw new ValidationError('the manifest names another id', [{ path: '', message: `the manifest names ${entry.kind} ${entry.id}, the document ${String(documentId)}` }]);
            }
            documents.push(resolve(doc.kind, doc.spec, { version: doc.version, generation: doc.metadata?.generation, path: entry.path }));
        }
        catch (err) {
            const problems = err instanceof ValidationError ? err.details ?? [{ path: '', message: err.message }] : [{ path: '', message: (err as Error).message }];
            details.push(...problems.map((p) => ({ path: `${entry.path}${p.path ? `#${p.path}` : ''}`, message: `${entry.path}: ${p.message}` })));
        }
    }
    if (details.length) {
        throw bundleInvalid(`The bundle is invalid: ${details[0]!.message}`, details);
    }
    // Dependency order, the tenant first whatever the registration order: every other document belongs to it.
    documents.sort((a, b) => order.get(a.kind.kind)! - order.get(b.kind.kind)!);
    documents.sort((a, b) => Number(!!b.kind.isTenant) - Number(!!a.kind.isTenant));

    const tenantKind = registry.ordered().find((k) => k.isTenant);
    const tenantExists = !!tenantKind && !!(await registry.get(ctx, tenantKind, tenantId));
    if (!tenantExists && !documents.some((d) => d.kind.isTenant)) {
        throw bundleInvalid(`Tenant ${tenantId} does not exist and the bundle has no tenant document to create it`, [{ path: 'documents', message: 'needs the tenant document' }]);
    }
    try {
        return await planDocuments({
            registry, ctx, documents, mode, warnings,
            source: bundle.manifest.source ?? DEFAULT_SOURCE,
            sources: sourceRecords(db),
            // Variable names only: the plan never carries (or hashes) a secret value.
            fingerprintInput: { bundle: bundle.digest, variables: [...usedVariables].sort() }
        });
    }
    catch (err) {
        if (err instanceof DocumentProblems) {
            throw bundleInvalid(`The bundle is invalid: ${err.details[0]!.message}`, err.details);
        }
        throw err;
    }

    /** Substitutes placeholders; an unresolved one in a secret (or a listed requirement) blocks the document. */
    function resolve(kind: ResourceKind, raw: unknown, meta: { version: number; generation?: number; path: string }): PlanDocument {
        const { value, unresolved } = substitutePlaceholders(raw, variables);
        const names = new Set(unresolved);
        for (const match of JSON.stringify(raw).matchAll(PLACEHOLDER)) {
            if (!names.has(match[1]!)) {
                usedVariables.add(match[1]!);
            }
        }
        const spec = kind.fromFolder?.(value, tenantId) ?? value;
        const id = kind.singleton ? kind.kind : specId(kind, spec);
        const resource = kind.singleton ? kind.kind : `${kind.kind}/${id}`;
        const doc: PlanDocument = { kind, spec, ...meta, blocks: [], requirements: [], requirementFor };
        for (const path of unresolvedPaths(spec, names)) {
            const listed = requirementFor(resource, path);
            const secret = (kind.secrets ?? []).some((p) => matches(p, path));
            if (!listed && !secret) {
                warnings.push({ code: 'UNRESOLVED_PLACEHOLDER', resource, message: `${path} holds an unresolved placeholder, kept as literal text` });
                continue;
            }
            const code = listed?.code ?? (kind.generated && path in kind.generated ? 'CLIENT_SECRET_REQUIRED' : 'SECRET_REQUIRED');
            const placeholder = listed?.placeholder ?? String(valueAt(spec, path));
            doc.requirements!.push({ code, resource, path, message: listed?.message ?? `${resource}: ${path} needs a value`, placeholder });
            doc.blocks!.push({ code, message: `${path}: set ${placeholder} or replace it in the document` });
        }
        return doc;
    }
};
