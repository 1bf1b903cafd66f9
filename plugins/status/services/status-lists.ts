import Crypto from 'node:crypto';
import { promisify } from 'node:util';
import Zlib from 'node:zlib';
import { ChangeCache, changedResource } from '../../../lib/cache';
import type { Database } from '../../../lib/db/database';
import { dialectOf } from '../../../lib/db/knex';
import { ConflictError, UnavailableError } from '../../../lib/errors';
import { tenantOf, type ResourceStore, type StoredResource, type TenantContext } from '../../../lib/registry/kind';
import type { Registry } from '../../../lib/registry/registry';
import { tableResourceStore } from '../../../lib/registry/resource-store';
import { keyChainOfUsage } from '../../../resources/key-chain';
import { statusListKind, type StatusList } from '../../../resources/status-list';
import { tenantKind, type StatusListDefaults } from '../../../resources/tenant';
import type { SigningService } from '../../kms/services/signing';
import { StatusListStateModel } from '../models';
import { signStatusListCwt, signStatusListJwt } from './token-forms';

/** The tenant defaults when it sets no statusListConfig. */
export const DEFAULT_STATUS_LIST_CONFIG: StatusListDefaults = { bits: 1, capacity: 100_000, ttlSeconds: 3600, immediateUpdate: false };

/** Token ttl when the tenant sets no statusListConfig. */
export const DEFAULT_TTL_SECONDS = DEFAULT_STATUS_LIST_CONFIG.ttlSeconds;

/**
 * How long this process serves a token from memory before looking at the database again: the bound on how late it
 * sees a token another replica published. immediateUpdate lists still compare the entries version on every GET.
 */
export const TOKEN_CACHE_TTL_MS = 5000;

/** How long a process's claim to sign a list stands (it signs well within it; a dead process's claim lapses). */
const SIGNING_CLAIM_MS = 10_000;

/** How long a publish waits for another process's signature before signing itself. */
const SIGNING_WAIT_MS = 2000;
const SIGNING_POLL_MS = 25;

const deflate = promisify(Zlib.deflate);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const systemContext = (tenantId: string): TenantContext => ({ tenantId, clientId: 'system:status', roles: [] });

/** Bytes holding `capacity` entries of `bits` bits. */
const entryBytes = (bits: number, capacity: number) => Math.ceil((bits * capacity) / 8);

const STATES = StatusListStateModel.tableName;

/** The list's configuration is an ordinary document; its entries live beside it, made with it and gone with it. */
export const statusListStore: ResourceStore<StatusList> = {
    get: tableResourceStore.get,
    list: tableResourceStore.list,
    async put(scope, id, resource, existing) {
        await tableResourceStore.put(scope, id, resource, existing);
        const tenantId = tenantOf(scope);
        if (!existing) {
            const { bits, capacity } = resource.spec;
            await scope.trx(STATES).insert({
                tenantId,
                listId: id,
                entries: Buffer.alloc(entryBytes(bits, capacity)),
                allocated: Buffer.alloc(Math.ceil(capacity / 8)),
                used: 0,
                createdAt: new Date().toISOString()
            });
        }
        else {
            // The layout is immutable, but the signing chain may change: the cached token is stale from now on (the
            // publishing job, or the next GET with immediateUpdate, re-signs it; it stays valid meanwhile).
            await scope.trx(STATES).where({ tenantId, listId: id }).update({ tokenVersion: null });
        }
    },
    async delete(scope, id) {
        const state = scope.trx(STATES).where({ tenantId: tenantOf(scope), listId: id });
        // Locked like an allocation locks it: an allocation committing meanwhile is seen, never deleted with the row.
        const read = state.clone().first('used');
        const row = await (dialectOf(scope.trx) === 'postgres' ? read.forUpdate() : read);
        if (row && row.used > 0) {
            throw new ConflictError(`Status list ${id} has ${row.used} allocated entries`);
        }
        await state.clone().delete();
        await tableResourceStore.delete(scope, id);
    }
};

export interface StatusListView {
    id: string;
    uri: string;
    bits: number;
    capacity: number;
    used: number;
    credentialConfigurationId?: string;
    keyChainId?: string;
    createdAt: string;
}

