import Crypto from 'node:crypto';
import * as X509 from '@peculiar/x509';
import type { Logger } from 'pino';
import type { Database } from '../../../lib/db/database';
import { outboundRequest, OutboundBlockedError, OutboundRequestError, type OutboundPolicy } from '../../../lib/outbound';
import type { Registry } from '../../../lib/registry/registry';
import { VerificationFailure } from '../../../lib/verify/failures';
import type { TrustAnchor } from '../../../lib/verify/trust';
import { trustListKind, type TrustList } from '../../../resources/trust-list';
import { parseTrustList, TrustListError, type ParsedTrustList } from './list-formats';

/**
 * Remote trust lists (a TrustList with a `url`): fetched through the outbound guard, signature-checked against the
 * list's signerCertificates (list-formats.ts), and kept as a snapshot in the database until the list's NextUpdate.
 *
 * - A snapshot is used while NextUpdate is ahead; past it the list is fetched again, and when that fails the list is
 *   unavailable (trust_list_unavailable: fail closed, never the expired content).
 * - The background job (REFRESH_JOB, graphile-worker on PostgreSQL so once across replicas, timers on SQLite)
 *   fetches every snapshot whose refresh time has come: half-way to NextUpdate, at most REFRESH_INTERVAL_MS after the
 *   last fetch. A failed refresh keeps the snapshot (still valid until NextUpdate) and is tried again next run.
 * - Each process keeps what it read for MEMORY_TTL_MS, so a refresh by another replica is seen within that time.
 * - A snapshot belongs to one configuration of the list (url + signer certificates, configDigest): a changed list
 *   is fetched anew at its next use.
 */

export const REFRESH_JOB = 'trust-lists:refresh';
export const REFRESH_INTERVAL_MS = 60 * 60_000;
const MEMORY_TTL_MS = 10_000;
/**
 * After a failed fetch the list stays unavailable for this long without another attempt: a list server that is down
 * or slow must not make every presentation wait for its timeout (the refresh job still tries at each run).
 */
export const FAILURE_BACKOFF_MS = 5_000;
/** National trusted lists reach a few MiB; anything beyond this is refused (too-large → unavailable). */
export const MAX_LIST_BYTES = 16 * 1024 * 1024;
export const DEFAULT_FETCH_TIMEOUT_MS = 10_000;

export interface TrustListSnapshot {
    anchors: TrustAnchor[];
    format: ParsedTrustList['format'];
    nextUpdate: number;
    fetchedAt: number;
    refreshAt: number;
}

interface SnapshotRow {
    tenantId: string;
    listId: string;
    configDigest: string;
    anchors: string;
    format: string;
    nextUpdate: string | number;
    fetchedAt: string | number;
    refreshAt: string | number;
}

export interface RemoteTrustListsOptions {
    db: Database;
    registry: Registry;
    outbound: OutboundPolicy;
    log: Logger;
    /** Whole fetch (resolution, connection, body); a slower list server makes the list unavailable. */
    fetchTimeoutMs?: number;
    now?: () => number;
}

/** The configuration a snapshot was made from: what makes the fetched content trustworthy. */
export const configDigest = (list: Pick<TrustList, 'url' | 'signerCertificates'>): string =>
    Crypto.createHash('sha256').update(JSON.stringify([list.url, [...list.signerCertificates ?? []].map((pem) => pem.replace(/\s+/g, '')).sort()])).digest('hex');

const unavailable = (list: TrustList, reason: string): VerificationFailure =>
    VerificationFailure.coded('trust_list_unavailable', `trust list ${list.id}: ${reason}`);

export class RemoteTrustLists {
    private readonly memory = new Map<string, { snapshot: TrustListSnapshot; digest: string; readAt: number }>();
    private readonly inFlight = new Map<string, Promise<TrustListSnapshot>>();
    private readonly failures = new Map<string, { digest: string; until: number; failure: VerificationFailure }>();
    private readonly now: () => number;

    constructor(private readonly deps: RemoteTrustListsOptions) {
        this.now = deps.now ?? Date.now;
    }

    private get knex() {
        return this.deps.db.knex;
    }

