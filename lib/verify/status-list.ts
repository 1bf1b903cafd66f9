import Crypto from 'node:crypto';
import Zlib from 'node:zlib';
import type { StatusCheckMode } from '../../resources/presentation-config';
import { outboundRequest, type OutboundPolicy, type OutboundResponse } from '../outbound';
import { FAILURE_MESSAGES, VerificationFailure } from './failures';
import { verifyCertificateChain, type TrustAnchor } from './trust';

/**
 * Relying-party side of IETF Token Status List (draft-ietf-oauth-status-list) for presented credentials (contract
 * "Token status lists", Verification): a credential's `status.status_list {idx, uri}` (SD-JWT VC payload, mdoc MSO)
 * names an entry of a Status List Token. The token is fetched through the outbound guard and accepted only when
 * - it is a compact JWS with typ statuslist+jwt and alg ES256 (HAIP), an x5c chain that ends at the very trust anchor
 *   the credential itself chained to (an issuer cannot speak for another issuer's credentials), and a signature of
 *   the x5c leaf;
 * - `sub` equals the credential's uri, `iat` is not in the future, `exp` (when present) has not passed;
 * - `status_list` has bits 1, 2, 4 or 8 and `lst`, base64url of zlib-deflated bytes, holds entry `idx` (entry i in
 *   bits i*bits … i*bits+bits-1, least significant first).
 * Anything else, including an unreachable server or an answer other than 200, makes the list unavailable.
 *
 * Entry values follow the contract (spec 3.3): on a 1-bit list 1 is revoked; on wider lists 1 is suspended and 2
 * revoked; 0 is valid everywhere, and any other value is a status this service does not know, which is not valid.
 *
 * A verified list is kept per (uri, anchor) until its `exp` or `iat + ttl`, whichever comes first (at most
 * MAX_CACHE_SECONDS when it has neither), bounded in entries and bytes; concurrent checks of one list share a fetch.
 */

export interface StatusReference {
    idx: number;
    uri: string;
}

/** What an outcome entry reports of a credential that passed: its list entry is valid, or could not be checked. */
export type CheckedStatus = 'valid' | 'unknown';

export const STATUS_LIST_MEDIA_TYPE = 'application/statuslist+jwt';
const TYP = 'statuslist+jwt';
const BITS = [1, 2, 4, 8];
/** A list's entries, inflated: 2^24 one-byte entries at most; a larger (or bomb) payload makes the list invalid. */
const MAX_LIST_BYTES = 16 * 1024 * 1024;
const MAX_TOKEN_BYTES = 4 * 1024 * 1024;
const FETCH_TIMEOUT_MS = 5_000;
/** A list without exp and ttl is kept this long (seconds). */
const MAX_CACHE_SECONDS = 300;
const CACHE_MAX_ENTRIES = 256;
const CACHE_MAX_BYTES = 64 * 1024 * 1024;

const withReason = (reason: string) => `${FAILURE_MESSAGES.verification_error.replace(/\.$/, '')}: ${reason}.`;

/** errorReason / outcome message of each status failure (display-safe: no URI, no index). */
export const STATUS_FAILURE_MESSAGES = {
    revoked: withReason('credential revoked'),
    suspended: withReason('credential suspended'),
    unavailable: withReason('status list unavailable')
} as const;

/** The list could not be fetched or did not validate; `message` is a diagnostic for logs. */
export class StatusListUnavailable extends Error {
    constructor(message: string) {
        super(message);
        this.name = 'StatusListUnavailable';
    }
}

const unavailable = (detail: string) => new StatusListUnavailable(detail);

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A member of a JSON object or of a CBOR map (an MSO decodes maps to Map). */
const member = (container: unknown, key: string): unknown =>
    container instanceof Map ? container.get(key) : isObject(container) ? container[key] : undefined;

