import type Joi from 'joi';
import { AuditLogModel } from '../db/models/audit-log';
import type { Knex } from 'knex';
import type { ChangeBus } from '../change-bus';
import type { Database } from '../db/database';
import { isUniqueViolation } from '../db/errors';
import { ConflictError, NotFoundError, ValidationError, joiDetails, type ErrorDetail } from '../errors';
import { policyRefusal, type OutboundPolicy, type Resolver } from '../outbound';
import { canonicalJson, diffSpecs, type FieldChange } from './diff';
import { GENERATE, type ExportRequirement, type KindRef, type Ownership, type ResourceKind, type ResourceStore, type StoreScope, type StoredResource, type TenantContext, type UpgradeWarning } from './kind';
import { tableResourceStore } from './resource-store';
import { parseSchemaUrl, schemaUrl } from './schema-url';

export interface ConfigDocument {
    $schema: string;
    metadata?: { generation?: number; ownership?: Ownership };
    spec: unknown;
}

export type WriteMode = 'create' | 'update' | 'upsert';

export interface WriteOptions {
    /** create: fail with 409 when it exists; update: 404 when missing; upsert: either. Default upsert. */
    mode?: WriteMode;
    /** Version of `spec`; older versions are upgraded. Default: the kind's current version. */
    version?: number;
    ownership?: Ownership;
}

export interface WriteResult<T = unknown> {
    action: 'create' | 'update' | 'unchanged';
    id: string;
    spec: T;
    resource: StoredResource<T>;
    warnings: UpgradeWarning[];
    /** Values made for `!generate` fields of a created resource, by field; shown to the caller once, never stored. */
    generated?: Record<string, string>;
}

/** A configuration document as the export writes it, with its place in a tenant folder (spec 2.9 layout). */
export interface ExportedDocument {
    kind: string;
    /** The spec's id; the kind name for singletons. */
    id: string;
    /** e.g. `clients/web.json`, relative to the tenant folder. */
    path: string;
    document: ConfigDocument;
}

export interface ExportResult {
    /** Dependencies before dependents. */
    documents: ExportedDocument[];
    requirements: ExportRequirement[];
}

/** What `write` would do with an input (see Registry.preview). */
export interface PreviewResult<T = unknown> {
    action: 'create' | 'update' | 'unchanged';
    id: string;
    /** Validated and upgraded. */
    spec: T;
    existing?: StoredResource<T>;
    /** Changed field paths of an update; secret and write-only values redacted. */
    changes: FieldChange[];
    warnings: UpgradeWarning[];
    /** Why the write would be refused; empty when it would pass. */
    problems: ErrorDetail[];
}

export class RegistryError extends Error {
    override name = 'RegistryError';
}

/** Every value at a dot path whose `*` segments match any array element or key, with its concrete path. */
const valuesAt = (spec: unknown, path: string): Array<{ path: string; value: unknown }> =>
    path.split('.').reduce<Array<{ path: string[]; value: unknown }>>((found, key) => found.flatMap(({ path: at, value }) => {
        if (!value || typeof value !== 'object') {
            return [];
        }
        const entries = key === '*' ? Object.entries(value) : [[key, (value as Record<string, unknown>)[key]] as const];
        return entries.filter(([, v]) => v !== undefined).map(([k, v]) => ({ path: [...at, k], value: v }));
    }), [{ path: [], value: spec }]).map(({ path: at, value }) => ({ path: at.join('.'), value }));

export interface RegistryOptions {
    /** The policy every `outboundUrls` field must pass when it is written; the strictest one when not given. */
    outbound?: OutboundPolicy;
    /** DNS for those checks (tests answer with chosen addresses). */
    resolver?: Resolver;
    /** Carries committed changes to the other processes (workers, replicas), whose listeners then run as here. */
    bus?: ChangeBus;
}

/** A committed change as the change bus carries it between processes. */
interface ChangeMessage {
    kind: string;
    tenantId: string | null;
    id: string;
}

const CHANGE_TOPIC = 'registry.change';

