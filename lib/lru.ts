/**
 * A map that keeps the `limit` entries used last: a hit moves its entry to the end of the Map's order, an insert
 * beyond the limit drops the first. For memos of derived values (imported keys, parsed queries) whose inputs come
 * from callers and must not grow the process without bound.
 */
export class LruMap<K, V> {
    private readonly entries = new Map<K, V>();

    constructor(private readonly limit: number) {}

    get(key: K): V | undefined {
        const value = this.entries.get(key);
        if (value !== undefined) {
            this.entries.delete(key);
            this.entries.set(key, value);
        }
        return value;
    }

    set(key: K, value: V): void {
        this.entries.delete(key);
        if (this.entries.size >= this.limit) {
            this.entries.delete(this.entries.keys().next().value!);
        }
        this.entries.set(key, value);
    }

    get size(): number {
        return this.entries.size;
    }
}
