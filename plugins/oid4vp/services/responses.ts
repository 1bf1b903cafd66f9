import Crypto from 'node:crypto';
import * as Jose from 'jose';
import { decryptEcdhEs } from '../../../lib/crypto/ecdh-es';
import { p256FromScalar } from '../../../lib/crypto/p256';
import { OAuthError } from '../../../lib/errors';
import type { Logger } from '../../../lib/logging';
import type { OutboundPolicy } from '../../../lib/outbound';
import type { LiveSession, Session, SessionPatch, SessionService } from '../../sessions/services/session-service';
import { FAILURE_MESSAGES, VerificationFailure, type FailureCode } from '../../../lib/verify/failures';
import { openid4vpDcApiSessionTranscript, openid4vpSessionTranscript, verifyMdocPresentation } from '../../../lib/verify/mdoc';
import { verifySdJwtPresentation } from '../../../lib/verify/sd-jwt-vc';
import type { CheckedStatus, StatusListChecker, StatusReference } from '../../../lib/verify/status-list';
import type { TrustAnchor } from '../../../lib/verify/trust';
import { deliverWebhook } from '../../../lib/webhooks';
import { matchDcql, type PresentedCredential } from './dcql';
import type { PresentationData } from './requests';
import type { TrustAnchors } from './trust-anchors';
import { sdJwtX5c, trustOutcome, type TrustOutcome } from './trust-outcome';

export interface WalletAnswer {
    status: number;
    body: Record<string, unknown>;
}

/**
 * An entry of `outcome.credentials` (spec 2.7). `status` (contract "Token status lists", Verification) is present
 * when a presented credential of the query carries a status list reference and statusCheckMode is not disabled:
 * "valid" when every checked entry is valid, "unknown" when a list could not be checked in best_effort mode.
 */
interface CredentialOutcome {
    id: string;
    format: string;
    docType?: string;
    verified: boolean;
    status?: CheckedStatus;
    trust?: TrustOutcome;
    error?: string;
    message?: string;
}

/**
 * What a presentation must be bound to: the KB-JWT audience of SD-JWT VCs and the SessionTranscript mdoc device
 * signatures cover. `docTypes` (ISO 18013-7): one DeviceResponse answers every mso_mdoc query, each takes the
 * documents of its docType.
 */
export interface PresentationBinding {
    audience: string;
    mdocTranscript: Uint8Array;
    docTypes?: boolean;
}

/** How a response ended, for the protocol to shape its answer (the outcome is recorded and the webhook sent). */
export type Concluded =
    | { ok: true; responseCode: string; redirectUri?: string }
    | { ok: false; code?: FailureCode; message: string; redirectUri?: string };

export interface ConcludeOptions {
    /** The status the session must still have when the outcome is recorded (active for flows that skip fetched). */
    from: 'active' | 'fetched';
    /** ISO 18013-7: credentials as {id, format, docType, claims} per document, and failures never redirect. */
    iso?: boolean;
}

/** A failure with the credential query it concerns, if any. */
export class PresentationFailure extends Error {
    constructor(readonly code: FailureCode | undefined, message: string, readonly credential?: CredentialOutcome) {
        super(message);
    }
}

const EXPIRED = 'The presentation session has expired';
const USED = 'The presentation offer has already been used';
const NOT_FETCHED = 'The request object of this presentation has not been fetched yet';

const b64urlSha256 = (value: string) => Crypto.createHash('sha256').update(value).digest('base64url');

/**
 * The response endpoint: decrypt, parse, verify every presentation, match the DCQL query, then record the outcome
 * (spec 2.7 and 7.2), call the webhook and answer the wallet (7.3). One conditional write claims the session and
 * records the outcome together, so exactly one response is recorded and a session is never claimed without one.
 */
export class PresentationResponses {
    constructor(private readonly deps: { outbound: OutboundPolicy; sessions: SessionService; trust: TrustAnchors; status: StatusListChecker; log: Logger }) {}