const isHttpUrl = (value: unknown): boolean => {
    try {
        return ['http:', 'https:'].includes(new URL(value as string).protocol);
    }
    catch {
        return false;
    }
};

/**
 * The status list reference of a credential's `status` claim (a JSON object, or a CBOR map of an MSO), or undefined
 * when it has none. A `status` that names no status_list (another mechanism) is not checked; a status_list
 * without a non-negative integer idx and an http(s) uri makes the credential malformed (verification_error).
 */
export const statusReferenceOf = (status: unknown): StatusReference | undefined => {
    if (status === undefined) {
        return undefined;
    }
    if (!(status instanceof Map) && !isObject(status)) {
        throw VerificationFailure.coded('verification_error', 'the credential status is not an object');
    }
    const list = member(status, 'status_list');
    if (list === undefined) {
        return undefined;
    }
    const idx = member(list, 'idx');
    const uri = member(list, 'uri');
    if (!Number.isSafeInteger(idx) || (idx as number) < 0) {
        throw VerificationFailure.coded('verification_error', 'status.status_list.idx is not a non-negative integer');
    }
    if (typeof uri !== 'string' || !isHttpUrl(uri)) {
        throw VerificationFailure.coded('verification_error', 'status.status_list.uri is not an http(s) URI');
    }
    return { idx: idx as number, uri };
};

interface VerifiedList {
    bits: number;
    entries: Buffer;
    /** Milliseconds since the epoch until which the list may be used without fetching it again. */
    until: number;
}

const jsonPart = (part: string, what: string): Record<string, unknown> => {
    if (!/^[A-Za-z0-9_-]+$/.test(part)) {
        throw unavailable(`the status list token ${what} is not base64url`);
    }
    let value: unknown;
    try {
        value = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    }
    catch {
        throw unavailable(`the status list token ${what} is not JSON`);
    }
    if (!isObject(value)) {
        throw unavailable(`the status list token ${what} is not a JSON object`);
    }
    return value;
};

const numericDate = (payload: Record<string, unknown>, claim: string, required: boolean): number | undefined => {
    const value = payload[claim];
    if (value === undefined && !required) {
        return undefined;
    }
    if (typeof value !== 'number' || !Number.isFinite(value)) {
        throw unavailable(`the status list token ${claim} is missing or not a number`);
    }
    return value;
};

/**
 * Validates a Status List Token for `reference` against the anchor of the credential; see the module comment.
 * Exported for unit tests of the validation rules; the checker below is what verification uses.
 */