/** The signed token of a list in both forms, with what decides when it is re-signed. */
export interface StatusListToken {
    /** The compact JWS as bytes: served as they are, with no string encoding per response. */
    jwt: { body: Buffer; etag: string };
    cwt: { body: Buffer; etag: string };
    /** The entries version it signed. */
    version: number;
    /** The ttl claim (seconds). */
    ttl: number;
    /** Due for re-signing from then (ms since the epoch): iat + ttl. */
    refreshAt: number;
    /** exp (ms since the epoch): iat + 2 ttl, so a copy a relying party keeps for max-age never outlives it. */
    expiresAt: number;
}

/** What a GET needs from memory: the list's token and whether its tenant publishes changes at once. */
interface Snapshot {
    immediateUpdate: boolean;
    /** The tenant's ttl now: a token signed under a longer one is due once it has served this long. */
    ttlSeconds: number;
    token?: StatusListToken;
}

/** The token columns of a state row (never the entries, which may be megabytes). */
interface TokenRow {
    entriesVersion: number;
    tokenVersion: number | null;
    token: string | null;
    tokenEtag: string | null;
    tokenCwt: Buffer | null;
    tokenCwtEtag: string | null;
    tokenRefreshAt: string | Date | null;
    tokenExpiresAt: string | Date | null;
}

const TOKEN_COLUMNS = ['entriesVersion', 'tokenVersion', 'token', 'tokenEtag', 'tokenCwt', 'tokenCwtEtag', 'tokenRefreshAt', 'tokenExpiresAt'] as const;

/** PostgreSQL answers timestamps as Dates, SQLite as the ISO strings written. */
const millis = (value: string | Date | null): number => (value === null ? NaN : new Date(value).getTime());

/**
 * The cached token of a row; none when it lacks a form (e.g. cached before the CWT form existed). A token whose
 * version was cleared (its list document changed) is stale but still valid: it is served until re-signed.
 */
const tokenOf = (row: TokenRow | undefined): StatusListToken | undefined => {
    if (!row?.token || !row.tokenEtag || !row.tokenCwt || !row.tokenCwtEtag) {
        return undefined;
    }
    const refreshAt = millis(row.tokenRefreshAt);
    const expiresAt = millis(row.tokenExpiresAt);
    return {
        jwt: { body: Buffer.from(row.token, 'ascii'), etag: row.tokenEtag },
        cwt: { body: Buffer.from(row.tokenCwt), etag: row.tokenCwtEtag },
        // No entries version is ever -1: a cleared version never counts as current.
        version: row.tokenVersion ?? -1,
        // The ttl it was signed with (refresh at iat + ttl, expiry at iat + 2 ttl), whatever the tenant's is now.
        ttl: Math.round((expiresAt - refreshAt) / 1000),
        refreshAt,
        expiresAt
    };
};

type Freshness = Pick<TokenRow, 'entriesVersion' | 'tokenVersion' | 'tokenRefreshAt'>;

/**
 * The entries changed since the cached token was signed, or it is due: its refresh time has come, or lies further
 * ahead than the tenant's ttl now allows (the ttl was shortened since it was signed).
 */
const changedOrDue = (row: Freshness, now: number, ttlSeconds: number): boolean => {
    const refreshAt = millis(row.tokenRefreshAt);
    return row.tokenVersion !== row.entriesVersion || !(refreshAt > now) || refreshAt > now + ttlSeconds * 1000;
};

/** No token is cached, or the cached one is changed or due. */
const isStale = (row: Freshness & Pick<TokenRow, 'token'>, now: number, ttlSeconds: number): boolean => !row.token || changedOrDue(row, now, ttlSeconds);

/** Whether a token is cached that is still valid (not expired), whatever its version. */
const hasValidToken = (row: Pick<TokenRow, 'token' | 'tokenExpiresAt'>, now: number): boolean => Boolean(row.token) && millis(row.tokenExpiresAt) > now;

const etagOf = (body: string | Uint8Array) => Crypto.createHash('sha256').update(body).digest('base64url').slice(0, 32);

export interface StatusListDeps {
    db: Database;
    registry: Registry;
    signing: SigningService;
    publicUrl: string;
}

/**
 * Status lists of a tenant: their URIs, signing chains, and the signed token (IETF Token Status List, JWT and CWT).
 *
 * Freshness: the token records the entries version it signed (`token_version`); it is stale when that differs from
 * `entries_version` or it is due (ttl after signing). With the tenant's `immediateUpdate` a GET re-signs a stale
 * token, so a change is visible at the next GET on any replica; otherwise the publishing job re-signs stale tokens,
 * and a GET signs only when no valid token exists (none yet, or expired).
 */
