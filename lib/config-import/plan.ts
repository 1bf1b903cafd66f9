import { createHash } from 'node:crypto';
import { ValidationError, type ErrorDetail } from '../errors';
import type { FieldChange } from '../registry/diff';
import type { ResourceKind, TenantContext } from '../registry/kind';
import type { Registry } from '../registry/registry';

/**
 * Plan and apply of a configuration import (spec 4.8), shared by the startup folder import and the bundles plugin:
 * what each document's write would do (through Registry.preview), what blocks it, and then the writes in dependency
 * order through the registry's single write path. Callers read their documents (folder files, bundle entries) and
 * run `applyPlan` inside one registry transaction.
 */

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
    /** Where the document came from (a folder file, a bundle path), for messages. */
    path?: string;
    spec?: unknown;
    version?: number;
}

export interface PlannedImport {
    plan: Plan;
    steps: Step[];
    source: string;
}

/** A document to import, parsed; what the caller already found missing comes with it. */
export interface PlanDocument {
    kind: ResourceKind;
    version: number;
    spec: unknown;
    /** metadata.generation of the document, when it has one. */
    generation?: number;
    path: string;
    /** e.g. secrets left as placeholders: they block the document. */
    blocks?: Array<{ code: string; message: string }>;
    /** Requirements behind those blocks, as the plan lists them. */
    requirements?: PlanRequirement[];
    /** From export-only fields, when the document was written by an export: the manifest's requirement, if any. */
    requirementFor?(resource: string, path: string): PlanRequirement | undefined;
}

/** Which source imported each resource (replace deletes only what the same source imported). */
export interface SourceRecords {
    /** `Kind/id` → source, for the tenant. */
    read(tenantId: string): Promise<Map<string, string>>;
    record(tenantId: string, kind: string, id: string, source: string): Promise<void>;
    forget(tenantId: string, kind: string, id: string): Promise<void>;
}

/** Documents that cannot be planned at all (invalid after upgrade, duplicates); details name each document's path. */
export class DocumentProblems extends Error {
    constructor(readonly details: ErrorDetail[]) {
        super(details[0]?.message ?? 'invalid documents');
    }
}

/** RFC 8785 (JCS) canonical JSON: keys sorted by UTF-16 code units, ECMAScript number and string forms. */
export const jcs = (value: unknown): string => {
    if (Array.isArray(value)) {
        return `[${value.map((v) => jcs(v === undefined ? null : v)).join(',')}]`;
    }
    if (value && typeof value === 'object') {
        const entries = Object.entries(value).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
        return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${jcs(v)}`).join(',')}}`;
    }
    return JSON.stringify(value);
};

export const sha256Hex = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex');

/** The code a refusal detail carries (`MISSING_RESOURCE_REFERENCE: …`), or a generic one. */
const codeOf = (detail: ErrorDetail): string => /^([A-Z][A-Z0-9_]+):/.exec(detail.message)?.[1] ?? 'RESOURCE_INVALID';