const isChangeMessage = (value: unknown): value is ChangeMessage => {
    const m = value as ChangeMessage;
    return !!m && typeof m === 'object' && typeof m.kind === 'string' && typeof m.id === 'string' && (m.tenantId === null || typeof m.tenantId === 'string');
};

const STRICT_OUTBOUND: OutboundPolicy = { allowHttp: false, allowPrivateNetwork: false, allowedHosts: [] };

/** Sets the value at a concrete dot path (no `*`) of a plain JSON value, in place. */
const setAt = (spec: unknown, path: string, value: unknown): void => {
    const keys = path.split('.');
    const parent = keys.slice(0, -1).reduce<any>((v, key) => v[key], spec);
    parent[keys.at(-1)!] = value;
};

/** A placeholder variable name (spec 2.9: uppercase letters, digits and _) for a value of a resource. */
const variableName = (...parts: string[]): string =>
    parts.map((p) => p.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase().replace(/[^A-Z0-9]+/g, '_').replace(/^_|_$/g, '')).filter(Boolean).join('_');

const schemaOptions: Joi.ValidationOptions = { abortEarly: false, convert: true, errors: { wrap: { label: '"' } } };

/**
 * Knows every resource kind, and reads and writes their resources in its database. The one write path for
 * configuration state: upgrade, validate, store and audit, in one transaction. The API, the startup import and
 * bundles all go through it. Calls name kinds by their kind object (KindRef), so results are typed by the spec.
 */
export class Registry {
    private readonly kinds = new Map<string, ResourceKind>();
    private readonly listeners = new Map<string, Array<(tenantId: string | null, id: string) => void>>();
    private orderedKinds?: ResourceKind[];

    constructor(private readonly db: Database, private readonly options: RegistryOptions = {}) {
        // Another process committed a change: this process's caches drop what it touches, as for a change made here.
        options.bus?.subscribe(CHANGE_TOPIC, (data) => {
            if (isChangeMessage(data)) {
                this.tell(data.kind, data.tenantId, data.id);
            }
        });
    }

    register(kind: ResourceKind): void {
        if (this.orderedKinds) {
            throw new RegistryError(`Cannot register resource kind ${kind.kind}: the registry is sealed`);
        }
        if (this.kinds.has(kind.kind)) {
            throw new RegistryError(`Resource kind ${kind.kind} is registered twice`);
        }
        if ([...this.kinds.values()].some((k) => k.file === kind.file)) {
            throw new RegistryError(`Resource file name ${kind.file} is used by two kinds`);
        }
        this.kinds.set(kind.kind, kind);
    }

    /**
     * Called after every committed create, update or delete of the kind, e.g. to drop a cache: made in this process,
     * or (with a change bus) in another worker or replica, as soon as its message arrives.
     */
    onChange(kind: KindRef<unknown>, listener: (tenantId: string | null, id: string) => void): void {
        this.listeners.set(kind.kind, [...this.listeners.get(kind.kind) ?? [], listener]);
    }

    /**
     * Tells the change listeners (caches) once the change is committed: at once after a write's own transaction, and
     * after the commit of a surrounding one (an import), so a rolled-back change is never reported.
     */
    private changed(kind: ResourceKind, tenantId: string | null, id: string): void {
        const notify = () => this.db.detached(() => {
            this.tell(kind.kind, tenantId, id);
            this.options.bus?.publish(CHANGE_TOPIC, { kind: kind.kind, tenantId, id } satisfies ChangeMessage);
        });
        const outer = this.db.ambient();
        if (outer) {
            outer.executionPromise.then(notify, () => undefined);
        }
        else {
            notify();
        }
    }

    private tell(kind: string, tenantId: string | null, id: string): void {
        for (const listener of this.listeners.get(kind) ?? []) {
            listener(tenantId, id);
        }
    }

