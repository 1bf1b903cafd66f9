import type { Database } from '../../../lib/db/database';
import type { SessionStatus } from '../models/session';
import type { Logger } from '../../../lib/logging';
import type { SessionService } from './session-service';

/** A session's state as an event stream reports it. */
export interface SessionChange {
    id: string;
    tenantId: string;
    status: SessionStatus;
    updatedAt: string;
}

/** A change of a watched session, or the news that it no longer exists (deleted, or removed by the cleanup). */
export type SessionFeedEvent = ({ kind: 'change' } & SessionChange) | { kind: 'gone'; id: string };

export type SessionFeedListener = (event: SessionFeedEvent) => void;

export interface SessionChangeFeedOptions {
    /** How often the watched sessions are read while at least one is watched; default 500 ms. */
    pollIntervalMs?: number;
    log?: Logger;
}

interface Watched {
    listeners: Set<SessionFeedListener>;
    /** The last state seen (by the poll or an in-process change); undefined until the first sighting. */
    last?: SessionChange | 'gone';
}

/** Bound parameters per `where id in (...)`: well under the limits of both dialects. */
const IDS_PER_QUERY = 500;

const iso = (value: unknown): string => (value instanceof Date ? value.toISOString() : String(value));

/**
 * Status changes of sessions, from any server process on the same database. Two sources: SessionService's
 * in-process listeners (instant, this process only) and a poll of the watched ids (every `pollIntervalMs`, sees
 * every replica and the maintenance job, on both dialects, without triggers). The poll runs only while something
 * is watched, reads one indexed statement per 500 watched ids, and emits when status or updatedAt differ from what
 * was last seen; the first sighting of an id is emitted too, so a watcher never misses a change that happened
 * between reading a session and starting to watch it. Listeners may receive a state more than once, or an older
 * state after a newer one from the other source: they should keep the furthest status they have seen.
 */
export class SessionChangeFeed {
    private readonly watched = new Map<string, Watched>();
    private readonly pollIntervalMs: number;
    private timer?: NodeJS.Timeout;
    private polling = false;
    private closed = false;

    constructor(private readonly db: Database, sessions: SessionService, private readonly options: SessionChangeFeedOptions = {}) {
        this.pollIntervalMs = options.pollIntervalMs ?? 500;
        sessions.onStatusChange((change) => {
            const entry = this.watched.get(change.id);
            if (entry) {
                this.emit(entry, { kind: 'change', ...change });
            }
        });
    }

    /** Number of watched sessions (tests and metrics). */
    get size(): number {
        return this.watched.size;
    }

    /** Calls `listener` on every change of the session until the returned function is called. */
    watch(id: string, listener: SessionFeedListener): () => void {
        if (this.closed) {
            throw new Error('The session change feed is closed');
        }
        let entry = this.watched.get(id);
        if (!entry) {
            entry = { listeners: new Set() };
            this.watched.set(id, entry);
        }
        // A wrapper per call, so the same function watched twice is also unwatched twice.
        const wrapped: SessionFeedListener = (event) => listener(event);
        entry.listeners.add(wrapped);
        this.schedule();
        let active = true;
        // A session already watched has been sighted: the newcomer gets that state as its first sighting.
        const known = entry.last;
        if (known) {
            queueMicrotask(() => {
                if (active) {
                    this.emitTo(new Set([wrapped]), known === 'gone' ? { kind: 'gone', id } : { kind: 'change', ...known });
                }
            });
        }
        return () => {
            if (!active) {
                return;
            }
            active = false;
            const current = this.watched.get(id);
            current?.listeners.delete(wrapped);
            if (current && !current.listeners.size) {
                this.watched.delete(id);
            }
            if (!this.watched.size) {
                clearTimeout(this.timer);
                this.timer = undefined;
            }
        };
    }

    /** Stops polling and drops every watcher. */
    close(): void {
        this.closed = true;
        clearTimeout(this.timer);
        this.timer = undefined;
        this.watched.clear();
    }

    private schedule(): void {
        if (this.timer || this.polling || this.closed || !this.watched.size) {
            return;
        }
        this.timer = setTimeout(() => {
            this.timer = undefined;
            void this.poll();
        }, this.pollIntervalMs);
        // Open streams keep their sockets, and with them the process, alive; the timer need not.
        this.timer.unref();
    }

    private async poll(): Promise<void> {
        this.polling = true;
        try {
            const ids = [...this.watched.keys()];
            for (let i = 0; i < ids.length && !this.closed; i += IDS_PER_QUERY) {
                const batch = ids.slice(i, i + IDS_PER_QUERY);
                const rows = await this.db.knex('sessions').select('id', 'tenantId', 'status', 'updatedAt').whereIn('id', batch) as Array<Record<string, unknown>>;
                const found = new Set<string>();
                for (const row of rows) {
                    const id = String(row.id);
                    found.add(id);
                    const entry = this.watched.get(id);
                    if (entry) {
                        this.emit(entry, { kind: 'change', id, tenantId: String(row.tenantId), status: row.status as SessionStatus, updatedAt: iso(row.updatedAt) });
                    }
                }
                for (const id of batch) {
                    const entry = this.watched.get(id);
                    if (entry && !found.has(id) && entry.last !== 'gone') {
                        entry.last = 'gone';
                        this.emitTo(entry.listeners, { kind: 'gone', id });
                    }
                }
            }
        }
        catch (err) {
            // A failed read is retried on the next tick; the watchers keep waiting.
            this.options.log?.warn({ err }, 'session change feed: polling failed');
        }
        finally {
            this.polling = false;
            this.schedule();
        }
    }

    /** Emits a change when it differs from the last state seen. */
    private emit(entry: Watched, event: Extract<SessionFeedEvent, { kind: 'change' }>): void {
        if (entry.last && entry.last !== 'gone' && entry.last.status === event.status && entry.last.updatedAt === event.updatedAt) {
            return;
        }
        entry.last = { id: event.id, tenantId: event.tenantId, status: event.status, updatedAt: event.updatedAt };
        this.emitTo(entry.listeners, event);
    }

    private emitTo(listeners: Set<SessionFeedListener>, event: SessionFeedEvent): void {
        for (const listener of [...listeners]) {
            try {
                listener(event);
            }
            catch (err) {
                this.options.log?.error({ err, sessionId: event.id }, 'session change feed: a listener failed');
            }
        }
    }
}
