import Crypto from 'node:crypto';
import Joi from 'joi';
import type * as Jose from 'jose';
import type { Database } from '../../../lib/db/database';
import { ConflictError, NotFoundError, OAuthError, ValidationError } from '../../../lib/errors';
import type { Logger } from '../../../lib/logging';
import type { OutboundPolicy } from '../../../lib/outbound';
import { deliverWebhook } from '../../../lib/webhooks';
import type { CredentialConfig } from '../../../resources/credential-config';
import { sha256Hex, type LiveSession, type SessionService } from '../../sessions/services/session-service';
import type { SessionLogger } from '../../sessions/session-log';
import type { Issuer } from '../issuer';

export const DEFAULT_DEFERRED_INTERVAL_SECONDS = 5;
export const DEFERRED_TIDY_UP_JOB = 'oid4vci:deferred-tidy-up';
const MAX_DEFERRED_INTERVAL_SECONDS = 86_400;

/** Transaction ids are 32 random bytes, base64url: anything else was never issued. */
const TRANSACTION_ID = /^[A-Za-z0-9_-]{43}$/;
export const newTransactionId = (): string => Crypto.randomBytes(32).toString('base64url');
/** The stored key of a transaction (its id is never stored). */
export const transactionHash = (transactionId: string): string => sha256Hex(`deferred_transaction:${transactionId}`);

/**
 * An attribute provider answered `{deferred: true, interval?}` for the request that would get `transactionId`: the
 * credential service turns it into a deferred transaction instead of credentials.
 */
export class IssuanceDeferred extends Error {
    constructor(readonly transactionId: string, readonly interval: number) {
        super('issuance deferred by the attribute provider');
    }
}

/** The wallet's polling interval an attribute provider asked for, or the default; anything else is a provider error. */
export const deferredInterval = (interval: unknown): number => {
    if (interval === undefined) {
        return DEFAULT_DEFERRED_INTERVAL_SECONDS;
    }
    if (!Number.isInteger(interval) || (interval as number) < 1 || (interval as number) > MAX_DEFERRED_INTERVAL_SECONDS) {
        throw new Error(`attribute provider answered a deferral with an interval that is not an integer from 1 to ${MAX_DEFERRED_INTERVAL_SECONDS}`);
    }
    return interval as number;
};

export interface IssuedCredentials {
    credentials: Array<{ credential: string }>;
    notification_id: string;
}

/** What signs a completed transaction's credentials: the credential service, so they are issued as any other. */
export interface DeferredSigner {
    /** The claims completed and checked as an attribute provider's answer is; throws an OAuthError otherwise. */
    checkClaims(credential: CredentialConfig, given: Record<string, unknown>): Record<string, unknown>;
    sign(session: LiveSession<'issuance'>, credential: CredentialConfig, holderKeys: Array<Jose.JWK | undefined>, claims: Record<string, unknown>, log: SessionLogger): Promise<IssuedCredentials>;
}

type DeferredState = 'pending' | 'completing' | 'ready' | 'failed' | 'delivered';

/** The sealed part of a transaction. */
interface DeferredData {
    /** Verified holder keys (public members only); null for a configuration without key binding. */
    holderKeys?: Array<Jose.JWK | null>;
    issued?: IssuedCredentials;
    error?: string;
}

interface DeferredRow {
    id: string;
    tenantId: string;
    sessionId: string;
    credentialConfigurationId: string;
    state: DeferredState;
    interval: number;
    data: string | null;
}

export interface DeferredStateAnswer {
    transactionId: string;
    session: string;
    credentialConfigurationId: string;
    state: DeferredState;
}

export const deferredCompleteSchema = Joi.object({
    claims: Joi.object().unknown(true).required()
        .description('The credential\'s claims, as an attribute provider answers them (for mso_mdoc grouped by namespace)')
}).label('DeferredIssuanceCompletion');

export const deferredFailSchema = Joi.object({
    error: Joi.string().max(500).pattern(/^\P{Cc}*$/u, 'without control characters').description('Why the credential is not issued; the wallet gets it as error_description')
}).allow(null).label('DeferredIssuanceFailure');

export const transactionIdParam = Joi.string().max(128).required();