export class StatusListService {
    /** Per list; dropped when the list or its tenant changes here, re-read after TOKEN_CACHE_TTL_MS for other replicas. */
    private readonly snapshots: ChangeCache<[tenantId: string, listId: string], Snapshot | undefined>;
    /** Per list: the publish in progress in this process; the next one waits for it, so they never sign twice at once. */
    private readonly publishing = new Map<string, Promise<unknown>>();
    /** Per list: the entries-version read in flight, and the one queued after it for GETs that arrived meanwhile. */
    private readonly versionReads = new Map<string, { current: Promise<number | undefined>; next?: Promise<number | undefined> }>();

    constructor(private readonly deps: StatusListDeps) {
        this.snapshots = new ChangeCache({ ttlMs: TOKEN_CACHE_TTL_MS, load: (tenantId: string, listId: string) => this.snapshot(tenantId, listId) })
            .dropOnChange(deps.registry, [statusListKind], changedResource)
            .dropOnChange(deps.registry, [tenantKind], () => 'all');
    }

    /** `{tenant base}/status-management/status-list/{listId}`: the token's `sub` and what credentials will carry. */
    uri(tenantId: string, listId: string): string {
        return `${this.deps.publicUrl}/issuers/${tenantId}/status-management/status-list/${listId}`;
    }

    /** The chain a list without its own keyChainId is signed with: the tenant's statusList chain, else its attestation chain. */
    async defaultKeyChain(tenantId: string): Promise<string | undefined> {
        return keyChainOfUsage(this.deps.registry, systemContext(tenantId), 'statusList', 'attestation');
    }

    /** The tenant's statusListConfig, or the defaults. */
    async tenantDefaults(tenantId: string): Promise<StatusListDefaults> {
        const config = (await this.deps.registry.get(systemContext(tenantId), tenantKind, tenantId))?.spec.statusListConfig;
        return config ?? DEFAULT_STATUS_LIST_CONFIG;
    }

    async view(tenantId: string, stored: StoredResource<StatusList>): Promise<StatusListView> {
        const { spec } = stored;
        const keyChainId = spec.keyChainId ?? await this.defaultKeyChain(tenantId);
        const state = await this.deps.db.knex(STATES).where({ tenantId, listId: spec.id }).first('used');
        return {
            id: spec.id,
            uri: this.uri(tenantId, spec.id),
            bits: spec.bits,
            capacity: spec.capacity,
            used: state?.used ?? 0,
            ...(spec.credentialConfigurationId ? { credentialConfigurationId: spec.credentialConfigurationId } : {}),
            ...(keyChainId ? { keyChainId } : {}),
            createdAt: stored.createdAt
        };
    }

    /**
     * The list's token for a GET, or undefined for an unknown list. From memory when it may be served: with
     * immediateUpdate after one indexed read of the entries version, otherwise while it is valid.
     */
    async token(tenantId: string, listId: string): Promise<StatusListToken | undefined> {
        const snapshot = await this.snapshots.get(tenantId, listId);
        if (!snapshot) {
            // Unknown ids are not kept: anyone may ask for any id, and the cache would grow with them.
            this.snapshots.delete(tenantId, listId);
            return undefined;
        }
        const { token } = snapshot;
        const now = Date.now();
        if (snapshot.immediateUpdate) {
            const ttlMs = snapshot.ttlSeconds * 1000;
            if (token && token.refreshAt > now && token.refreshAt <= now + ttlMs && await this.currentEntriesVersion(tenantId, listId) === token.version) {
                return token;
            }
            return this.publish(tenantId, listId, (row) => isStale(row, Date.now(), snapshot.ttlSeconds));
        }
        if (token && token.expiresAt > now) {
            return token;
        }
        return this.publish(tenantId, listId, (row) => !hasValidToken(row, Date.now()));
    }

