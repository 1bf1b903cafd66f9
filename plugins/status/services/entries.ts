import type { Knex } from 'knex';
import type { Database } from '../../../lib/db/database';
import { AuditLogModel } from '../../../lib/db/models/audit-log';
import { ConflictError, NotFoundError, ValidationError } from '../../../lib/errors';
import type { FieldChange } from '../../../lib/registry/diff';
import type { StoredResource, TenantContext } from '../../../lib/registry/kind';
import type { Registry } from '../../../lib/registry/registry';
import { statusListKind, type StatusList } from '../../../resources/status-list';
import { StatusAllocationModel, StatusListStateModel } from '../models';

// Entry i occupies bits i*bits … i*bits+bits-1, least significant first (IETF Token Status List). With 1, 2, 4 or 8
// bits an entry never straddles a byte.

export const entryValue = (entries: Buffer, bits: number, idx: number): number =>
    (entries[(idx * bits) >> 3]! >> ((idx * bits) & 7)) & ((1 << bits) - 1);

export const setEntryValue = (entries: Buffer, bits: number, idx: number, value: number): void => {
    const byte = (idx * bits) >> 3;
    const shift = (idx * bits) & 7;
    const mask = ((1 << bits) - 1) << shift;
    entries[byte] = (entries[byte]! & ~mask) | ((value << shift) & mask);
};

/** Whether index idx of an allocation bitmap (one bit per index, least significant first) is taken. */
export const isAllocated = (allocated: Buffer, idx: number): boolean => ((allocated[idx >> 3]! >> (idx & 7)) & 1) === 1;

/** Spec 3.3: 1 on a 1-bit list, 2 on wider lists. Final: a revoked entry never changes again. */
export const revokedValue = (bits: number): number => (bits === 1 ? 1 : 2);

/** The highest value an entry of the list may hold. */
export const maxValue = (bits: number): number => (1 << bits) - 1;

/** How a change treats entries that are already revoked: refuse the whole change (PATCH), or leave them (bulk). */
type FinalEntries = 'refuse' | 'skip';

export interface EntryChange {
    listId: string;
    index: number;
    value: number;
}

export const STATUS_SYSTEM_ACTOR = 'system:status';

/**
 * Changes of entry values (spec 3.3): one entry by PATCH, every entry of an issuance session, or a subject's earlier
 * credentials (activeCredentials). Each change locks the list's state row, writes the entries, increments
 * entries_version (which marks the cached token stale) and writes its audit entry, in one transaction.
 */
export class StatusEntryService {
    constructor(private readonly deps: { db: Database; registry: Registry }) {}

    /** PATCH …/entry/{index}: 404 for an unknown list or an index never allocated, 409 for a revoked entry. */
    async set(ctx: TenantContext & { tenantId: string }, listId: string, index: number, value: number): Promise<EntryChange> {
        return this.deps.db.transaction(async (trx) => {
            const list = await this.deps.registry.get(ctx, statusListKind, listId);
            if (!list) {
                throw new NotFoundError('Unknown status list');
            }
            const { bits } = list.spec;
            if (value > maxValue(bits)) {
                throw new ValidationError(`Status list ${listId} has ${bits}-bit entries: the value must be 0 … ${maxValue(bits)}`, [{ path: 'value', message: `must be at most ${maxValue(bits)}` }]);
            }
            await this.apply(trx, ctx, list, [index], () => value, 'refuse');
            return { listId, index, value };
        });
    }

    /**
     * Sets every entry of the credentials issued in an issuance session (optionally of one configuration) to `status`,
     * by default revoked. Entries already revoked stay so. Answers how many entries changed.
     */
    async setSession(ctx: TenantContext & { tenantId: string }, sessionId: string, options: { credentialConfigurationId?: string; status?: number }): Promise<number> {
        return this.deps.db.transaction(async (trx) => {
            const query = this.deps.db.model(StatusAllocationModel).query(trx).where({ tenantId: ctx.tenantId, sessionId });
            if (options.credentialConfigurationId !== undefined) {
                query.where({ credentialConfigurationId: options.credentialConfigurationId });
            }
            return this.setAll(trx, ctx, await query.select('listId', 'idx'), options.status);
        });
    }