    /**
     * The anchors of a remote list, from a valid snapshot or a fetch now. Throws trust_list_unavailable when the list
     * cannot be fetched, parsed or signature-checked, or when its NextUpdate has passed.
     */
    async anchors(tenantId: string, list: TrustList): Promise<TrustAnchor[]> {
        if (!list.url) {
            return [];
        }
        const digest = configDigest(list);
        const key = `${tenantId}\u0000${list.id}`;
        const now = this.now();
        let cached = this.memory.get(key);
        if (!cached || cached.digest !== digest || now - cached.readAt > MEMORY_TTL_MS) {
            const stored = await this.read(tenantId, list.id, digest);
            cached = stored ? { snapshot: stored, digest, readAt: now } : undefined;
            if (cached) {
                this.memory.set(key, cached);
            }
            else {
                this.memory.delete(key);
            }
        }
        if (cached && now < cached.snapshot.nextUpdate) {
            return cached.snapshot.anchors;
        }
        const failed = this.failures.get(key);
        if (failed && failed.digest === digest && now < failed.until) {
            throw failed.failure;
        }
        // None yet, or NextUpdate passed: fetch now (one fetch per list at a time, whoever asks).
        return (await this.refresh(tenantId, list)).anchors;
    }

    /** Fetches, checks and stores the list; throws trust_list_unavailable (the stored snapshot stays as it was). */
    refresh(tenantId: string, list: TrustList): Promise<TrustListSnapshot> {
        const key = `${tenantId}\u0000${list.id}`;
        const running = this.inFlight.get(key);
        if (running) {
            return running;
        }
        const fetching = this.fetchAndStore(tenantId, list)
            .then((snapshot) => {
                this.failures.delete(key);
                return snapshot;
            }, (err: unknown) => {
                if (err instanceof VerificationFailure) {
                    this.failures.set(key, { digest: configDigest(list), until: this.now() + FAILURE_BACKOFF_MS, failure: err });
                }
                throw err;
            })
            .finally(() => this.inFlight.delete(key));
        this.inFlight.set(key, fetching);
        return fetching;
    }

    private async fetchAndStore(tenantId: string, list: TrustList): Promise<TrustListSnapshot> {
        const parsed = await this.fetch(list);
        const fetchedAt = this.now();
        const nextUpdate = parsed.nextUpdate.getTime();
        const snapshot: TrustListSnapshot = {
            anchors: parsed.anchors,
            format: parsed.format,
            nextUpdate,
            fetchedAt,
            refreshAt: fetchedAt + Math.max(1000, Math.min(REFRESH_INTERVAL_MS, Math.floor((nextUpdate - fetchedAt) / 2)))
        };
        const digest = configDigest(list);
        const row = {
            tenantId: tenantId,
            listId: list.id,
            configDigest: digest,
            anchors: JSON.stringify(snapshot.anchors),
            format: snapshot.format,
            nextUpdate: snapshot.nextUpdate,
            fetchedAt: snapshot.fetchedAt,
            refreshAt: snapshot.refreshAt
        };
        await this.knex('trust_list_snapshots').insert(row).onConflict(['tenantId', 'listId']).merge();
        this.memory.set(`${tenantId}\u0000${list.id}`, { snapshot, digest, readAt: fetchedAt });
        this.deps.log.debug({ tenantId, trustList: list.id, anchors: snapshot.anchors.length, nextUpdate: new Date(nextUpdate).toISOString() }, 'remote trust list loaded');
        return snapshot;
    }

    private async fetch(list: TrustList): Promise<ParsedTrustList> {
        let signers: X509.X509Certificate[];
        try {
            signers = (list.signerCertificates ?? []).map((pem) => new X509.X509Certificate(pem));
        }
        catch {
            throw unavailable(list, 'a signer certificate does not parse');
        }
        let body: string;
        try {
            const response = await outboundRequest(this.deps.outbound, list.url!, {
                method: 'GET',
                headers: { accept: 'application/xml, text/xml, application/jwt, application/json;q=0.5' },
                timeoutMs: this.deps.fetchTimeoutMs ?? DEFAULT_FETCH_TIMEOUT_MS,
                maxResponseBytes: MAX_LIST_BYTES
            });
            if (response.status !== 200) {
                throw unavailable(list, `the list server answered HTTP ${response.status}`);
            }
            body = response.text();
        }
        catch (err) {
            if (err instanceof OutboundBlockedError || err instanceof OutboundRequestError) {
                // Their messages name scheme, host and port only.
                throw unavailable(list, err.message);
            }
            throw err;
        }
        let parsed: ParsedTrustList;
        try {
            parsed = await parseTrustList(body, signers, new Date(this.now()));
        }
        catch (err) {
            if (err instanceof TrustListError) {
                throw unavailable(list, err.message);
            }
            throw err;
        }
        if (parsed.nextUpdate.getTime() <= this.now()) {
            throw unavailable(list, `its NextUpdate ${parsed.nextUpdate.toISOString()} has passed`);
        }
        return parsed;
    }