    /**
     * Re-signs every stale cached token (changed entries, or due); the publishing job's work. Lists whose token was
     * never asked for are left until their first GET. Answers how many were signed.
     */
    async publishStale(log?: { warn: (obj: object, msg: string) => void }): Promise<number> {
        const now = Date.now();
        // The token itself is only tested for null, never read.
        const rows: Array<Freshness & { tenantId: string; listId: string }> = await this.deps.db.knex(STATES).whereNotNull('token')
            .select('tenantId', 'listId', 'entriesVersion', 'tokenVersion', 'tokenRefreshAt');
        let signed = 0;
        const ttls = new Map<string, number>();
        for (const row of rows) {
            if (!ttls.has(row.tenantId)) {
                ttls.set(row.tenantId, (await this.tenantDefaults(row.tenantId)).ttlSeconds);
            }
        }
        for (const row of rows.filter((r) => changedOrDue(r, now, ttls.get(r.tenantId)!))) {
            try {
                await this.publish(row.tenantId, row.listId, (current) => isStale(current, Date.now(), ttls.get(row.tenantId)!), () => signed++);
            }
            catch (err) {
                log?.warn({ err, tenantId: row.tenantId, listId: row.listId }, 'Status list not published');
            }
        }
        return signed;
    }

    private async snapshot(tenantId: string, listId: string): Promise<Snapshot | undefined> {
        const list = await this.deps.registry.get(systemContext(tenantId), statusListKind, listId);
        if (!list) {
            return undefined;
        }
        const config = await this.tenantDefaults(tenantId);
        const row: TokenRow | undefined = await this.deps.db.knex(STATES).where({ tenantId, listId }).first(...TOKEN_COLUMNS);
        const token = tokenOf(row);
        return { immediateUpdate: config.immediateUpdate, ttlSeconds: config.ttlSeconds, ...(token ? { token } : {}) };
    }

    /**
     * The entries version as committed when this call was made. Concurrent GETs share reads: a read already in flight
     * may have started before a change this caller must see, so a caller arriving during one joins the single read
     * queued after it. One read in flight and one queued per list, however many GETs wait.
     */
    private currentEntriesVersion(tenantId: string, listId: string): Promise<number | undefined> {
        const key = `${tenantId}\u0000${listId}`;
        const slot = this.versionReads.get(key);
        if (slot) {
            slot.next ??= slot.current.then(() => undefined, () => undefined).then(() => this.readEntriesVersion(key, tenantId, listId));
            return slot.next;
        }
        return this.readEntriesVersion(key, tenantId, listId);
    }

    private readEntriesVersion(key: string, tenantId: string, listId: string): Promise<number | undefined> {
        const read = this.deps.db.knex(STATES).where({ tenantId, listId }).first('entriesVersion')
            .then((row?: { entriesVersion: number }) => row?.entriesVersion);
        const slot = { current: read };
        this.versionReads.set(key, slot);
        void read.catch(() => undefined).then(() => this.versionReads.get(key) === slot && this.versionReads.delete(key));
        return read;
    }

    /**
     * Signs the list's token when `needed` says so of the row as it is now, else answers the cached one. One at a
     * time per list in this process; across replicas the write keeps the token of the newest entries version.
     */
    private publish(tenantId: string, listId: string, needed: (row: TokenRow) => boolean, onSigned?: () => void): Promise<StatusListToken | undefined> {
        const key = `${tenantId}\u0000${listId}`;
        const previous = this.publishing.get(key) ?? Promise.resolve();
        const run = previous.catch(() => undefined).then(() => this.publishNow(tenantId, listId, needed, onSigned));
        const settled = run.catch(() => undefined);
        this.publishing.set(key, settled);
        void settled.then(() => this.publishing.get(key) === settled && this.publishing.delete(key));
        return run;
    }

    private async publishNow(tenantId: string, listId: string, needed: (row: TokenRow) => boolean, onSigned?: () => void): Promise<StatusListToken | undefined> {
        const states = () => this.deps.db.knex(STATES).where({ tenantId, listId });
        const list = await this.deps.registry.get(systemContext(tenantId), statusListKind, listId);
        const row: TokenRow | undefined = list && await states().first(...TOKEN_COLUMNS);
        if (!list || !row) {
            return undefined;
        }
        if (!needed(row)) {
            this.snapshots.delete(tenantId, listId);
            return tokenOf(row);
        }
        const claim = await this.claimSigning(tenantId, listId);
        if (!claim) {
            const published = await this.awaitOtherSigner(tenantId, listId, needed);
            if (published) {
                return published;
            }
        }
        try {
            if (claim) {
                // Another process may have signed, stored and released its claim between the read above and this
                // claim: its token stands, and signing again would publish the same change twice.
                const current: TokenRow | undefined = await states().first(...TOKEN_COLUMNS);
                if (current && !needed(current)) {
                    await states().where({ tokenSigningUntil: claim }).update({ tokenSigningUntil: null });
                    this.snapshots.delete(tenantId, listId);
                    return tokenOf(current);
                }
            }
            return await this.sign(tenantId, list.spec, claim, onSigned);
        }
        catch (err) {
            if (claim) {
                await states().where({ tokenSigningUntil: claim }).update({ tokenSigningUntil: null });
            }
            throw err;
        }
    }