    /**
     * activeCredentials: revokes the subject's credentials of the configuration allocated before `issued` (the ones
     * just issued). Strictly earlier: of two issuances allocated in the same millisecond neither revokes the other.
     */
    async supersede(tenantId: string, credentialConfigurationId: string, subjectHash: string, issued: Array<{ listId: string; idx: number }>): Promise<number> {
        const ctx = { tenantId, clientId: STATUS_SYSTEM_ACTOR, roles: [] };
        return this.deps.db.transaction(async (trx) => {
            const model = this.deps.db.model(StatusAllocationModel);
            const mine = await Promise.all(issued.map(({ listId, idx }) => model.query(trx).findById([tenantId, listId, idx]).select('createdAt')));
            const since = mine.map((row) => row?.createdAt).filter((at): at is string => !!at).sort()[0];
            if (!since) {
                return 0;
            }
            const earlier = await model.query(trx)
                .where({ tenantId, credentialConfigurationId, subjectHash })
                .where('createdAt', '<', since)
                .select('listId', 'idx');
            return this.setAll(trx, ctx, earlier);
        });
    }

    /**
     * Sets the entries, grouped by list. Lists are locked oldest first (creation time, then id), the order in which an
     * allocation that rolls over locks them, so that the two never wait for each other (a deadlock PostgreSQL ends by
     * failing one of them).
     */
    private async setAll(trx: Knex, ctx: TenantContext & { tenantId: string }, entries: Array<{ listId: string; idx: number }>, status?: number): Promise<number> {
        const byList = new Map<string, number[]>();
        for (const { listId, idx } of entries) {
            byList.set(listId, [...byList.get(listId) ?? [], idx]);
        }
        const lists: Array<StoredResource<StatusList>> = [];
        for (const listId of byList.keys()) {
            const list = await this.deps.registry.get(ctx, statusListKind, listId);
            if (list) {
                lists.push(list);
            }
        }
        lists.sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.spec.id.localeCompare(b.spec.id));
        let updated = 0;
        for (const list of lists) {
            const listId = list.spec.id;
            const { bits } = list.spec;
            if (status !== undefined && status > maxValue(bits)) {
                throw new ValidationError(`Status list ${listId} has ${bits}-bit entries: the status must be 0 … ${maxValue(bits)}`, [{ path: 'status', message: `must be at most ${maxValue(bits)} for list ${listId}` }]);
            }
            updated += await this.apply(trx, ctx, list, byList.get(listId)!, () => status ?? revokedValue(bits), 'skip');
        }
        return updated;
    }

    /** Sets entries of one list under the lock of its state row; answers how many changed. */
    private async apply(trx: Knex, ctx: TenantContext & { tenantId: string }, list: StoredResource<StatusList>, indexes: number[], target: () => number, final: FinalEntries): Promise<number> {
        const { id: listId, bits, capacity } = list.spec;
        const tenantId = ctx.tenantId;
        const locked = trx(StatusListStateModel.tableName).where({ tenantId, listId }).first('entries', 'allocated');
        const state = await (this.deps.db.dialect === 'postgres' ? locked.forUpdate() : locked) as Pick<StatusListStateModel, 'entries' | 'allocated'> | undefined;
        if (!state) {
            throw new NotFoundError('Unknown status list');
        }
        const entries = Buffer.from(state.entries);
        const changes: FieldChange[] = [];
        const value = target();
        for (const idx of indexes) {
            if (idx >= capacity || !isAllocated(state.allocated, idx)) {
                throw new NotFoundError(`Status list ${listId} has no allocated entry ${idx}`);
            }
            const before = entryValue(entries, bits, idx);
            if (before === value) {
                continue;
            }
            if (before === revokedValue(bits)) {
                if (final === 'refuse') {
                    throw new ConflictError(`Entry ${idx} of status list ${listId} is revoked, which is final`);
                }
                continue;
            }
            setEntryValue(entries, bits, idx, value);
            changes.push({ path: `entries.${idx}`, before, after: value });
        }
        if (!changes.length) {
            return 0;
        }
        // Incremented by the database, not from the value read: a token signed meanwhile is stale whatever it read.
        await trx(StatusListStateModel.tableName).where({ tenantId, listId }).update({ entries, entriesVersion: trx.raw('?? + 1', ['entriesVersion']) });
        await this.deps.db.model(AuditLogModel).query(trx).insert({
            tenantId,
            actor: ctx.clientId,
            action: 'update',
            kind: statusListKind.kind,
            resourceId: listId,
            changes,
            createdAt: new Date().toISOString()
        });
        return changes.length;
    }
}
