import type { Database } from '../../lib/db/database';
import type { ErrorDetail } from '../../lib/errors';
import { ValidationError } from '../../lib/errors';
import { substitutePlaceholders, type Variables } from '../../lib/config-import/placeholders';
import type { FieldChange } from '../../lib/registry/diff';
import type { ResourceKind, TenantContext } from '../../lib/registry/kind';
import type { Registry } from '../../lib/registry/registry';
import { DEFAULT_SOURCE, jcs, sha256Hex, type Bundle } from './bundle';
import { bundleInvalid } from './errors';
import { BundleSourceModel } from './models';

export type ImportMode = 'create' | 'upsert' | 'replace';
export const IMPORT_MODES: ImportMode[] = ['create', 'upsert', 'replace'];

export type ActionName = 'create' | 'update' | 'unchanged' | 'skip' | 'delete' | 'blocked';

export interface PlanAction {
    kind: string;
    id: string;
    action: ActionName;
    changes?: FieldChange[];
    code?: string;
    message?: string;
}

export interface PlanRequirement {
    code: string;
    resource: string;
    path: string;
    message: string;
    placeholder?: string;
}

export interface PlanWarning {
    code: string;
    resource: string;
    message: string;
}

export interface Plan {
    planFingerprint: string;
    mode: ImportMode;
    tenant: string;
    blocked: boolean;
    actions: PlanAction[];
    requirements: PlanRequirement[];
    warnings: PlanWarning[];
}

/** What the apply step writes for an action; kept beside the plan, never answered (it holds resolved secrets). */
export interface Step {
    action: PlanAction;
    kind: ResourceKind;
    spec?: unknown;
    version?: number;
}

export interface PlannedImport {
    plan: Plan;
    steps: Step[];
    source: string;
}

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

/** The code a refusal detail carries (`MISSING_RESOURCE_REFERENCE: …`), or a generic one. */
const codeOf = (detail: ErrorDetail): string => /^([A-Z][A-Z0-9_]+):/.exec(detail.message)?.[1] ?? 'RESOURCE_INVALID';

export interface PlanInput {
    db: Database;
    registry: Registry;
    ctx: TenantContext & { tenantId: string };
    bundle: Bundle;
    mode: ImportMode;
    variables: Variables;
}

/**
 * Plans an import (spec 4.8): parses, upgrades and validates every document, resolves placeholders, and asks the
 * registry what each write would do. Reads only; the same code runs again inside the import's transaction, so the
 * fingerprint compares what was reviewed with what is about to be applied.
 */