    /** Claims the signing of a list for this process: the claim's end (ISO), or undefined while another one holds it. */
    private async claimSigning(tenantId: string, listId: string): Promise<string | undefined> {
        const now = Date.now();
        const until = new Date(now + SIGNING_CLAIM_MS).toISOString();
        const claimed = await this.deps.db.knex(STATES).where({ tenantId, listId })
            .where((w) => w.whereNull('tokenSigningUntil').orWhere('tokenSigningUntil', '<', new Date(now).toISOString()))
            .update({ tokenSigningUntil: until });
        return claimed ? until : undefined;
    }

    /**
     * Another process is signing the list: its token, once stored and no longer `needed`, else undefined once the
     * claim is ours after all or SIGNING_WAIT_MS passed (the caller signs then).
     */
    private async awaitOtherSigner(tenantId: string, listId: string, needed: (row: TokenRow) => boolean): Promise<StatusListToken | undefined> {
        const deadline = Date.now() + SIGNING_WAIT_MS;
        while (Date.now() < deadline) {
            await sleep(SIGNING_POLL_MS);
            const row: TokenRow | undefined = await this.deps.db.knex(STATES).where({ tenantId, listId }).first(...TOKEN_COLUMNS);
            if (row && !needed(row)) {
                this.snapshots.delete(tenantId, listId);
                return tokenOf(row);
            }
        }
        return undefined;
    }

    private async sign(tenantId: string, list: StatusList, claim: string | undefined, onSigned?: () => void): Promise<StatusListToken | undefined> {
        const listId = list.id;
        const states = () => this.deps.db.knex(STATES).where({ tenantId, listId });
        const config = await this.tenantDefaults(tenantId);
        const keyChainId = list.keyChainId ?? await this.defaultKeyChain(tenantId);
        if (!keyChainId) {
            throw new UnavailableError(`Status list ${listId} has no keyChainId and the tenant has no statusList or attestation key chain`);
        }
        // Entries and their version in one row read: the token signs exactly the version it records.
        const state: { entries: Buffer; entriesVersion: number } | undefined = await states().first('entries', 'entriesVersion');
        if (!state) {
            return undefined;
        }
        const ttl = config.ttlSeconds;
        const iat = Math.floor(Date.now() / 1000);
        const claims = { sub: this.uri(tenantId, listId), iat, exp: iat + 2 * ttl, ttl, bits: list.bits, lst: await deflate(state.entries) };
        const [jwt, cwt] = await Promise.all([
            signStatusListJwt(this.deps.signing, tenantId, keyChainId, claims),
            signStatusListCwt(this.deps.signing, tenantId, keyChainId, claims)
        ]);
        onSigned?.();
        const token: StatusListToken = {
            jwt: { body: Buffer.from(jwt, 'ascii'), etag: etagOf(jwt) },
            cwt: { body: cwt, etag: etagOf(cwt) },
            version: state.entriesVersion,
            ttl,
            refreshAt: (iat + ttl) * 1000,
            expiresAt: claims.exp * 1000
        };
        // Another replica may have stored a token of newer entries meanwhile; an older one never replaces it.
        const stored = await states()
            .where((w) => w.whereNull('tokenVersion').orWhere('tokenVersion', '<=', token.version))
            .update({
                token: jwt,
                tokenEtag: token.jwt.etag,
                tokenCwt: token.cwt.body,
                tokenCwtEtag: token.cwt.etag,
                tokenVersion: token.version,
                tokenRefreshAt: new Date(token.refreshAt).toISOString(),
                tokenExpiresAt: new Date(token.expiresAt).toISOString(),
                tokenSigningUntil: null
            });
        if (!stored && claim) {
            await states().where({ tokenSigningUntil: claim }).update({ tokenSigningUntil: null });
        }
        this.snapshots.delete(tenantId, listId);
        return token;
    }
}