    /** Checks dependencies and fixes the dependency order; after this no kind can be added. */
    seal(): void {
        if (this.orderedKinds) {
            return;
        }
        for (const kind of this.kinds.values()) {
            for (const dep of kind.dependsOn ?? []) {
                if (!this.kinds.has(dep)) {
                    throw new RegistryError(`Resource kind ${kind.kind} depends on ${dep}, which no plugin registers`);
                }
            }
        }
        const ordered: ResourceKind[] = [];
        const state = new Map<string, 'visiting' | 'done'>();
        const visit = (kind: ResourceKind, trail: string[]) => {
            if (state.get(kind.kind) === 'done') {
                return;
            }
            if (state.get(kind.kind) === 'visiting') {
                throw new RegistryError(`Resource kinds depend on each other in a cycle: ${[...trail, kind.kind].join(' -> ')}`);
            }
            state.set(kind.kind, 'visiting');
            for (const dep of kind.dependsOn ?? []) {
                visit(this.kinds.get(dep)!, [...trail, kind.kind]);
            }
            state.set(kind.kind, 'done');
            ordered.push(kind);
        };
        for (const kind of this.kinds.values()) {
            visit(kind, []);
        }
        this.orderedKinds = ordered;
    }

    get sealed(): boolean {
        return !!this.orderedKinds;
    }

    /** Every kind, dependencies before dependents. */
    ordered(): ResourceKind[] {
        if (!this.orderedKinds) {
            throw new RegistryError('The registry is not sealed yet');
        }
        return this.orderedKinds;
    }

    has(kind: KindRef<unknown>): boolean {
        return this.kinds.has(kind.kind);
    }

    /** The registered definition of a kind. */
    kind<T>(ref: KindRef<T>): ResourceKind<T> {
        const kind = this.kinds.get(ref.kind);
        if (!kind) {
            throw new RegistryError(`Unknown resource kind ${ref.kind}`);
        }
        return kind as ResourceKind<T>;
    }

    kindForSchema(url: unknown): { kind: ResourceKind; version: number } {
        const parsed = typeof url === 'string' ? parseSchemaUrl(url) : undefined;
        const kind = parsed && [...this.kinds.values()].find((k) => k.file === parsed.file);
        if (!parsed || !kind) {
            throw new ValidationError(`Unknown $schema ${JSON.stringify(url)}`, [{ path: '$schema', message: 'is not a schema this service knows' }]);
        }
        if (parsed.version > kind.version) {
            throw new ValidationError(`${kind.file} version ${parsed.version} is newer than this service supports (${kind.version})`, [{ path: '$schema', message: 'version is too new' }]);
        }
        return { kind, version: parsed.version };
    }

    schemaUrl(kind: ResourceKind, version = kind.version): string {
        return schemaUrl(kind.file, version);
    }

    /** Upgrades a spec from `version` to the kind's current version, step by step. */
    upgrade<T>(kind: ResourceKind<T>, spec: unknown, version = kind.version): { spec: unknown; warnings: UpgradeWarning[] } {
        const warnings: UpgradeWarning[] = [];
        let current = spec;
        for (let v = version; v < kind.version; v++) {
            const step = kind.upgrades?.[v];
            if (!step) {
                throw new RegistryError(`${kind.kind} has no upgrade from version ${v} to ${v + 1}`);
            }
            current = step(structuredClone(current), (w) => warnings.push(w));
        }
        return { spec: current, warnings };
    }

    /** Upgrades and validates; throws ValidationError with one detail per problem. */
    validate<T>(kind: ResourceKind<T>, spec: unknown, version = kind.version): { spec: T; warnings: UpgradeWarning[] } {
        const upgraded = this.upgrade(kind, spec, version);
        const { value, error } = kind.schema.validate(upgraded.spec, schemaOptions);
        if (error) {
            throw new ValidationError(`${kind.file} is invalid: ${error.message}`, joiDetails(error));
        }
        return { spec: value as T, warnings: upgraded.warnings };
    }