export const verifyStatusListToken = async (token: string, reference: StatusReference, anchor: TrustAnchor, now: Date, skewSeconds: number): Promise<VerifiedList> => {
    const parts = token.split('.');
    if (parts.length !== 3) {
        throw unavailable('the status list token is not a compact JWS');
    }
    const [encodedHeader, encodedPayload, encodedSignature] = parts as [string, string, string];
    const header = jsonPart(encodedHeader, 'header');
    if (header.typ !== TYP) {
        throw unavailable(`the status list token typ is ${String(header.typ)}, not ${TYP}`);
    }
    if (header.alg !== 'ES256') {
        throw unavailable(`the status list token alg is ${String(header.alg)}, not ES256`);
    }
    if (!Array.isArray(header.x5c) || !header.x5c.length) {
        throw unavailable('the status list token has no x5c');
    }
    let leafPublicKey: Crypto.KeyObject;
    try {
        ({ leafPublicKey } = await verifyCertificateChain(header.x5c as string[], [anchor], now));
    }
    catch (error) {
        const failure = error as VerificationFailure;
        throw unavailable(`the status list token signer does not chain to the credential issuer's anchor (${failure.code}: ${failure.detail})`);
    }
    if (leafPublicKey.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
        throw unavailable('the status list token signer key is not P-256');
    }
    const signature = Buffer.from(encodedSignature, 'base64url');
    if (signature.length !== 64 || !Crypto.verify('sha256', Buffer.from(`${encodedHeader}.${encodedPayload}`, 'ascii'), { key: leafPublicKey, dsaEncoding: 'ieee-p1363' }, signature)) {
        throw unavailable('the status list token signature does not verify with its x5c leaf');
    }

    const payload = jsonPart(encodedPayload, 'payload');
    if (payload.sub !== reference.uri) {
        throw unavailable('the status list token sub is not the uri the credential names');
    }
    const nowSeconds = now.getTime() / 1000;
    const iat = numericDate(payload, 'iat', true)!;
    const exp = numericDate(payload, 'exp', false);
    const ttl = numericDate(payload, 'ttl', false);
    if (iat > nowSeconds + skewSeconds) {
        throw unavailable('the status list token is issued in the future (iat)');
    }
    if (exp !== undefined && nowSeconds > exp + skewSeconds) {
        throw unavailable('the status list token has expired (exp)');
    }
    if (ttl !== undefined && ttl < 0) {
        throw unavailable('the status list token ttl is negative');
    }
    const statusList = payload.status_list;
    if (!isObject(statusList) || !BITS.includes(statusList.bits as number) || typeof statusList.lst !== 'string' || !/^[A-Za-z0-9_-]*$/.test(statusList.lst)) {
        throw unavailable('the status list token status_list is not {bits: 1|2|4|8, lst: base64url}');
    }
    let entries: Buffer;
    try {
        entries = Zlib.inflateSync(Buffer.from(statusList.lst, 'base64url'), { maxOutputLength: MAX_LIST_BYTES });
    }
    catch (error) {
        throw unavailable(`the status list lst does not inflate (${(error as Error).message})`);
    }
    const bits = statusList.bits as number;
    const ends = [exp, ttl === undefined ? undefined : iat + ttl].filter((t): t is number => t !== undefined);
    const until = ends.length ? Math.min(...ends) * 1000 : now.getTime() + MAX_CACHE_SECONDS * 1000;
    return { bits, entries, until };
};

/** Entry `idx` of a verified list; an index beyond the list makes the list invalid for this credential. */
export const entryOf = (list: Pick<VerifiedList, 'bits' | 'entries'>, idx: number): number => {
    const bit = idx * list.bits;
    const byte = Math.floor(bit / 8);
    if (byte >= list.entries.length) {
        throw unavailable(`index ${idx} is beyond the status list (${(list.entries.length * 8) / list.bits} entries)`);
    }
    return (list.entries[byte]! >> (bit % 8)) & ((1 << list.bits) - 1);
};

export type StatusMeaning = 'valid' | 'revoked' | 'suspended' | 'other';

/** Contract / spec 3.3: 1-bit lists 0 valid, 1 revoked; wider lists 0 valid, 1 suspended, 2 revoked, more custom. */
export const meaningOf = (value: number, bits: number): StatusMeaning => {
    if (value === 0) {
        return 'valid';
    }
    if (bits === 1) {
        return 'revoked';
    }
    return value === 1 ? 'suspended' : value === 2 ? 'revoked' : 'other';
};

export interface StatusListCheckerOptions {
    outbound: OutboundPolicy;
    maxEntries?: number;
    maxBytes?: number;
}

export interface StatusCheckInput {
    reference: StatusReference;
    /** The anchor the credential's own chain ended at; the list's signer must end at the same one. */
    anchor: TrustAnchor;
    /** Default strict. */
    mode?: StatusCheckMode;
    now: Date;
    skewSeconds: number;
}

/** The result of a check that lets the credential pass; `detail` says why a status is unknown (for logs only). */
export interface StatusCheckResult {
    status: CheckedStatus;
    detail?: string;
}

/** Checks credentials' status list entries (module comment); one per server, holding the cache of verified lists. */
export class StatusListChecker {
    private readonly lists = new Map<string, VerifiedList>();
    private readonly pending = new Map<string, Promise<VerifiedList>>();
    private bytes = 0;
    private readonly maxEntries: number;
    private readonly maxBytes: number;