export const planImport = async ({ db, registry, ctx, bundle, mode, variables }: PlanInput): Promise<PlannedImport> => {
    const source = bundle.manifest.source ?? DEFAULT_SOURCE;
    const tenantId = ctx.tenantId;
    const details: ErrorDetail[] = [];
    const warnings: PlanWarning[] = bundle.assets.length
        ? [{ code: 'ASSETS_NOT_STORED', resource: 'images', message: `${bundle.assets.length} asset(s) verified but not stored: this service keeps no image files; reference images by URL` }]
        : [];
    const usedVariables = new Set<string>();

    // Parse every document first, so a malformed bundle is refused whole before anything is compared.
    const order = new Map(registry.ordered().map((k, i) => [k.kind, i]));
    const parsed: Array<{ kind: ResourceKind; version: number; spec: unknown; generation?: number; path: string; entryKind: string }> = [];
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
            parsed.push({ kind: doc.kind, version: doc.version, spec: doc.spec, generation: doc.metadata?.generation, path: entry.path, entryKind: entry.kind });
        }
        catch (err) {
            const problems = err instanceof ValidationError ? err.details ?? [{ path: '', message: err.message }] : [{ path: '', message: (err as Error).message }];
            details.push(...problems.map((p) => ({ path: `${entry.path}${p.path ? `#${p.path}` : ''}`, message: `${entry.path}: ${p.message}` })));
        }
    }
    if (details.length) {
        throw bundleInvalid(`The bundle is invalid: ${details[0]!.message}`, details);
    }
    parsed.sort((a, b) => order.get(a.kind.kind)! - order.get(b.kind.kind)!);
    // The tenant first whatever the registration order: every other document belongs to it.
    parsed.sort((a, b) => Number(!!b.kind.isTenant) - Number(!!a.kind.isTenant));

    const tenantKind = registry.ordered().find((k) => k.isTenant);
    const tenantExists = !!tenantKind && !!(await registry.get(ctx, tenantKind, tenantId));
    if (!tenantExists && !parsed.some((p) => p.kind.isTenant)) {
        throw bundleInvalid(`Tenant ${tenantId} does not exist and the bundle has no tenant document to create it`, [{ path: 'documents', message: 'needs the tenant document' }]);
    }

    const steps: Step[] = [];
    const requirements: PlanRequirement[] = [];
    const willExist = new Set<string>();
    const inBundle = new Set<string>();
    const manifestRequirement = (resource: string, path: string) => bundle.manifest.requirements.find((r) => r.resource === resource && r.path === path);

    for (const doc of parsed) {
        const { kind } = doc;
        const substituted = substitutePlaceholders(doc.spec, variables);
        const unresolved = new Set(substituted.unresolved);
        for (const name of JSON.stringify(doc.spec).matchAll(PLACEHOLDER)) {
            if (!unresolved.has(name[1]!)) {
                usedVariables.add(name[1]!);
            }
        }
        let spec = kind.fromFolder?.(substituted.value, tenantId) ?? substituted.value;
        let id: string;
        try {
            id = kind.singleton ? kind.kind : kind.id(spec);
        }
        catch {
            id = '';
        }
        const resource = kind.singleton ? kind.kind : `${kind.kind}/${id}`;
        if (inBundle.has(resource)) {
            throw bundleInvalid(`${resource} appears twice in the bundle`, [{ path: doc.path, message: `${resource} is also defined by another document` }]);
        }
        inBundle.add(resource);
        const existing = id ? await registry.get(ctx, kind, id) : undefined;
        if (existing && mode === 'create') {
            // Kept as it is: nothing of the document is applied, so nothing it lacks can block.
            warnings.push({ code: 'RESOURCE_EXISTS', resource, message: `${resource} exists and is kept as it is (mode create)` });
            steps.push({ kind, action: { kind: kind.kind, id, action: 'skip', code: 'RESOURCE_EXISTS' } });
            continue;
        }
        const blocks: Array<{ code: string; message: string }> = [];

        for (const path of unresolvedPaths(spec, unresolved)) {
            const listed = manifestRequirement(resource, path);
            const secret = (kind.secrets ?? []).some((p) => matches(p, path));
            if (!listed && !secret) {
                warnings.push({ code: 'UNRESOLVED_PLACEHOLDER', resource, message: `${path} holds an unresolved placeholder, kept as literal text` });
                continue;
            }
            const code = listed?.code ?? (kind.generated && path in kind.generated ? 'CLIENT_SECRET_REQUIRED' : 'SECRET_REQUIRED');
            const placeholder = listed?.placeholder ?? String(valueAt(spec, path));
            requirements.push({ code, resource, path, message: listed?.message ?? `${resource}: ${path} needs a value`, placeholder });
            blocks.push({ code, message: `${path}: set ${placeholder} or replace it in the document` });
        }

        // Export-only fields ({type: required}): met when the target already holds the same value (the same key).
        const exportedTarget = existing && kind.exportFields ? (await registry.toDocument(ctx, kind, existing)).document.spec : undefined;
        for (const field of kind.writeOnly ?? []) {
            const value = (spec as Record<string, unknown>)[field];
            if (!value || typeof value !== 'object' || (value as { type?: unknown }).type !== 'required') {
                continue;
            }
            const copy = { ...(spec as Record<string, unknown>) };
            delete copy[field];
            spec = copy;
            if (exportedTarget && jcs((exportedTarget as Record<string, unknown>)[field]) === jcs(value)) {
                continue;
            }
            const listed = manifestRequirement(resource, field);
            const code = listed?.code ?? 'PRIVATE_KEY_REQUIRED';
            requirements.push({ code, resource, path: field, message: listed?.message ?? `${resource}: ${field} must be supplied` });
            blocks.push({ code, message: `${field}: supply the private key, or {type: regenerate} for new key material` });
        }

        let preview;
        try {
            preview = await registry.preview(ctx, kind, spec, { version: doc.version, ownership: 'file-managed', willExist: (k, i) => willExist.has(`${k}/${i}`) });
        }
        catch (err) {
            if (blocks.length && err instanceof ValidationError) {
                // Invalid only for want of the value the requirement asks for.
                willExist.add(`${kind.kind}/${id}`);
                steps.push({ kind, action: { kind: kind.kind, id, action: 'blocked', code: blocks[0]!.code, message: blocks.map((b) => b.message).join('; ') } });
                continue;
            }
            const problems = err instanceof ValidationError ? err.details ?? [{ path: '', message: err.message }] : [{ path: '', message: (err as Error).message }];
            details.push(...problems.map((p) => ({ path: `${doc.path}${p.path ? `#${p.path}` : ''}`, message: `${doc.path}: ${p.message}` })));
            continue;
        }
        id = preview.id;
        if (preview.existing && doc.generation !== undefined && doc.generation < preview.existing.generation) {
            blocks.unshift({ code: 'STALE_GENERATION', message: `the document has generation ${doc.generation}, the stored resource ${preview.existing.generation}` });
        }
        for (const problem of preview.problems) {
            blocks.push({ code: codeOf(problem), message: `${problem.path}: ${problem.message}` });
        }
        for (const w of preview.warnings) {
            warnings.push({ code: w.code, resource, message: w.message });
        }
        if (!preview.existing) {
            willExist.add(`${kind.kind}/${id}`);
        }
        if (blocks.length) {
            steps.push({ kind, action: { kind: kind.kind, id, action: 'blocked', code: blocks[0]!.code, message: blocks.map((b) => b.message).join('; ') } });
            continue;
        }
        const action: PlanAction = { kind: kind.kind, id, action: preview.action, ...(preview.action === 'update' ? { changes: preview.changes } : {}) };
        steps.push({ kind, action, spec, version: doc.version });
    }
    if (details.length) {
        throw bundleInvalid(`The bundle is invalid: ${details[0]!.message}`, details);
    }

    // The target state the plan read: every resource's generation, ownership and time, and the recorded sources.
    const state: unknown[] = [];
    const sources = await db.model(BundleSourceModel).query(db.current()).where({ tenantId });
    const sourceOf = new Map(sources.map((s) => [`${s.kind}/${s.resourceId}`, s.source]));
    const deletes: Step[] = [];
    for (const kind of registry.ordered()) {
        if (kind.isTenant) {
            const tenant = tenantExists ? await registry.get(ctx, kind, tenantId) : undefined;
            state.push(tenant ? [kind.kind, tenantId, tenant.generation, tenant.ownership, tenant.updatedAt] : [kind.kind, tenantId, null]);
            continue;
        }
        if (!tenantExists) {
            continue;
        }
        for (const stored of await registry.list(ctx, kind)) {
            const id = kind.singleton ? kind.kind : kind.id(stored.spec);
            state.push([kind.kind, id, stored.generation, stored.ownership, stored.updatedAt, sourceOf.get(`${kind.kind}/${id}`) ?? null]);
            const resource = kind.singleton ? kind.kind : `${kind.kind}/${id}`;
            if (mode === 'replace' && !inBundle.has(resource) && stored.ownership === 'file-managed' && sourceOf.get(`${kind.kind}/${id}`) === source) {
                deletes.push({ kind, action: { kind: kind.kind, id, action: 'delete' } });
            }
        }
    }
    // Dependents go before what they depend on.
    steps.push(...deletes.reverse());

    const actions = steps.map((s) => s.action);
    const blocked = actions.some((a) => a.action === 'blocked');
    const planFingerprint = sha256Hex(jcs({ bundle: bundle.digest, mode, tenant: tenantId, source, variables: [...usedVariables].sort(), state }));
    return {
        plan: { planFingerprint, mode, tenant: tenantId, blocked, actions, requirements, warnings },
        steps,
        source
    };
};