    async receive(session: LiveSession<'presentation'>, form: Record<string, unknown>): Promise<WalletAnswer> {
        const { data } = session;
        if (session.expiresAt && Date.parse(session.expiresAt) <= Date.now()) {
            throw new OAuthError(400, 'invalid_request', EXPIRED);
        }
        if (data.protocol === 'dc-api') {
            return this.receiveDcApi(session, form);
        }
        if (data.protocol) {
            throw new OAuthError(400, 'invalid_request', `This presentation request is answered at its ${data.protocol} endpoint`);
        }
        // Contract: a response is accepted only after the wallet fetched the request object; the session stays active.
        if (session.status === 'active') {
            throw new OAuthError(400, 'invalid_request', NOT_FETCHED);
        }
        if (session.status !== 'fetched' || session.consumedAt) {
            throw new OAuthError(400, 'invalid_request', USED);
        }
        const payload = await this.payload(data, form);
        if (payload.state !== undefined && payload.state !== session.walletNonce) {
            throw new OAuthError(400, 'invalid_request', 'state does not belong to this presentation request');
        }
        if (typeof payload.error === 'string') {
            return this.walletError(session, data, walletErrorOf(payload));
        }
        const jwkThumbprint = Buffer.from(await Jose.calculateJwkThumbprint(data.encryptionKey.publicJwk), 'base64url');
        const binding = { audience: data.clientId, mdocTranscript: openid4vpSessionTranscript({ clientId: data.clientId, nonce: data.nonce, responseUri: data.responseUri, jwkThumbprint }) };
        return oid4vpAnswer(await this.conclude(session, data, () => this.verify(session, data, payload.vp_token, binding), { from: 'fetched' }));
    }

    /**
     * OpenID4VP over the Digital Credentials API (contract "Presentation"): the relying party's backend posts
     * `{response, origin}`, the wallet's dc_api.jwt JWE and the origin the browser reported. The origin must be one of
     * the request's expected_origins (otherwise the session fails, verification_error); the presentations are bound
     * to it: `origin:<origin>` as KB-JWT aud, the OpenID4VPDCAPIHandover SessionTranscript for mdocs. A response that
     * cannot be decrypted is refused (400) and leaves the session open, as on the redirect path.
     */
    private async receiveDcApi(session: LiveSession<'presentation'>, form: Record<string, unknown>): Promise<WalletAnswer> {
        const { data } = session;
        if (session.status !== 'active' || session.consumedAt) {
            throw new OAuthError(400, 'invalid_request', USED);
        }
        if (typeof form.origin !== 'string' || !form.origin) {
            throw new OAuthError(400, 'invalid_request', 'origin is required: the origin of the page that called the Digital Credentials API');
        }
        const origin = form.origin;
        const payload = await this.payload(data, form);
        // An error response is the wallet's only from an expected origin; from another it fails below like any response.
        if (typeof payload.error === 'string' && data.expectedOrigins?.includes(origin)) {
            return this.walletError(session, data, walletErrorOf(payload), 'active');
        }
        const jwkThumbprint = Buffer.from(await Jose.calculateJwkThumbprint(data.encryptionKey.publicJwk), 'base64url');
        const binding = { audience: `origin:${origin}`, mdocTranscript: openid4vpDcApiSessionTranscript({ origin, nonce: data.nonce, jwkThumbprint }) };
        return oid4vpAnswer(await this.conclude(session, data, async () => {
            if (!data.expectedOrigins?.includes(origin)) {
                this.deps.log.info({ sessionId: session.id }, 'DC API response from an origin the request did not expect');
                throw VerificationFailure.coded('verification_error', 'origin not among expected_origins');
            }
            return this.verify(session, data, payload.vp_token, binding);
        }, { from: 'active' }));
    }

    /**
     * Verifies (`verify` throws PresentationFailure or VerificationFailure for a presentation that does not pass),
     * then records the outcome in the write that claims the session, sends the webhook and says how it ended.
     * Verified before anything is written: only one response is ever recorded (the others answer "already used").
     */
    async conclude(session: Session<'presentation'>, data: PresentationData, verify: () => Promise<PresentedCredential[]>, options: ConcludeOptions): Promise<Concluded> {
        let presented: PresentedCredential[];
        try {
            presented = await verify();
        }
        catch (err) {
            const failure = err instanceof PresentationFailure ? err
                : err instanceof VerificationFailure ? new PresentationFailure(err.code, err.message)
                    : new PresentationFailure('verification_error', FAILURE_MESSAGES.verification_error);
            if (!(err instanceof PresentationFailure) && !(err instanceof VerificationFailure)) {
                this.deps.log.warn({ err: (err as Error).message, sessionId: session.id }, 'presentation verification error');
            }
            return this.fail(session, data, failure, options);
        }
        return this.succeed(session, data, presented, options);
    }