    /** Splits a configuration document into kind, version and spec. */
    parseDocument(doc: unknown): { kind: ResourceKind; version: number; spec: unknown; metadata?: ConfigDocument['metadata'] } {
        if (!doc || typeof doc !== 'object' || Array.isArray(doc)) {
            throw new ValidationError('A configuration document must be a JSON object');
        }
        const { $schema, spec, metadata, ...rest } = doc as ConfigDocument;
        const unknown = Object.keys(rest);
        if (unknown.length) {
            throw new ValidationError(`Unknown document field ${unknown[0]}`, unknown.map((k) => ({ path: k, message: 'is not allowed' })));
        }
        if (spec === undefined) {
            throw new ValidationError('A configuration document needs a spec', [{ path: 'spec', message: 'is required' }]);
        }
        const { kind, version } = this.kindForSchema($schema);
        return { kind, version, spec, metadata };
    }

    private scope(ctx: TenantContext, kind: ResourceKind, trx: Knex, id?: string): StoreScope {
        // A tenant is its own scope; listing tenants has none.
        const tenantId = kind.isTenant ? id : ctx.tenantId;
        if (!tenantId && !kind.allowsTenantless && !kind.isTenant) {
            throw new NotFoundError(`${kind.kind} needs a tenant`);
        }
        return this.scopeIn(trx, tenantId ?? null, kind);
    }

    private scopeIn(trx: Knex, tenantId: string | null, kind: ResourceKind): StoreScope {
        const scope: StoreScope = {
            db: this.db,
            trx,
            tenantId,
            kind,
            get: (ref, id) => this.store(this.kind(ref)).get({ ...scope, kind: this.kind(ref) }, id)
        };
        return scope;
    }

    private store<T>(kind: ResourceKind<T>): ResourceStore<T> {
        return kind.store ?? tableResourceStore;
    }

    private idOf(kind: ResourceKind, spec: unknown): string {
        return kind.singleton ? kind.kind : kind.id(spec);
    }

    /** Runs fn in one transaction that every registry call inside it joins, e.g. a tenant's whole import. */
    transaction<T>(fn: () => Promise<T>): Promise<T> {
        return this.db.transaction(fn);
    }

    /** Reads need no transaction of their own; inside one (see Database.transaction) they see its writes. */
    async get<T>(ctx: TenantContext, ref: KindRef<T>, id?: string): Promise<StoredResource<T> | undefined> {
        const kind = this.kind(ref);
        const key = kind.singleton ? kind.kind : id!;
        return this.store(kind).get(this.scope(ctx, kind, this.db.current(), key), key);
    }

    async list<T>(ctx: TenantContext, ref: KindRef<T>): Promise<Array<StoredResource<T>>> {
        const kind = this.kind(ref);
        return this.store(kind).list(this.scope(ctx, kind, this.db.current()));
    }

