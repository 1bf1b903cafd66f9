import { insideTransaction } from './db/database';
import type { KindRef } from './registry/kind';
import type { Registry } from './registry/registry';

/** A resource the registry reports as created, updated or deleted. */
export interface Change {
    tenantId: string | null;
    id: string;
}

/** Which entries a change drops: one key, every entry ('all'), or none (undefined). */
export type DropRule<K extends readonly string[]> = (change: Change) => K | 'all' | undefined;

/** A change drops its tenant's entry (a change outside any tenant drops nothing). */
export const changedTenant: DropRule<[tenantId: string]> = (change) => (change.tenantId ? [change.tenantId] : undefined);

/** A change drops the entry of the changed resource itself, keyed by tenant and id. */
export const changedResource: DropRule<[tenantId: string, id: string]> = (change) => (change.tenantId ? [change.tenantId, change.id] : undefined);

export interface ChangeCacheOptions<K extends readonly string[], V> {
    /** Reads the value of a key on a miss. */
    load: (...key: K) => Promise<V>;
    /**
     * How long a value may stand at most. Changes drop it at once: this process's own, and other workers' and
     * replicas' through the registry's change bus; the TTL only bounds staleness when a bus message was lost (a
     * dropped listening connection). Without it a value stands until a change arrives.
     */
    ttlMs?: number;
}

/**
 * The cache of configuration state read on hot paths: a value per key (a tenant, a tenant's resource, a client),
 * read through `load`. Concurrent misses share one read (outside transactions: see get); a failed read is not kept, so the next call reads again;
 * an entry is dropped when the registry reports a change of a kind it is built from (`dropOnChange`), and read
 * again once older than `ttlMs`.
 */
export class ChangeCache<K extends readonly string[], V> {
    private readonly entries = new Map<string, { at: number; value: Promise<V> }>();

    constructor(private readonly options: ChangeCacheOptions<K, V>) {}

    get(...key: K): Promise<V> {
        // Inside a write transaction a read goes to the transaction and is neither shared nor kept: it may see what
        // is not committed yet, and a shared read made outside would wait for the connection (SQLite has one) that
        // the transaction holds while the transaction waits for it.
        if (insideTransaction()) {
            return this.options.load(...key);
        }
        const id = key.join('\u0000');
        const hit = this.entries.get(id);
        if (hit && (this.options.ttlMs === undefined || Date.now() - hit.at < this.options.ttlMs)) {
            return hit.value;
        }
        const entry = { at: Date.now(), value: this.options.load(...key) };
        // Only this read's own entry goes: a newer one (after a change) stays.
        entry.value.catch(() => this.entries.get(id) === entry && this.entries.delete(id));
        this.entries.set(id, entry);
        return entry.value;
    }

    delete(...key: K): void {
        this.entries.delete(key.join('\u0000'));
    }

    clear(): void {
        this.entries.clear();
    }

    /** Drops what `rule` names whenever a resource of one of `kinds` changes, here or in a peer (Registry.onChange). */
    dropOnChange(registry: Pick<Registry, 'onChange'>, kinds: ReadonlyArray<KindRef<unknown>>, rule: DropRule<K>): this {
        for (const kind of kinds) {
            registry.onChange(kind, (tenantId, id) => {
                const drop = rule({ tenantId, id });
                if (drop === 'all') {
                    this.clear();
                }
                else if (drop) {
                    this.delete(...drop);
                }
            });
        }
        return this;
    }
}