    /**
     * The claim and the outcome in one conditional write: only a fetched, unconsumed session takes it, so of concurrent
     * responses exactly one is recorded (the others answer "already used"), and a write that fails leaves the session
     * as it was, open for a response that can be recorded, never claimed without an outcome.
     */
    private async record(session: Session<'presentation'>, result: NonNullable<PresentationData['result']>, patch: SessionPatch, from: 'active' | 'fetched'): Promise<void> {
        const written = await this.deps.sessions.mutateData<'presentation'>(session, (current) => ({ ...current, result }), patch, { status: [from], isNull: ['consumedAt'] });
        if (!written) {
            throw new OAuthError(400, 'invalid_request', USED);
        }
    }

    /**
     * direct_post.jwt: the JWE in `response`. The request asks for an encrypted response (HAIP), so a plain vp_token
     * is refused; a plain error response is taken (spec 7.2: wallets may decline with form parameters).
     */
    private async payload(data: PresentationData, form: Record<string, unknown>): Promise<Record<string, unknown>> {
        if (typeof form.response !== 'string') {
            if (typeof form.error === 'string') {
                return form;
            }
            throw new OAuthError(400, 'invalid_request', 'The response must be encrypted (response_mode direct_post.jwt)');
        }
        const decrypted = this.decrypt(data, form.response);
        // An authorization response is a set of parameters: null, a number, a string or an array is none.
        if (!decrypted || typeof decrypted !== 'object' || Array.isArray(decrypted)) {
            throw new OAuthError(400, 'invalid_request', 'The decrypted response must be a JSON object of response parameters');
        }
        return decrypted as Record<string, unknown>;
    }

    private decrypt(data: PresentationData, response: string): unknown {
        try {
            const { plaintext, header } = decryptEcdhEs(response, p256FromScalar(Buffer.from(data.encryptionKey.privateJwk.d!, 'base64url')));
            if (header.kid && header.kid !== data.encryptionKey.privateJwk.kid) {
                throw new Error('kid');
            }
            return JSON.parse(plaintext.toString('utf8')) as unknown;
        }
        catch {
            throw new OAuthError(400, 'invalid_request', 'The encrypted response could not be decrypted');
        }
    }