/** What the deferred credential endpoint answers: the credentials once they are ready, or how long to wait. */
export type DeferredAnswer = { issued: IssuedCredentials } | { pending: { interval: number } };

/**
 * Deferred issuance (OpenID4VCI deferred credential endpoint). An attribute provider that defers makes the credential
 * request a transaction bound to its session and tenant, keeping the verified holder keys; the issuer backend
 * completes it with the claims (signed then, with status list entries allocated then, recorded on the session with a
 * notification_id like any issuance) or fails it; the wallet fetches the signed credentials once with a token of
 * the same session, after which they are deleted.
 */
export class DeferredService {
    constructor(private readonly deps: {
        db: Database;
        sessions: SessionService;
        issuer: Issuer;
        outbound: OutboundPolicy;
        log: Logger;
        /** The credential service (made after this one: it defers through it). */
        signer: () => DeferredSigner;
    }) {}

    private table() {
        return this.deps.db.current()('deferred_issuances');
    }

    private seal(data: DeferredData): string {
        return this.deps.db.cipher.encrypt(JSON.stringify(data));
    }

    private open(row: DeferredRow): DeferredData {
        return row.data ? JSON.parse(this.deps.db.cipher.decrypt(row.data)) as DeferredData : {};
    }

    private async find(tenantId: string, transactionId: string): Promise<DeferredRow | undefined> {
        if (!TRANSACTION_ID.test(transactionId)) {
            return undefined;
        }
        return await this.table().where({ id: transactionHash(transactionId), tenantId }).first() as DeferredRow | undefined;
    }

    /** Moves the transaction from one state to another; true when this call made the move. */
    private async move(id: string, from: DeferredState, to: DeferredState, data?: DeferredData | null): Promise<boolean> {
        const patch: Record<string, unknown> = { state: to, updatedAt: new Date().toISOString() };
        if (data !== undefined) {
            patch.data = data === null ? null : this.seal(data);
        }
        return await this.table().where({ id, state: from }).update(patch) === 1;
    }

    /** Records a credential request the attribute provider deferred; answers what the wallet gets (HTTP 202). */
    async defer(session: LiveSession<'issuance'>, credential: CredentialConfig, holderKeys: Array<Jose.JWK | undefined>, deferral: IssuanceDeferred, log: SessionLogger): Promise<{ transaction_id: string; interval: number }> {
        const now = new Date().toISOString();
        const { transactionId, interval } = deferral;
        await this.table().insert({
            id: transactionHash(transactionId),
            tenantId: session.tenantId,
            sessionId: session.id,
            credentialConfigurationId: credential.id,
            state: 'pending',
            interval,
            data: this.seal({ holderKeys: holderKeys.map((k) => k ?? null) }),
            createdAt: now,
            updatedAt: now
        });
        log.info({ event: 'credential_deferred', credentialConfigurationId: credential.id, interval }, 'credential request deferred by the attribute provider');
        // Telling the issuer backend is a courtesy (the attribute provider got the transaction id too): a failed
        // delivery is logged and the wallet still gets its transaction.
        if (session.data.webhook) {
            const result = await deliverWebhook(this.deps.outbound, session.data.webhook, {
                deferred: { transactionId, credentialConfigurationId: credential.id, interval },
                session: session.id
            }, this.deps.log);
            if (!result.delivered) {
                log.warn({ event: 'webhook_failed', reason: result.error }, 'the deferral could not be told to the issuer backend');
            }
        }
        return { transaction_id: transactionId, interval };
    }

    /** The issuer backend's claims for a pending transaction: the credentials are signed now and kept for the wallet. */
    async complete(tenantId: string, transactionId: string, claims: Record<string, unknown>, sessionLog: (session: LiveSession<'issuance'>) => SessionLogger): Promise<DeferredStateAnswer> {
        const row = await this.pending(tenantId, transactionId);
        const session = await this.liveSession(row);
        const credential = await this.deps.issuer.credentialConfig(tenantId, row.credentialConfigurationId);
        if (!credential) {
            throw new ConflictError(`Credential configuration ${row.credentialConfigurationId} no longer exists`);
        }
        const signer = this.deps.signer();
        let checked: Record<string, unknown>;
        try {
            checked = signer.checkClaims(credential, claims);
        }
        catch (err) {
            throw err instanceof OAuthError ? new ValidationError(err.message, [{ path: 'claims', message: err.message }]) : err;
        }
        // Claimed before signing, so two concurrent completions never both sign (and allocate status entries).
        if (!(await this.move(row.id, 'pending', 'completing'))) {
            throw new ConflictError('The deferred issuance is no longer pending');
        }
        const data = this.open(row);
        let issued: IssuedCredentials;
        try {
            issued = await signer.sign(session, credential, (data.holderKeys ?? []).map((k) => k ?? undefined), checked, sessionLog(session));
        }
        catch (err) {
            await this.move(row.id, 'completing', 'pending');
            throw err instanceof OAuthError ? new ConflictError(`The credentials could not be issued: ${err.message}`) : err;
        }
        await this.move(row.id, 'completing', 'ready', { issued });
        return this.answer(transactionId, row, 'ready');
    }