    constructor(private readonly options: StatusListCheckerOptions) {
        this.maxEntries = options.maxEntries ?? CACHE_MAX_ENTRIES;
        this.maxBytes = options.maxBytes ?? CACHE_MAX_BYTES;
    }

    /**
     * Applies `mode` (spec 2.1 statusCheckMode) to one credential: undefined for `disabled` (nothing fetched);
     * throws a verification_error VerificationFailure naming the status for a revoked, suspended or otherwise not
     * valid entry, and for an unavailable list in `strict`; answers `unknown` for an unavailable list in
     * `best_effort`, `valid` for a valid entry.
     */
    async check(input: StatusCheckInput): Promise<StatusCheckResult | undefined> {
        if (input.mode === 'disabled') {
            return undefined;
        }
        let value: number;
        let bits: number;
        try {
            const list = await this.list(input);
            value = entryOf(list, input.reference.idx);
            bits = list.bits;
        }
        catch (error) {
            // StatusListUnavailable, and anything unforeseen: either way the list could not be used.
            const detail = (error as Error).message;
            if (input.mode === 'best_effort') {
                return { status: 'unknown', detail };
            }
            throw new VerificationFailure('verification_error', STATUS_FAILURE_MESSAGES.unavailable, detail);
        }
        const meaning = meaningOf(value, bits);
        if (meaning === 'valid') {
            return { status: 'valid' };
        }
        if (meaning === 'other') {
            throw new VerificationFailure('verification_error', withReason(`credential status ${value}`), `status list entry ${input.reference.idx} has value ${value}`);
        }
        throw new VerificationFailure('verification_error', STATUS_FAILURE_MESSAGES[meaning], `status list entry ${input.reference.idx} is ${meaning}`);
    }

    private list(input: StatusCheckInput): Promise<VerifiedList> {
        const key = `${input.reference.uri}\u0000${Crypto.createHash('sha256').update(input.anchor.certificate).digest('base64url')}`;
        const cached = this.lists.get(key);
        if (cached && input.now.getTime() < cached.until) {
            return Promise.resolve(cached);
        }
        if (cached) {
            this.drop(key);
        }
        const running = this.pending.get(key);
        if (running) {
            return running;
        }
        const loading = this.load(input).then((list) => {
            if (input.now.getTime() < list.until) {
                this.keep(key, list);
            }
            return list;
        }).finally(() => this.pending.delete(key));
        this.pending.set(key, loading);
        return loading;
    }

    private async load(input: StatusCheckInput): Promise<VerifiedList> {
        let response: OutboundResponse;
        try {
            response = await outboundRequest(this.options.outbound, input.reference.uri, { method: 'GET', headers: { accept: STATUS_LIST_MEDIA_TYPE }, timeoutMs: FETCH_TIMEOUT_MS, maxResponseBytes: MAX_TOKEN_BYTES });
        }
        catch (error) {
            throw unavailable(`the status list could not be fetched (${(error as Error).message})`);
        }
        if (response.status !== 200) {
            throw unavailable(`the status list server answered ${response.status}`);
        }
        return verifyStatusListToken(response.text().trim(), input.reference, input.anchor, input.now, input.skewSeconds);
    }

    private keep(key: string, list: VerifiedList): void {
        if (list.entries.length > this.maxBytes) {
            return;
        }
        this.drop(key);
        // Oldest first (insertion order) until the new list fits.
        while (this.lists.size && (this.lists.size >= this.maxEntries || this.bytes + list.entries.length > this.maxBytes)) {
            this.drop(this.lists.keys().next().value as string);
        }
        this.lists.set(key, list);
        this.bytes += list.entries.length;
    }

    private drop(key: string): void {
        const list = this.lists.get(key);
        if (list) {
            this.lists.delete(key);
            this.bytes -= list.entries.length;
        }
    }
}
