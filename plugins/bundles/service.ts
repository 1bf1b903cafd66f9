import { randomUUID } from 'node:crypto';
import Os from 'node:os';
import type { Variables } from '../../lib/config-import/placeholders';
import type { Database } from '../../lib/db/database';
import { isUniqueViolation } from '../../lib/db/errors';
import { AuditLogModel } from '../../lib/db/models/audit-log';
import { NotFoundError } from '../../lib/errors';
import type { TenantContext } from '../../lib/registry/kind';
import type { Registry } from '../../lib/registry/registry';
import { packageVersion } from '../../lib/package-info';
import { writeZip, type ZipLimits } from './archive';
import { BUNDLE_FORMAT, BUNDLE_FORMAT_VERSION, bundlePath, decodeJsonBundle, decodeZipBundle, jcs, MANIFEST_PATH, sha256Hex, type Bundle, type JsonBundle, type Manifest } from './bundle';
import { BundleError } from './errors';
import { BundleLockModel, BundleOperationModel, BundleSourceModel, type OperationStatus, type OperationType } from './models';
import { applyPlan, type ImportMode, type Plan, type PlanAction } from '../../lib/config-import/plan';
import { planImport, sourceRecords } from './planner';
import { upgradeDocument, type UpgradedDocument } from './upgrade';

export type BundleContext = TenantContext & { tenantId: string };

export interface ImportResult {
    operationId: string;
    actions: PlanAction[];
    warnings: Plan['warnings'];
    generatedSecrets?: Array<{ kind: string; id: string; secret: string }>;
}

export interface OperationReport {
    id: string;
    type: OperationType;
    mode?: string;
    status: OperationStatus;
    actor: string;
    startedAt: string;
    finishedAt?: string;
    summary: Record<string, unknown>;
}

export interface BundleServiceOptions {
    db: Database;
    registry: Registry;
    /** What `${VAR}` placeholders of imported documents resolve to (the process environment). */
    variables: Variables;
    zipLimits: ZipLimits;
}

const AUDIT_KIND = 'ConfigBundle';

/** The PostgreSQL advisory lock an import's transaction holds. */
const workerKey = (operationId: string) => `hallmark-bundle-import:${operationId}`;
const REPORTS_LISTED = 50;

const toReport = (row: BundleOperationModel): OperationReport => ({
    id: row.id,
    type: row.type,
    ...(row.mode ? { mode: row.mode } : {}),
    status: row.status,
    actor: row.actor,
    startedAt: row.startedAt,
    ...(row.finishedAt ? { finishedAt: row.finishedAt } : {}),
    summary: row.summary ?? {}
});

/** Export, plan and import of a tenant's configuration (spec 2.9, 4.8), and their operation reports. */
export class BundleService {
    /** Tenants with an import running in this process (tenant → operation): SQLite's one connection would otherwise
     * queue a second one, and a report of one of these is certainly alive. */
    private readonly importing = new Map<string, string>();

    constructor(private readonly options: BundleServiceOptions) {}

    private get db() {
        return this.options.db;
    }

    private get registry() {
        return this.options.registry;
    }

    /** One document at its kind's current version (spec 4.8 documents/upgrade); needs no tenant or database. */
    upgrade(document: unknown): UpgradedDocument {
        return upgradeDocument(this.registry, document);
    }

    /** A JSON bundle, or a ZIP as bytes or as a file (an upload: read where needed, never whole). */
    decode(input: { json?: JsonBundle; zip?: Buffer | { file: string } }): Promise<Bundle> | Bundle {
        return input.zip ? decodeZipBundle(input.zip, this.options.zipLimits) : decodeJsonBundle(input.json!);
    }

