import Crypto from 'node:crypto';
import type { Knex } from 'knex';
import type { Database } from '../../../lib/db/database';
import { UnavailableError } from '../../../lib/errors';
import type { StoredResource } from '../../../lib/registry/kind';
import type { Registry } from '../../../lib/registry/registry';
import type { CredentialConfig } from '../../../resources/credential-config';
import { statusListKind, type StatusList } from '../../../resources/status-list';
import type { CredentialStatusProvider, StatusAllocation, StatusAllocationRequest } from '../../oid4vci/services/credentials';
import { StatusListStateModel } from '../models';
import { isAllocated, type StatusEntryService } from './entries';
import { systemContext, type StatusListService } from './status-lists';

/** Random draws before falling back to counting free indexes: a list is rarely so full that all of them miss. */
const RANDOM_DRAWS = 16;

/** Set bits of every byte value: the counting pass over a list of millions of indexes looks at bytes, not bits. */
const TAKEN_BITS = Array.from({ length: 256 }, (_, byte) => byte.toString(2).split('1').length - 1);

/**
 * A free index of the list, uniformly at random among the free ones: random draws first, and when they keep hitting
 * taken indexes (a nearly full list) the k-th free index for a random k. Both are uniform over the free indexes, so
 * an index says nothing about when it was handed out.
 */
export const randomFreeIndex = (allocated: Buffer, capacity: number, used: number): number => {
    for (let draw = 0; draw < RANDOM_DRAWS; draw++) {
        const idx = Crypto.randomInt(capacity);
        if (!isAllocated(allocated, idx)) {
            return idx;
        }
    }
    let k = Crypto.randomInt(capacity - used);
    for (let byte = 0; byte * 8 < capacity; byte++) {
        const bitsHere = Math.min(8, capacity - byte * 8);
        // Only the last byte may hold bits past the capacity; they are no indexes, whatever their value.
        const free = bitsHere - TAKEN_BITS[allocated[byte]! & ((1 << bitsHere) - 1)]!;
        if (k >= free) {
            k -= free;
            continue;
        }
        for (let bit = 0; bit < bitsHere; bit++) {
            if (!((allocated[byte]! >> bit) & 1) && k-- === 0) {
                return byte * 8 + bit;
            }
        }
    }
    throw new Error('The allocation bitmap has fewer free indexes than its used count says');
};

/** Where a configuration's credentials get their entries: lists of this bit size, shared or bound to it. */
interface Layout {
    bits: StatusList['bits'];
    credentialConfigurationId?: string;
}

/**
 * Index allocation for issued credentials (the status plugin's CredentialStatusProvider). Atomic on both databases:
 * the layout is serialised by a transaction-scoped advisory lock on PostgreSQL (so two issuances never both create a
 * new list for it) and the state row is read FOR UPDATE; SQLite has one writer. The primary key of
 * status_allocations refuses a duplicate index whatever happens.
 */
export class StatusAllocationService implements CredentialStatusProvider {
    constructor(private readonly deps: { db: Database; registry: Registry; lists: StatusListService; entries: StatusEntryService }) {}

    private async layout(tenantId: string, credential: CredentialConfig): Promise<Layout> {
        const bits = credential.status?.bits ?? (await this.deps.lists.tenantDefaults(tenantId)).bits;
        return credential.status?.credentialConfigurationBound ? { bits, credentialConfigurationId: credential.id } : { bits };
    }