    private async read(tenantId: string, listId: string, digest: string): Promise<TrustListSnapshot | undefined> {
        const row = await this.knex<SnapshotRow>('trust_list_snapshots').where({ tenantId: tenantId, listId: listId }).first();
        if (!row || row.configDigest !== digest) {
            return undefined;
        }
        return {
            anchors: JSON.parse(row.anchors) as TrustAnchor[],
            format: row.format as ParsedTrustList['format'],
            nextUpdate: Number(row.nextUpdate),
            fetchedAt: Number(row.fetchedAt),
            refreshAt: Number(row.refreshAt)
        };
    }

    /**
     * A list that was just written is fetched in the background (a deleted one loses its snapshot), so the first presentation does not wait for it (and
     * a wrong url or signer shows in the log at once). Failures are logged only: the list is then fetched at first use.
     */
    prefetch(tenantId: string, listId: string): void {
        void (async () => {
            const stored = await this.deps.registry.get({ tenantId, clientId: 'system:trust-lists', roles: [] }, trustListKind, listId);
            if (stored?.spec.url) {
                await this.refresh(tenantId, stored.spec);
            }
            else {
                // Deleted, or no longer remote: its content must not linger.
                this.memory.delete(`${tenantId}\u0000${listId}`);
                await this.knex('trust_list_snapshots').where({ tenantId, listId }).delete();
            }
        })().catch((err: unknown) => {
            this.deps.log.warn({ tenantId, trustList: listId, detail: err instanceof VerificationFailure ? err.detail : (err as Error).message }, 'remote trust list could not be loaded after it was written');
        });
    }

    /**
     * The background refresh: every snapshot whose refresh time has come is fetched again; snapshots of lists that
     * are gone or no longer remote are deleted. Failures are logged and retried at the next run; the old snapshot
     * serves until its NextUpdate.
     */
    async refreshDue(): Promise<{ refreshed: number; failed: number; removed: number }> {
        const due = await this.knex<SnapshotRow>('trust_list_snapshots').where('refreshAt', '<=', this.now()).select('tenantId', 'listId', 'configDigest');
        let refreshed = 0;
        let failed = 0;
        let removed = 0;
        for (const row of due) {
            const stored = await this.deps.registry.get({ tenantId: row.tenantId, clientId: 'system:trust-lists', roles: [] }, trustListKind, row.listId);
            if (!stored?.spec.url) {
                await this.knex('trust_list_snapshots').where({ tenantId: row.tenantId, listId: row.listId }).delete();
                removed++;
                continue;
            }
            try {
                await this.refresh(row.tenantId, stored.spec);
                refreshed++;
            }
            catch (err) {
                if (!(err instanceof VerificationFailure)) {
                    throw err;
                }
                failed++;
                this.deps.log.warn({ tenantId: row.tenantId, trustList: row.listId, detail: err.detail }, 'remote trust list refresh failed; the last verified content serves until its NextUpdate');
            }
        }
        return { refreshed, failed, removed };
    }
}

/**
 * The remote list loader of a server, found through its registry: the trust plugin attaches it when it registers,
 * and the consumers (TrustAnchors of the oid4vp and oid4vci plugins) look it up at use. A manifest without the
 * trust plugin has none, and url lists stay unavailable there (fail closed).
 */
const loaders = new WeakMap<Registry, RemoteTrustLists>();

export const attachRemoteTrustLists = (registry: Registry, lists: RemoteTrustLists): void => {
    loaders.set(registry, lists);
};

export const remoteTrustListsOf = (registry: Registry): RemoteTrustLists | undefined => loaders.get(registry);