    /** The single write path for configuration state; inside a caller's transaction it joins it. */
    async write<T>(ctx: TenantContext, ref: KindRef<T>, input: unknown, options: WriteOptions = {}): Promise<WriteResult<T>> {
        const kind = this.kind(ref);
        const { spec, warnings } = this.validate(kind, input, options.version ?? kind.version);
        // Resolves host names, so it runs before the transaction is opened (when the caller has none open).
        await this.checkOutboundUrls(kind, spec);
        const id = this.idOf(kind, spec);
        const mode = options.mode ?? 'upsert';

        const attempt = () => this.db.transaction(async (trx): Promise<WriteResult<T>> => {
            const scope = this.scope(ctx, kind, trx, id);
            const store = this.store(kind);
            const existing = await store.get(scope, id);
            if (existing && mode === 'create') {
                throw new ConflictError(`${kind.kind} ${id} already exists`);
            }
            if (!existing && mode === 'update') {
                throw new NotFoundError(`${kind.kind} ${id} not found`);
            }
            await this.checkReferences(trx, scope.tenantId, kind, spec);
            await kind.check?.(scope, spec, ctx);
            const ownership = options.ownership ?? existing?.ownership ?? 'unmanaged';
            if (existing && existing.ownership === ownership && await this.sameSpec(scope, store, id, existing.spec, spec)) {
                return { action: 'unchanged', id, spec: existing.spec, resource: existing, warnings };
            }
            const generated = existing ? undefined : this.generate(kind, spec);
            const written = generated ? { ...spec, ...generated } : spec;
            const resource = { spec: written, version: kind.version, generation: existing ? existing.generation + 1 : 1, ownership };
            await store.put(scope, id, resource, existing);
            const stored = (await store.get(scope, id))!;
            await this.audit(trx, ctx, scope.tenantId, existing ? 'update' : 'create', kind, id, diffSpecs(existing?.spec ?? {}, written, [...kind.secrets ?? [], ...kind.writeOnly ?? []]));
            return { action: existing ? 'update' : 'create', id, spec: stored.spec, resource: stored, warnings, ...(generated ? { generated } : {}) };
        });
        const result = await attempt().catch(async (err: unknown) => {
            if (!isUniqueViolation(err)) {
                throw err;
            }
            // Another writer created it between this write's read and its insert (two POSTs at once, replicas
            // bootstrapping the root client together). Written again, the write sees it: a create answers 409, an
            // upsert updates it or leaves it. Inside a caller's transaction (aborted on PostgreSQL) it is a conflict.
            if (this.db.ambient()) {
                throw new ConflictError(`${kind.kind} ${id} was written by another request at the same time`);
            }
            return attempt().catch((again: unknown) => {
                throw isUniqueViolation(again) ? new ConflictError(`${kind.kind} ${id} conflicts with a stored resource`) : again;
            });
        });
        if (result.action !== 'unchanged') {
            this.changed(kind, kind.isTenant ? id : ctx.tenantId ?? null, id);
        }
        return result;
    }

    /**
     * What `write` would do with this input, without writing: the action, the changed paths (secrets redacted) and
     * the problems that would refuse it (MISSING_RESOURCE_REFERENCE, a kind's check such as
     * STATUS_LIST_LAYOUT_IMMUTABLE). Invalid input throws ValidationError as `write` does. `willExist` names
     * resources that are not stored yet but will be before this one is written (earlier documents of an import): a
     * reference to one is not missing, and the kind's check, which may read it, is left to the write.
     */
    async preview<T>(ctx: TenantContext, ref: KindRef<T>, input: unknown, options: WriteOptions & { willExist?: (kind: string, id: string) => boolean } = {}): Promise<PreviewResult<T>> {
        const kind = this.kind(ref);
        const { spec, warnings } = this.validate(kind, input, options.version ?? kind.version);
        await this.checkOutboundUrls(kind, spec);
        const id = this.idOf(kind, spec);
        return this.db.transaction(async (trx): Promise<PreviewResult<T>> => {
            const scope = this.scope(ctx, kind, trx, id);
            const store = this.store(kind);
            const existing = await store.get(scope, id);
            const problems: ErrorDetail[] = [];
            let pending = false;
            try {
                await this.checkReferences(trx, scope.tenantId, kind, spec, (target, targetId) => {
                    const later = options.willExist?.(target, targetId) ?? false;
                    pending ||= later;
                    return later;
                });
            }
            catch (err) {
                problems.push(...(err instanceof ValidationError ? err.details ?? [{ path: '', message: err.message }] : []));
                if (!(err instanceof ValidationError)) {
                    throw err;
                }
            }
            if (!pending && !problems.length) {
                try {
                    await kind.check?.(scope, spec, ctx);
                }
                catch (err) {
                    if (!(err instanceof ValidationError)) {
                        throw err;
                    }
                    problems.push(...err.details ?? [{ path: '', message: err.message }]);
                }
            }
            const changes = existing ? diffSpecs(existing.spec, spec, [...kind.secrets ?? [], ...kind.writeOnly ?? []]) : [];
            const unchanged = !!existing && await this.sameSpec(scope, store, id, existing.spec, spec);
            return { action: existing ? (unchanged ? 'unchanged' : 'update') : 'create', id, spec, ...(existing ? { existing } : {}), changes: unchanged ? [] : changes, warnings, problems };
        });
    }