    /** The issuer backend will not issue: the wallet gets credential_request_denied with the reason. */
    async fail(tenantId: string, transactionId: string, error: string | undefined): Promise<DeferredStateAnswer> {
        const row = await this.pending(tenantId, transactionId);
        if (!(await this.move(row.id, 'pending', 'failed', error ? { error } : {}))) {
            throw new ConflictError('The deferred issuance is no longer pending');
        }
        return this.answer(transactionId, row, 'failed');
    }

    /** The deferred credential endpoint: only a token of the transaction's session gets its credentials, once. */
    async fetch(session: LiveSession<'issuance'>, body: { transaction_id?: unknown }, log: SessionLogger): Promise<DeferredAnswer> {
        const transactionId = body.transaction_id;
        if (typeof transactionId !== 'string' || !transactionId) {
            throw new OAuthError(400, 'invalid_credential_request', 'transaction_id is required as a string');
        }
        const unknown = () => new OAuthError(400, 'invalid_transaction_id', 'The transaction_id is unknown, already used, or not of this access token');
        const row = await this.find(session.tenantId, transactionId);
        if (!row || row.sessionId !== session.id) {
            throw unknown();
        }
        switch (row.state) {
            case 'pending':
            case 'completing':
                return { pending: { interval: row.interval } };
            case 'failed':
                throw new OAuthError(400, 'credential_request_denied', this.open(row).error ?? 'The issuer declined to issue this credential');
            case 'ready': {
                const { issued } = this.open(row);
                // One conditional update hands the credentials out and deletes them: of concurrent fetches one wins.
                if (!issued || !(await this.move(row.id, 'ready', 'delivered', null))) {
                    throw unknown();
                }
                log.info({ event: 'deferred_credential_delivered', credentialConfigurationId: row.credentialConfigurationId, count: issued.credentials.length }, 'deferred credentials delivered');
                return { issued };
            }
            default:
                throw unknown();
        }
    }

    /**
     * Removes the transactions of anonymized sessions: their holder keys and any credentials not yet fetched are
     * personal data the anonymization must not leave behind (deleted sessions take theirs by cascade).
     */
    async tidyUp(): Promise<number> {
        const anonymized = this.deps.db.current()('sessions').select('id').whereNull('data');
        return this.table().whereIn('sessionId', anonymized).delete();
    }

    private async pending(tenantId: string, transactionId: string): Promise<DeferredRow> {
        const row = await this.find(tenantId, transactionId);
        if (!row) {
            throw new NotFoundError('Unknown deferred issuance transaction');
        }
        if (row.state !== 'pending') {
            throw new ConflictError(`The deferred issuance is ${row.state === 'completing' ? 'being completed' : row.state}, no longer pending`);
        }
        return row;
    }

    private async liveSession(row: DeferredRow): Promise<LiveSession<'issuance'>> {
        const session = await this.deps.sessions.get(row.sessionId);
        if (!session || session.type !== 'issuance' || session.data === null || ['completed', 'failed', 'expired'].includes(session.status)) {
            throw new ConflictError(`The issuance session is ${session?.status ?? 'gone'}; its deferred credential can no longer be issued`);
        }
        return session as LiveSession<'issuance'>;
    }

    private answer(transactionId: string, row: DeferredRow, state: DeferredState): DeferredStateAnswer {
        return { transactionId, session: row.sessionId, credentialConfigurationId: row.credentialConfigurationId, state };
    }
}