const problemsOf = (err: unknown, path: string): ErrorDetail[] => {
    const problems = err instanceof ValidationError ? err.details ?? [{ path: '', message: err.message }] : [{ path: '', message: (err as Error).message }];
    return problems.map((p) => ({ path: `${path}${p.path ? `#${p.path}` : ''}`, message: `${path}: ${p.message}` }));
};

export interface PlanDocumentsInput {
    registry: Registry;
    ctx: TenantContext & { tenantId: string };
    /** In dependency order, the tenant first. */
    documents: PlanDocument[];
    mode: ImportMode;
    source: string;
    sources?: SourceRecords;
    /** What else the fingerprint covers (the bundle's digest, the variables it used). */
    fingerprintInput: unknown;
    warnings?: PlanWarning[];
}

/**
 * Plans an import: for each document what its write would do, or why it cannot be done (blocked); in replace mode
 * the deletes; and a fingerprint over the input, the mode and the target state read. Reads only; run again inside
 * the import's transaction, it tells whether what was reviewed is what is about to be applied.
 */
export const planDocuments = async (input: PlanDocumentsInput): Promise<PlannedImport> => {
    const { registry, ctx, mode, source } = input;
    const tenantId = ctx.tenantId;
    const details: ErrorDetail[] = [];
    const warnings: PlanWarning[] = [...input.warnings ?? []];
    const steps: Step[] = [];
    const requirements: PlanRequirement[] = [];
    const willExist = new Set<string>();
    const planned = new Set<string>();

    for (const doc of input.documents) {
        const { kind } = doc;
        let spec = kind.fromFolder?.(doc.spec, tenantId) ?? doc.spec;
        let id: string;
        try {
            id = kind.singleton ? kind.kind : kind.id(spec);
        }
        catch {
            id = '';
        }
        const resource = kind.singleton ? kind.kind : `${kind.kind}/${id}`;
        if (planned.has(resource)) {
            details.push({ path: doc.path, message: `${doc.path}: ${resource} is also defined by another document` });
            continue;
        }
        planned.add(resource);
        const existing = id ? await registry.get(ctx, kind, id) : undefined;
        if (existing && mode === 'create') {
            // Kept as it is: nothing of the document is applied, so nothing it lacks can block.
            warnings.push({ code: 'RESOURCE_EXISTS', resource, message: `${resource} exists and is kept as it is (mode create)` });
            steps.push({ kind, path: doc.path, action: { kind: kind.kind, id, action: 'skip', code: 'RESOURCE_EXISTS' } });
            continue;
        }
        const blocks = [...doc.blocks ?? []];
        requirements.push(...doc.requirements ?? []);

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
            const listed = doc.requirementFor?.(resource, field);
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
                steps.push({ kind, path: doc.path, action: { kind: kind.kind, id, action: 'blocked', code: blocks[0]!.code, message: blocks.map((b) => b.message).join('; ') } });
                continue;
            }
            details.push(...problemsOf(err, doc.path));
            continue;
        }
        id = preview.id;
        // An older document that would change nothing clobbers nothing: re-planning the bundle just imported (whose
        // import raised the stored generation) answers unchanged rather than blocked.
        if (preview.existing && preview.action !== 'unchanged' && doc.generation !== undefined && doc.generation < preview.existing.generation) {
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
            steps.push({ kind, path: doc.path, action: { kind: kind.kind, id, action: 'blocked', code: blocks[0]!.code, message: blocks.map((b) => b.message).join('; ') } });
            continue;
        }
        const action: PlanAction = { kind: kind.kind, id, action: preview.action, ...(preview.action === 'update' ? { changes: preview.changes } : {}) };
        steps.push({ kind, path: doc.path, action, spec, version: doc.version });
    }
    if (details.length) {
        throw new DocumentProblems(details);
    }

    // The target state the plan read: every resource's generation, ownership and time, and the recorded sources.
    const state: unknown[] = [];
    const sourceOf = (await input.sources?.read(tenantId)) ?? new Map<string, string>();
    const deletes: Step[] = [];
    const tenantKind = registry.ordered().find((k) => k.isTenant);
    const tenant = tenantKind ? await registry.get(ctx, tenantKind, tenantId) : undefined;
    for (const kind of registry.ordered()) {
        if (kind.isTenant) {
            state.push(tenant ? [kind.kind, tenantId, tenant.generation, tenant.ownership, tenant.updatedAt] : [kind.kind, tenantId, null]);
            continue;
        }
        if (!tenant) {
            continue;
        }
        for (const stored of await registry.list(ctx, kind)) {
            const id = kind.singleton ? kind.kind : kind.id(stored.spec);
            const key = `${kind.kind}/${id}`;
            state.push([kind.kind, id, stored.generation, stored.ownership, stored.updatedAt, sourceOf.get(key) ?? null]);
            const resource = kind.singleton ? kind.kind : key;
            if (mode === 'replace' && !planned.has(resource) && stored.ownership === 'file-managed' && sourceOf.get(key) === source) {
                deletes.push({ kind, action: { kind: kind.kind, id, action: 'delete' } });
            }
        }
    }
    // Dependents go before what they depend on.
    steps.push(...deletes.reverse());

    const actions = steps.map((s) => s.action);
    const planFingerprint = sha256Hex(jcs({ input: input.fingerprintInput, mode, tenant: tenantId, source, state }));
    return {
        plan: { planFingerprint, mode, tenant: tenantId, blocked: actions.some((a) => a.action === 'blocked'), actions, requirements, warnings },
        steps,
        source
    };
};

export interface AppliedImport {
    /** How many writes created, updated or left a resource unchanged, and how many were skipped or deleted. */
    counts: Record<string, number>;
    /** Values made for `!generate` fields of created resources: their only copy. */
    generatedSecrets: Array<{ kind: string; id: string; secret: string }>;
}

/**
 * Applies an unblocked plan (the caller checks `plan.blocked`) in its order, through the registry's write path (ownership file-managed), recording the
 * source of each written resource. Call it inside one registry transaction: a failure leaves nothing written.
 * `failed` turns a write's error into the caller's (e.g. naming the file); the default rethrows it.
 */
export const applyPlan = async (input: { registry: Registry; ctx: TenantContext & { tenantId: string }; planned: PlannedImport; sources?: SourceRecords; failed?: (step: Step, err: unknown) => Error }): Promise<AppliedImport> => {
    const { registry, ctx, planned, sources } = input;
    const counts: Record<string, number> = {};
    const generatedSecrets: AppliedImport['generatedSecrets'] = [];
    for (const step of planned.steps) {
        const { action } = step;
        const count = (name: string) => (counts[name] = (counts[name] ?? 0) + 1);
        try {
            if (action.action === 'delete') {
                await registry.remove(ctx, step.kind, action.id);
                await sources?.forget(ctx.tenantId, action.kind, action.id);
                count('delete');
            }
            else if (action.action === 'skip') {
                count('skip');
            }
            else {
                const written = await registry.write(ctx, step.kind, step.spec, { version: step.version, ownership: 'file-managed', mode: 'upsert' });
                // What was written: a planned "unchanged" that takes over an unmanaged resource updates its ownership.
                count(written.action);
                generatedSecrets.push(...Object.values(written.generated ?? {}).map((secret) => ({ kind: action.kind, id: written.id, secret })));
                if (!step.kind.isTenant) {
                    await sources?.record(ctx.tenantId, action.kind, action.id, planned.source);
                }
            }
        }
        catch (err) {
            throw input.failed ? input.failed(step, err) : err;
        }
    }
    return { counts, generatedSecrets };
};