    /**
     * Verifies every presentation of a vp_token-shaped object (`{queryId: presentation | presentation[]}`) bound as
     * `binding` says, checks status and matches the DCQL query. Throws PresentationFailure for a failure.
     */
    async verify(session: Session<'presentation'>, data: PresentationData, vpToken: unknown, binding: PresentationBinding): Promise<PresentedCredential[]> {
        if (!vpToken || typeof vpToken !== 'object' || Array.isArray(vpToken)) {
            throw new PresentationFailure(undefined, 'Presentation validation failed: vp_token must be an object keyed by credential query id');
        }
        const now = new Date();
        const withTrust = data.protocol !== undefined;
        const presented: PresentedCredential[] = [];
        for (const [queryId, value] of Object.entries(vpToken as Record<string, unknown>)) {
            const query = data.dcqlQuery.credentials.find((c: { id: string }) => c.id === queryId);
            if (!query) {
                throw new PresentationFailure(undefined, `Presentation validation failed: vp_token names unknown credential query ${queryId}`);
            }
            const tokens = Array.isArray(value) ? value : [value];
            if (!tokens.length || tokens.some((t) => typeof t !== 'string')) {
                throw new PresentationFailure(undefined, `Presentation validation failed: presentations of ${queryId} must be strings`);
            }
            const several = () => new PresentationFailure(undefined, `Presentation validation failed: several presentations for ${queryId}, which does not allow multiple`);
            if (tokens.length > 1 && !query.multiple) {
                throw several();
            }
            const docType = query.format === 'mso_mdoc' ? query.meta.doctype_value : undefined;
            const outcome = (error?: VerificationFailure): CredentialOutcome => ({ id: queryId, format: query.format, ...(docType ? { docType } : {}), verified: !error, ...(error ? { error: error.code, message: error.message } : {}) });
            const anchors = await this.deps.trust.forQuery(session.tenantId, query.trusted_authorities).catch((err: unknown) => {
                throw err instanceof VerificationFailure ? new PresentationFailure(err.code, err.message, outcome(err)) : err;
            });
            for (const token of tokens as string[]) {
                try {
                    if (query.format === 'mso_mdoc') {
                        const documents = await verifyMdocPresentation({
                            deviceResponse: token, clientId: data.clientId, nonce: data.nonce, responseUri: data.responseUri, jwkThumbprint: null,
                            sessionTranscript: binding.mdocTranscript,
                            ...(binding.docTypes && docType ? { docType } : {}),
                            now, skewSeconds: data.skewSeconds, anchors
                        });
                        // One DeviceResponse can carry several documents: as many presentations as separate tokens
                        // (spec 7.2), rather than an error of the DCQL matcher that would read as verification_error.
                        if (documents.length > 1 && !query.multiple) {
                            throw several();
                        }
                        for (const document of documents) {
                            const status = await this.checkStatus(session, data, queryId, document.issuerAnchor, document.statusReference, now);
                            const trust = withTrust ? { trust: trustOutcome(document.issuerAnchor, anchors, document.x5chain, status === 'valid') } : {};
                            presented.push({ queryId, format: 'mso_mdoc', docType: document.docType, claims: document.claims, raw: token, ...(status ? { status } : {}), ...trust });
                        }
                    }
                    else {
                        const hashes = data.transactionData
                            ?.filter((t) => (JSON.parse(Buffer.from(t, 'base64url').toString('utf8')).credential_ids as string[]).includes(queryId))
                            .map(b64urlSha256);
                        const result = await verifySdJwtPresentation({ presentation: token, clientId: binding.audience, nonce: data.nonce, now, skewSeconds: data.skewSeconds, anchors, ...(hashes?.length ? { transactionDataHashes: hashes } : {}) });
                        // Holder binding is required unless the query says otherwise; without it a copied credential
                        // could be replayed, as no KB-JWT ties it to this nonce and client.
                        if (!result.keyBound && (query as { require_cryptographic_holder_binding?: boolean }).require_cryptographic_holder_binding !== false) {
                            throw VerificationFailure.presentation('invalid key binding (the credential is not bound to a holder key)');
                        }
                        const status = await this.checkStatus(session, data, queryId, result.issuerAnchor, result.statusReference, now);
                        const trust = withTrust ? { trust: trustOutcome(result.issuerAnchor, anchors, sdJwtX5c(token), status === 'valid') } : {};
                        presented.push({ queryId, format: 'dc+sd-jwt', vct: result.vct, claims: result.claims, raw: token, keyBound: result.keyBound, ...(status ? { status } : {}), ...trust });
                    }
                }
                catch (err) {
                    if (err instanceof VerificationFailure) {
                        this.deps.log.info({ sessionId: session.id, credentialQuery: queryId, code: err.code, detail: err.detail }, 'presentation did not verify');
                        throw new PresentationFailure(err.code, err.message, outcome(err));
                    }
                    throw err;
                }
            }
        }
        const match = matchDcql(data.dcqlQuery, presented);
        if (!match.ok) {
            throw new PresentationFailure(match.code, match.message);
        }
        return presented;
    }

    /**
     * The status list check of one verified credential under the session's statusCheckMode (strict when the session
     * predates it). Only a credential that passed every other check gets here, so a list is fetched only for the
     * URI of an issuer the verifier trusts.
     */
    private async checkStatus(session: Session<'presentation'>, data: PresentationData, queryId: string, anchor: TrustAnchor, reference: StatusReference | undefined, now: Date): Promise<CheckedStatus | undefined> {
        if (!reference) {
            return undefined;
        }
        const checked = await this.deps.status.check({ reference, anchor, mode: data.statusCheckMode, now, skewSeconds: data.skewSeconds });
        if (checked?.detail) {
            this.deps.log.warn({ sessionId: session.id, credentialQuery: queryId, detail: checked.detail }, 'status list unavailable; credential accepted with status unknown (best_effort)');
        }
        return checked?.status;
    }