    async allocate(request: StatusAllocationRequest): Promise<StatusAllocation[]> {
        const { tenantId, credential, count } = request;
        const layout = await this.layout(tenantId, credential);
        const { db } = this.deps;
        return db.transaction(async (trx) => {
            if (db.dialect === 'postgres') {
                await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`hallmark:status-allocation:${tenantId}:${layout.bits}:${layout.credentialConfigurationId ?? ''}`]);
            }
            const allocations: StatusAllocation[] = [];
            while (allocations.length < count) {
                const { list, state } = await this.listWithRoom(trx, tenantId, layout) ?? await this.newList(trx, tenantId, layout);
                const { id: listId, capacity } = list.spec;
                const allocated = Buffer.from(state.allocated);
                const take = Math.min(count - allocations.length, capacity - state.used);
                const rows = [];
                for (let n = 0; n < take; n++) {
                    const idx = randomFreeIndex(allocated, capacity, state.used + n);
                    allocated[idx >> 3] = allocated[idx >> 3]! | (1 << (idx & 7));
                    rows.push({
                        tenantId,
                        listId,
                        idx,
                        sessionId: request.sessionId,
                        credentialConfigurationId: credential.id,
                        subjectHash: request.subjectHash ?? null,
                        createdAt: new Date().toISOString()
                    });
                    allocations.push({ listId, idx, status: { status_list: { idx, uri: this.deps.lists.uri(tenantId, listId) } } });
                }
                await trx(StatusListStateModel.tableName).where({ tenantId, listId }).update({ allocated, used: state.used + take });
                await trx('status_allocations').insert(rows);
            }
            return allocations;
        });
    }

    async supersede(request: { tenantId: string; credentialConfigurationId: string; subjectHash: string; issued: StatusAllocation[] }): Promise<number> {
        return this.deps.entries.supersede(request.tenantId, request.credentialConfigurationId, request.subjectHash, request.issued);
    }

    /** The oldest list of the layout with a free index, its state row locked. */
    private async listWithRoom(trx: Knex, tenantId: string, layout: Layout): Promise<{ list: StoredResource<StatusList>; state: Pick<StatusListStateModel, 'allocated' | 'used'> } | undefined> {
        const lists = (await this.deps.registry.list(systemContext(tenantId), statusListKind))
            .filter(({ spec }) => spec.bits === layout.bits && spec.credentialConfigurationId === layout.credentialConfigurationId)
            .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.spec.id.localeCompare(b.spec.id));
        if (!lists.length) {
            return undefined;
        }
        const used = new Map((await trx(StatusListStateModel.tableName).where({ tenantId }).whereIn('listId', lists.map((l) => l.spec.id)).select('listId', 'used') as Array<{ listId: string; used: number }>)
            .map((row) => [row.listId, row.used]));
        for (const list of lists.filter((l) => (used.get(l.spec.id) ?? l.spec.capacity) < l.spec.capacity)) {
            const state = await this.lockedState(trx, tenantId, list.spec.id);
            if (state && state.used < list.spec.capacity) {
                return { list, state };
            }
        }
        return undefined;
    }

    private async lockedState(trx: Knex, tenantId: string, listId: string): Promise<Pick<StatusListStateModel, 'allocated' | 'used'> | undefined> {
        const query = trx(StatusListStateModel.tableName).where({ tenantId, listId }).first('allocated', 'used');
        return await (this.deps.db.dialect === 'postgres' ? query.forUpdate() : query);
    }

    /** A new list of the layout with the tenant's default capacity, made through the registry (audited like any list). */
    private async newList(trx: Knex, tenantId: string, layout: Layout): Promise<{ list: StoredResource<StatusList>; state: Pick<StatusListStateModel, 'allocated' | 'used'> }> {
        const { lists, registry } = this.deps;
        const keyChainId = await lists.defaultKeyChain(tenantId);
        if (!keyChainId) {
            throw new UnavailableError('The tenant has no statusList or attestation key chain to sign a new status list with');
        }
        const spec: StatusList = { id: Crypto.randomUUID(), ...layout, capacity: (await lists.tenantDefaults(tenantId)).capacity, keyChainId };
        const { resource } = await registry.write(systemContext(tenantId), statusListKind, spec, { mode: 'create' });
        return { list: resource, state: (await this.lockedState(trx, tenantId, spec.id))! };
    }
}