    /** The tenant as a bundle: the JSON form and, for `zip`, the archive. Audited, and reported as an operation. */
    async export(ctx: BundleContext): Promise<{ json: JsonBundle; zip(): Promise<Buffer> }> {
        const tenantKind = this.registry.ordered().find((k) => k.isTenant);
        if (!tenantKind || !(await this.registry.get(ctx, tenantKind, ctx.tenantId))) {
            throw new NotFoundError('Tenant not found');
        }
        const startedAt = new Date();
        const exported = await this.registry.export(ctx);
        const files = exported.documents.map((d) => {
            const kind = this.registry.kind({ kind: d.kind });
            const path = bundlePath(kind, d.id);
            return { ...d, path, bytes: Buffer.from(`${JSON.stringify(d.document, null, 2)}\n`) };
        });
        const manifest = (digest: (f: (typeof files)[number]) => string): Manifest => ({
            format: BUNDLE_FORMAT,
            formatVersion: BUNDLE_FORMAT_VERSION,
            sourceVersion: packageVersion(),
            exportedAt: startedAt.toISOString(),
            tenant: ctx.tenantId,
            resources: files.map((f) => ({
                kind: f.kind,
                id: f.id,
                $schema: f.document.$schema,
                path: f.path,
                sha256: digest(f),
                ownership: f.document.metadata?.ownership ?? 'unmanaged',
                generation: f.document.metadata?.generation ?? 1
            })),
            // No kind holds image files yet: logos are URLs.
            assets: [],
            requirements: exported.requirements,
            warnings: []
        });
        const operationId = randomUUID();
        await this.db.transaction(async (trx) => {
            await this.db.model(BundleOperationModel).query(trx).insert({
                id: operationId, tenantId: ctx.tenantId, type: 'export', mode: null, status: 'succeeded', actor: ctx.clientId,
                startedAt: startedAt.toISOString(), finishedAt: new Date().toISOString(),
                summary: { resources: files.length, requirements: exported.requirements.length }
            });
            await this.audit(ctx, 'export', operationId);
        });
        return {
            json: { manifest: manifest((f) => sha256Hex(jcs(f.document))), documents: files.map((f) => ({ path: f.path, document: f.document })), assets: [] },
            zip: () => {
                const zipManifest = manifest((f) => sha256Hex(f.bytes));
                return writeZip([
                    { path: MANIFEST_PATH, data: Buffer.from(`${JSON.stringify(zipManifest, null, 2)}\n`) },
                    ...files.map((f) => ({ path: f.path, data: f.bytes }))
                ], startedAt);
            }
        };
    }

    async plan(ctx: BundleContext, bundle: Bundle, mode: ImportMode): Promise<Plan> {
        return (await planImport({ db: this.db, registry: this.registry, ctx, bundle, mode, variables: this.options.variables })).plan;
    }

    /**
     * Applies a reviewed plan in one transaction: planned again inside it, refused when the fingerprint differs
     * (CONFIG_PLAN_STALE) or the plan is blocked, then written in dependency order through the registry.
     */
    async import(ctx: BundleContext, bundle: Bundle, mode: ImportMode, planFingerprint: string): Promise<ImportResult> {
        const operationId = await this.lock(ctx, mode);
        const counts: Record<string, number> = {};
        try {
            const result = await this.registry.transaction(async () => {
                if (this.db.dialect === 'postgres') {
                    // Held until this transaction ends, also when the process dies: how other replicas tell a running
                    // import from an interrupted one.
                    await this.db.current().raw('select pg_advisory_xact_lock(hashtext(?))', [workerKey(operationId)]);
                }
                const planned = await planImport({ db: this.db, registry: this.registry, ctx, bundle, mode, variables: this.options.variables });
                if (planned.plan.planFingerprint !== planFingerprint) {
                    throw new BundleError(409, 'CONFIG_PLAN_STALE', 'The bundle, the mode or the tenant changed since the plan was made: plan again');
                }
                if (planned.plan.blocked) {
                    const first = planned.plan.actions.find((a) => a.action === 'blocked')!;
                    throw new BundleError(409, first.code!, `${first.kind} ${first.id} is blocked: ${first.message}`, { details: planned.plan });
                }
                const applied = await applyPlan({ registry: this.registry, ctx, planned, sources: sourceRecords(this.db) });
                Object.assign(counts, applied.counts);
                const { generatedSecrets } = applied;
                await this.audit(ctx, 'import', operationId);
                return { operationId, actions: planned.plan.actions, warnings: planned.plan.warnings, ...(generatedSecrets.length ? { generatedSecrets } : {}) };
            });
            await this.finish(ctx, operationId, 'succeeded', { ...counts });
            return result;
        }
        catch (err) {
            await this.finish(ctx, operationId, 'failed', { error: (err as Error).message, ...(err instanceof BundleError ? { code: err.code } : {}) });
            throw err;
        }
    }