    private async succeed(session: Session<'presentation'>, data: PresentationData, presented: PresentedCredential[], options: ConcludeOptions): Promise<Concluded> {
        const responseCode = Crypto.randomBytes(24).toString('base64url');
        const queryIds = [...new Set(presented.map((p) => p.queryId))];
        // Spec 2.7: OpenID4VP {id, values} per query; ISO 18013-7 {id, format, docType, claims} per document.
        const credentials: Array<Record<string, unknown> & { id: string }> = options.iso
            ? presented.map((p) => ({ id: p.queryId, format: p.format, docType: p.docType, claims: p.claims }))
            : queryIds.map((id) => ({ id, values: presented.filter((p) => p.queryId === id).map(presentedValues) }));
        const outcome = {
            result: 'success',
            credentials: queryIds.map((id) => {
                const ofQuery = presented.filter((p) => p.queryId === id);
                const first = ofQuery[0]!;
                const status = ofQuery.some((p) => p.status === 'unknown') ? 'unknown' : ofQuery.some((p) => p.status === 'valid') ? 'valid' : undefined;
                return { id, format: first.format, ...(first.docType ? { docType: first.docType } : {}), verified: true, ...(status ? { status } : {}), ...(first.trust ? { trust: first.trust } : {}) } satisfies CredentialOutcome;
            })
        };
        const rawTokens = Object.fromEntries(queryIds.map((id) => [id, presented.filter((p) => p.queryId === id).map((p) => p.raw)]));
        await this.record(session, { outcome, credentials }, { status: 'completed', responseCode, consumedAt: new Date().toISOString() }, options.from);
        const webhookBody = {
            status: 'completed',
            outcome,
            credentials: credentials.map((c) => {
                const raw = data.webhook?.includeRawTokensFor?.includes(c.id) ? { rawToken: rawTokens[c.id]!.length === 1 ? rawTokens[c.id]![0] : rawTokens[c.id] } : {};
                return { ...c, ...raw };
            }),
            session: session.id,
            ...(data.transactionData ? { transaction_data: data.transactionData } : {}),
            ...(session.reference ? { reference: session.reference } : {})
        };
        const redirect = await this.notify(session, data, webhookBody);
        const target = redirect ?? data.redirectUri;
        return { ok: true, responseCode, ...(target ? { redirectUri: this.withParams(target, session.id, { response_code: responseCode }) } : {}) };
    }

    private async fail(session: Session<'presentation'>, data: PresentationData, failure: PresentationFailure, options: ConcludeOptions): Promise<Concluded> {
        // Some reasons quote what the wallet sent (a query id, a KB-JWT typ): recorded display-safe, as spec 2.7 says.
        const message = displaySafe(failure.message);
        const outcome = {
            result: 'failed',
            ...(failure.code ? { error: failure.code } : {}),
            message,
            ...(failure.credential ? { credentials: [failure.credential] } : {})
        };
        await this.record(session, { outcome }, { status: 'failed', failureCode: failure.code ?? null, errorReason: message.slice(0, 1000) }, options.from);
        const redirect = await this.notify(session, data, { status: 'failed', outcome, session: session.id, ...(data.transactionData ? { transaction_data: data.transactionData } : {}), ...(session.reference ? { reference: session.reference } : {}) });
        // Spec 6.2: for ISO 18013-7, failures never redirect.
        const target = options.iso ? undefined : redirect ?? data.redirectUri;
        return { ok: false, ...(failure.code ? { code: failure.code } : {}), message, ...(target ? { redirectUri: this.withParams(target, session.id, { error: 'invalid_request', error_description: message }) } : {}) };
    }