    /** A new value for every `!generate` field of a spec being created; undefined when there is none. */
    private generate(kind: ResourceKind, spec: unknown): Record<string, string> | undefined {
        const fields = Object.entries(kind.generated ?? {}).filter(([field]) => (spec as Record<string, unknown>)[field] === GENERATE);
        return fields.length ? Object.fromEntries(fields.map(([field, make]) => [field, make()])) : undefined;
    }

    private async sameSpec<T>(scope: StoreScope, store: ResourceStore<T>, id: string, stored: unknown, incoming: T): Promise<boolean> {
        const writeOnly = scope.kind.writeOnly ?? [];
        const readable = { ...(incoming as Record<string, unknown>) };
        const hasWriteOnly = writeOnly.some((f) => readable[f] !== undefined);
        writeOnly.forEach((f) => delete readable[f]);
        if (canonicalJson(stored) !== canonicalJson(readable)) {
            return false;
        }
        return !hasWriteOnly || (await store.writeOnlyUnchanged?.(scope, id, incoming)) === true;
    }

    async remove(ctx: TenantContext, ref: KindRef<unknown>, id?: string): Promise<void> {
        const kind = this.kind(ref);
        const key = kind.singleton ? kind.kind : id!;
        await this.db.transaction(async (trx) => {
            const scope = this.scope(ctx, kind, trx, key);
            const store = this.store(kind);
            const existing = await store.get(scope, key);
            if (!existing) {
                throw new NotFoundError(`${kind.kind} ${key} not found`);
            }
            // Written before the delete: deleting a tenant cascades to its audit entries, so that entry is global.
            const referrers = await this.referencesTo(trx, scope.tenantId, kind, key);
            if (referrers.length) {
                throw new ConflictError(`${kind.kind} ${key} is used by ${referrers.join(', ')}`);
            }
            await this.audit(trx, ctx, kind.isTenant ? null : scope.tenantId, 'delete', kind, key, diffSpecs(existing.spec, {}, kind.secrets));
            await store.delete(scope, key);
        });
        this.changed(kind, kind.isTenant ? key : ctx.tenantId ?? null, key);
    }

    /** Every `outboundUrls` value must pass the outbound policy: 400 naming the field and why. */
    private async checkOutboundUrls(kind: ResourceKind, spec: unknown): Promise<void> {
        const urls = (kind.outboundUrls ?? []).flatMap((field) => valuesAt(spec, field)).filter((u): u is { path: string; value: string } => typeof u.value === 'string');
        const details: ErrorDetail[] = [];
        for (const { path, value } of urls) {
            const refusal = await policyRefusal(this.options.outbound ?? STRICT_OUTBOUND, value, this.options.resolver);
            if (refusal) {
                details.push({ path, message: `${path}: ${refusal}` });
            }
        }
        if (details.length) {
            throw new ValidationError(`${kind.file} is invalid: ${details[0]!.message}`, details);
        }
    }

    /** Every reference field must name an existing resource of the tenant (MISSING_RESOURCE_REFERENCE); all are reported. */
    private async checkReferences(trx: Knex, tenantId: string | null, kind: ResourceKind, spec: unknown, willExist?: (kind: string, id: string) => boolean): Promise<void> {
        if (!tenantId) {
            return;
        }
        const missing: Array<{ path: string; target: string; id: string }> = [];
        for (const [field, targetName] of Object.entries(kind.references ?? {})) {
            if (!this.kinds.has(targetName)) {
                continue;
            }
            const target = this.kinds.get(targetName)!;
            for (const { path, value } of valuesAt(spec, field)) {
                if (typeof value === 'string' && !(await this.store(target).get(this.scopeIn(trx, tenantId, target), value)) && !willExist?.(targetName, value)) {
                    missing.push({ path, target: targetName, id: value });
                }
            }
        }
        if (missing.length) {
            const message = missing.map((m) => `${m.path} names ${m.target} ${m.id}, which does not exist`).join('; ');
            throw new ValidationError(message, missing.map((m) => ({ path: m.path, message: `MISSING_RESOURCE_REFERENCE: no ${m.target} ${m.id}` })));
        }
    }