    /** One import per tenant on every replica: a row keyed by the tenant, committed before the import starts. */
    private async lock(ctx: BundleContext, mode: ImportMode): Promise<string> {
        if (this.importing.has(ctx.tenantId)) {
            throw new BundleError(409, 'OPERATION_IN_PROGRESS', `An import into tenant ${ctx.tenantId} is running`);
        }
        const operationId = randomUUID();
        this.importing.set(ctx.tenantId, operationId);
        const now = new Date().toISOString();
        try {
            await this.db.transaction(async (trx) => {
                await this.db.model(BundleLockModel).query(trx).insert({ tenantId: ctx.tenantId, operationId, acquiredAt: now });
                await this.db.model(BundleOperationModel).query(trx).insert({
                    id: operationId, tenantId: ctx.tenantId, type: 'import', mode, status: 'running', actor: ctx.clientId, startedAt: now, finishedAt: null, summary: {},
                    workerHost: Os.hostname(), workerPid: process.pid
                });
            });
        }
        catch (err) {
            this.importing.delete(ctx.tenantId);
            if (isUniqueViolation(err)) {
                throw new BundleError(409, 'OPERATION_IN_PROGRESS', `An import into tenant ${ctx.tenantId} is running`);
            }
            throw err;
        }
        return operationId;
    }

    private async finish(ctx: BundleContext, operationId: string, status: OperationStatus, summary: Record<string, unknown>): Promise<void> {
        try {
            await this.db.transaction(async (trx) => {
                await this.db.model(BundleOperationModel).query(trx).findById(operationId).patch({ status, finishedAt: new Date().toISOString(), summary });
                await this.db.model(BundleLockModel).query(trx).delete().where({ tenantId: ctx.tenantId, operationId });
            });
        }
        finally {
            this.importing.delete(ctx.tenantId);
        }
    }

    private async audit(ctx: BundleContext, action: 'export' | 'import' | 'detach', operationId: string): Promise<void> {
        await this.db.model(AuditLogModel).query(this.db.current()).insert({
            tenantId: ctx.tenantId, actor: ctx.clientId, action, kind: AUDIT_KIND, resourceId: operationId, changes: null, createdAt: new Date().toISOString()
        });
    }

    /**
     * Releases the lock of an import whose process died (kill -9, a crash): its transaction was rolled back by the
     * database, but the lock row it committed first stays until an operator confirms that no worker runs it.
     */
    async acknowledgeInterruption(ctx: BundleContext, id: string): Promise<OperationReport> {
        const operation = await this.operation(ctx, id);
        if (operation.status === 'running') {
            throw new BundleError(409, 'OPERATION_IN_PROGRESS', `Operation ${id} is still running`);
        }
        if (operation.type !== 'import' || operation.finishedAt) {
            throw new BundleError(409, 'OPERATION_NOT_INTERRUPTED', `Operation ${id} is ${operation.status}, not an interrupted import`);
        }
        await this.db.transaction(async (trx) => {
            await this.db.model(BundleOperationModel).query(trx).findById(id)
                .patch({ status: 'interrupted', finishedAt: new Date().toISOString(), summary: { ...operation.summary, acknowledgedBy: ctx.clientId } });
            await this.db.model(BundleLockModel).query(trx).delete().where({ tenantId: ctx.tenantId, operationId: id });
        });
        return this.operation(ctx, id);
    }

    /** Ownership, generation and import source of every resource of the tenant. */
    async resources(ctx: BundleContext): Promise<Array<{ kind: string; id: string; ownership: string; generation: number; source?: string; updatedAt: string }>> {
        const sources = await this.db.model(BundleSourceModel).query().where({ tenantId: ctx.tenantId });
        const sourceOf = new Map(sources.map((s) => [`${s.kind}/${s.resourceId}`, s.source]));
        const items = [];
        for (const kind of this.registry.ordered()) {
            const stored = kind.isTenant ? [await this.registry.get(ctx, kind, ctx.tenantId)].filter((r) => r !== undefined) : await this.registry.list(ctx, kind);
            for (const resource of stored) {
                const id = kind.singleton ? kind.kind : kind.id(resource.spec);
                const source = sourceOf.get(`${kind.kind}/${id}`);
                items.push({ kind: kind.kind, id, ownership: resource.ownership, generation: resource.generation, ...(source && resource.ownership === 'file-managed' ? { source } : {}), updatedAt: resource.updatedAt });
            }
        }
        return items;
    }