    private async walletError(session: Session<'presentation'>, data: PresentationData, { error, description }: WalletError, from: 'active' | 'fetched' = 'fetched'): Promise<WalletAnswer> {
        const message = `Wallet error: ${error}: ${description}`;
        const outcome = { result: 'failed', error, message };
        await this.record(session, { outcome }, { status: 'failed', failureCode: error.slice(0, 64), errorReason: message.slice(0, 1000) }, from);
        const redirect = await this.notify(session, data, { status: 'failed', outcome, session: session.id, ...(data.transactionData ? { transaction_data: data.transactionData } : {}), ...(session.reference ? { reference: session.reference } : {}) });
        const target = redirect ?? data.redirectUri;
        return { status: 200, body: target ? { redirect_uri: this.withParams(target, session.id, { error, error_description: description }) } : {} };
    }

    /**
     * Spec 6.2/6.3: one attempt to the target resolved when the request was made; failures are logged and change
     * nothing; a `{redirectUri}` answer overrides the redirect.
     */
    private async notify(session: Session<'presentation'>, data: PresentationData, body: object): Promise<string | undefined> {
        if (!data.webhook) {
            return undefined;
        }
        const result = await deliverWebhook(this.deps.outbound, data.webhook, body, this.deps.log);
        const answer = result.body as { redirectUri?: unknown } | undefined;
        if (!result.delivered || typeof answer?.redirectUri !== 'string') {
            return undefined;
        }
        // An override the wallet could not follow is ignored (logged), never a failure after the result is recorded.
        try {
            this.withParams(answer.redirectUri, session.id, {});
            return answer.redirectUri;
        }
        catch {
            this.deps.log.warn({ sessionId: session.id }, 'webhook answered a redirectUri that is not an http(s) URL; ignored');
            return undefined;
        }
    }

    private withParams(target: string, sessionId: string, params: Record<string, string>): string {
        const url = new URL(target.replaceAll('{sessionId}', encodeURIComponent(sessionId)));
        if (!['http:', 'https:'].includes(url.protocol)) {
            throw new Error('redirect target must be http(s)');
        }
        for (const [key, value] of Object.entries(params)) {
            url.searchParams.set(key, value);
        }
        return url.toString();
    }
}

/**
 * The disclosed claims of one presentation as the session, event stream and webhooks show them (spec 6.2, contract):
 * an SD-JWT VC without its holder binding (cnf) and status list reference (status). An mdoc's device key and status
 * sit in its MSO, never among its claims, so its namespaces are shown as they are.
 */
const presentedValues = (presented: PresentedCredential): Record<string, unknown> => {
    if (presented.format !== 'dc+sd-jwt') {
        return presented.claims;
    }
    const { cnf: _cnf, status: _status, ...rest } = presented.claims;
    return rest;
};

interface WalletError {
    error: string;
    description: string;
}

/** RFC 6749 section 4.1.2.1: error codes use printable ASCII without " and \. */
const ERROR_CODE = /^[\x20\x21\x23-\x5B\x5D-\x7E]+$/;
/** Control characters (NUL among them, which PostgreSQL text cannot hold) shown as U+FFFD. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const displaySafe = (text: string): string => text.replace(/[\u0000-\u001F\u007F]/g, '\uFFFD');

/**
 * The OAuth error of a wallet's error response. An error that is no OAuth error code is refused (400, nothing
 * recorded: the session stays open for a well-formed answer); the description is recorded display-safe.
 */
const walletErrorOf = (payload: Record<string, unknown>): WalletError => {
    const error = payload.error as string;
    if (!ERROR_CODE.test(error)) {
        throw new OAuthError(400, 'invalid_request', 'error must be an OAuth error code (printable ASCII characters, RFC 6749)');
    }
    return { error, description: typeof payload.error_description === 'string' ? displaySafe(payload.error_description) : '' };
};

/** The OpenID4VP response endpoint's answer (contract): 200 {} / {redirect_uri}, or 400 {error, error_description, redirect_uri?}. */
const oid4vpAnswer = (concluded: Concluded): WalletAnswer => {
    if (concluded.ok) {
        return { status: 200, body: concluded.redirectUri ? { redirect_uri: concluded.redirectUri } : {} };
    }
    return { status: 400, body: { error: 'invalid_request', error_description: concluded.message, ...(concluded.redirectUri ? { redirect_uri: concluded.redirectUri } : {}) } };
};