    /** `Kind id` of every resource of the tenant whose reference fields name this resource. */
    private async referencesTo(trx: Knex, tenantId: string | null, target: ResourceKind, id: string): Promise<string[]> {
        if (!tenantId || target.isTenant) {
            return [];
        }
        const found: string[] = [];
        for (const kind of this.kinds.values()) {
            const fields = Object.entries(kind.references ?? {}).filter(([, k]) => k === target.kind).map(([field]) => field);
            if (!fields.length) {
                continue;
            }
            const all = await this.store(kind).list(this.scopeIn(trx, tenantId, kind));
            for (const resource of all) {
                if (fields.some((f) => valuesAt(resource.spec, f).some((found) => found.value === id))) {
                    found.push(`${kind.kind} ${this.idOf(kind, resource.spec)}`);
                }
            }
        }
        return found;
    }

    private async audit(trx: Knex, ctx: TenantContext, tenantId: string | null, action: string, kind: ResourceKind, id: string, changes: unknown): Promise<void> {
        await this.db.model(AuditLogModel).query(trx).insert({
            tenantId,
            actor: ctx.clientId,
            action,
            kind: kind.kind,
            resourceId: kind.singleton ? null : id,
            changes,
            createdAt: new Date().toISOString()
        });
    }

    /**
     * The configuration document of a stored resource as an export writes it (spec 2.9): `$schema`, metadata, and
     * the spec with every secret replaced by a `${…}` placeholder; what the importer must supply comes beside it.
     */
    async toDocument<T>(ctx: TenantContext, ref: KindRef<T>, resource: StoredResource<T>): Promise<{ document: ConfigDocument; requirements: ExportRequirement[] }> {
        const kind = this.kind(ref);
        const id = this.idOf(kind, resource.spec);
        const resourceName = kind.singleton ? kind.kind : `${kind.kind}/${id}`;
        const placeholder = (path: string) => `\${${variableName(kind.kind, kind.singleton ? '' : id, path)}}`;
        const spec = structuredClone(resource.spec) as Record<string, unknown>;
        const requirements: ExportRequirement[] = [];
        for (const { path } of (kind.secrets ?? []).flatMap((field) => valuesAt(spec, field)).filter((found) => found.value !== null)) {
            setAt(spec, path, placeholder(path));
            requirements.push({ code: 'SECRET_REQUIRED', resource: resourceName, path, message: `${resourceName}: ${path} is a secret; set the variable or replace the placeholder`, placeholder: placeholder(path) });
        }
        if (kind.exportFields) {
            const scope = this.scope(ctx, kind, this.db.current(), id);
            const extra = await kind.exportFields(scope, id, resource.spec, placeholder);
            Object.assign(spec, extra.fields);
            requirements.push(...extra.requirements.map((r) => ({ ...r, resource: resourceName })));
        }
        return {
            document: { $schema: this.schemaUrl(kind), metadata: { generation: resource.generation, ownership: resource.ownership }, spec },
            requirements
        };
    }

    /** Every resource of the context's tenant as configuration documents, dependencies first (spec 2.9). */
    async export(ctx: TenantContext & { tenantId: string }): Promise<ExportResult> {
        const result: ExportResult = { documents: [], requirements: [] };
        for (const kind of this.ordered()) {
            const resources = kind.isTenant ? [await this.get(ctx, kind, ctx.tenantId)].filter((r) => r !== undefined) : await this.list(ctx, kind);
            for (const resource of resources) {
                const id = this.idOf(kind, resource.spec);
                const { document, requirements } = await this.toDocument(ctx, kind, resource);
                const path = 'file' in kind.location ? kind.location.file : `${kind.location.dir}/${id}.json`;
                result.documents.push({ kind: kind.kind, id, path, document });
                result.requirements.push(...requirements);
            }
        }
        return result;
    }
}