    /** Makes a file-managed resource unmanaged (spec 3.4): a later replace import no longer deletes it. Audited. */
    async detach(ctx: BundleContext, kindName: string, id: string): Promise<{ kind: string; id: string; ownership: string; generation: number }> {
        const kind = this.registry.ordered().find((k) => k.kind === kindName);
        const key = kind?.singleton ? kind.kind : id;
        const existing = kind && (!kind.isTenant || key === ctx.tenantId) ? await this.registry.get(ctx, kind, key) : undefined;
        if (!kind || !existing) {
            throw new NotFoundError(`${kindName} ${id} not found`);
        }
        if (existing.ownership !== 'file-managed') {
            throw new BundleError(409, 'NOT_FILE_MANAGED', `${kindName} ${id} is not file-managed`);
        }
        const operationId = randomUUID();
        const written = await this.registry.transaction(async () => {
            // The stored spec without write-only fields: the registry keeps those (a client's secret, a chain's key).
            const result = await this.registry.write(ctx, kind, existing.spec, { ownership: 'unmanaged', mode: 'update' });
            await this.db.model(BundleSourceModel).query(this.db.current()).delete().where({ tenantId: ctx.tenantId, kind: kind.kind, resourceId: key });
            const now = new Date().toISOString();
            await this.db.model(BundleOperationModel).query(this.db.current()).insert({
                id: operationId, tenantId: ctx.tenantId, type: 'detach', mode: null, status: 'succeeded', actor: ctx.clientId, startedAt: now, finishedAt: now, summary: { kind: kind.kind, id: key }
            });
            await this.audit(ctx, 'detach', operationId);
            return result;
        });
        return { kind: kind.kind, id: key, ownership: written.resource.ownership, generation: written.resource.generation };
    }

    async operations(ctx: BundleContext): Promise<OperationReport[]> {
        const rows = await this.db.model(BundleOperationModel).query().where({ tenantId: ctx.tenantId }).orderBy('startedAt', 'desc').orderBy('id').limit(REPORTS_LISTED);
        return Promise.all(rows.map((row) => this.report(row)));
    }

    /** A running report whose process is gone is interrupted (spec 3.4); it keeps the lock until acknowledged. */
    private async report(row: BundleOperationModel): Promise<OperationReport> {
        const report = toReport(row);
        return row.status === 'running' && !(await this.alive(row)) ? { ...report, status: 'interrupted' } : report;
    }

    private async alive(row: BundleOperationModel): Promise<boolean> {
        if (this.importing.get(row.tenantId) === row.id) {
            return true;
        }
        if (this.db.dialect === 'postgres') {
            // Free only when no transaction holds it: the import's ended with its process.
            return this.db.knex.transaction(async (trx) => {
                const result = await trx.raw('select pg_try_advisory_xact_lock(hashtext(?)) as free', [workerKey(row.id)]);
                return !(result.rows[0] as { free: boolean }).free;
            });
        }
        // SQLite: the processes share a host; one of them still alive may be running it.
        if (!row.workerHost || !row.workerPid || row.workerPid === process.pid) {
            return false;
        }
        if (row.workerHost !== Os.hostname()) {
            return true;
        }
        try {
            process.kill(row.workerPid, 0);
            return true;
        }
        catch (err) {
            return (err as NodeJS.ErrnoException).code === 'EPERM';
        }
    }

    async operation(ctx: BundleContext, id: string): Promise<OperationReport> {
        const row = await this.db.model(BundleOperationModel).query().findById(id).where({ tenantId: ctx.tenantId });
        if (!row) {
            throw new NotFoundError('Operation not found');
        }
        return this.report(row);
    }
}
