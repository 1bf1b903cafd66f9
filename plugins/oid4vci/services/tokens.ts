import Crypto from 'node:crypto';
import { OAuthError } from '../../../lib/errors';
import type { LiveSession, Session } from '../../sessions/services/session-service';
import type { DpopVerifier } from '../../../lib/oauth/dpop';
import { sha256Hex, type SessionService } from '../../sessions/services/session-service';
import type { RequestSessionLog } from '../../sessions/session-log';
import type { Issuer } from '../issuer';
import { PRE_AUTHORIZED_GRANT, type OfferService } from './offers';

export const ACCESS_TOKEN_TTL_SECONDS = 300;

const invalidGrant = (description: string) => new OAuthError(400, 'invalid_grant', description);
/** One answer for a wrong tx_code and for a right one that lost a race, so the answer never tells which was right. */
const TX_CODE_NOT_ACCEPTED = () => invalidGrant('The transaction code was not accepted');

const sameHash = (value: string, hash: string): boolean => {
    const a = Buffer.from(sha256Hex(value), 'hex');
    const b = Buffer.from(hash, 'hex');
    return a.length === b.length && Crypto.timingSafeEqual(a, b);
};

export interface TokenRequest {
    grant_type?: string;
    'pre-authorized_code'?: string;
    tx_code?: string;
}

export interface WalletRequest {
    tenantId: string;
    url: string;
    method: string;
    dpop?: string | string[];
    /** The request's session flow log: the token endpoint binds the session it resolves by the code. */
    sessionLog: RequestSessionLog;
}

/** Pre-authorized code grant: the code is single use, the tx_code locks after `txCodeMaxAttempts` guesses. */
export class TokenEndpoint {
    constructor(private readonly deps: { issuer: Issuer; sessions: SessionService; offers: OfferService; dpop: DpopVerifier }) {}

    async exchange(request: WalletRequest, body: TokenRequest): Promise<{ access_token: string; token_type: 'Bearer' | 'DPoP'; expires_in: number }> {
        if (body.grant_type !== PRE_AUTHORIZED_GRANT) {
            throw new OAuthError(400, 'unsupported_grant_type', `Only ${PRE_AUTHORIZED_GRANT} is supported`);
        }
        const code = body['pre-authorized_code'];
        if (typeof code !== 'string' || !code) {
            throw new OAuthError(400, 'invalid_request', 'pre-authorized_code is required as a string');
        }
        if (body.tx_code !== undefined && typeof body.tx_code !== 'string') {
            throw new OAuthError(400, 'invalid_request', 'tx_code must be a string');
        }
        const { sessions, issuer, offers } = this.deps;
        const settings = await issuer.settings(request.tenantId);
        const dpop = request.dpop !== undefined
            ? await this.deps.dpop.verify({ tenantId: request.tenantId, proof: Array.isArray(request.dpop) ? request.dpop.join(',') : request.dpop, method: request.method, url: request.url })
            : undefined;
        if (!dpop && settings.dPopRequired) {
            throw new OAuthError(400, 'invalid_dpop_proof', 'This issuer requires a DPoP proof');
        }

        const session = await sessions.findBy('issuance', request.tenantId, 'codeHash', sha256Hex(code));
        if (!session) {
            throw invalidGrant('The pre-authorized code is not valid');
        }
        const log = request.sessionLog.bind(session, 'token');
        const retentionSeconds = await offers.retentionSeconds(request.tenantId);
        this.checkRedeemable(session, retentionSeconds);
        const { data } = session;
        if (data.txCodeHash) {
            if (!body.tx_code) {
                throw new OAuthError(400, 'invalid_request', 'tx_code is required');
            }
            await this.reserveGuess(session, settings.txCodeMaxAttempts, retentionSeconds);
            if (!sameHash(body.tx_code, data.txCodeHash)) {
                throw TX_CODE_NOT_ACCEPTED();
            }
        }

        const accessToken = Crypto.randomBytes(32).toString('base64url');
        const redeemed = await sessions.update(session.id, {
            codeUsedAt: new Date().toISOString(),
            accessTokenHash: sha256Hex(accessToken),
            accessTokenExpiresAt: new Date(Date.now() + ACCESS_TOKEN_TTL_SECONDS * 1000).toISOString(),
            data: { ...data, ...(dpop ? { dpopJkt: dpop.jkt } : {}) }
        }, { isNull: ['codeUsedAt'], status: ['active', 'fetched'] });
        if (!redeemed) {
            // A right tx_code that lost the race to a concurrent request must not answer otherwise than a wrong one.
            throw data.txCodeHash ? TX_CODE_NOT_ACCEPTED() : invalidGrant('The pre-authorized code has already been used');
        }
        log.info({ event: 'token_issued', tokenType: dpop ? 'DPoP' : 'Bearer' }, 'access token issued');
        return { access_token: accessToken, token_type: dpop ? 'DPoP' : 'Bearer', expires_in: ACCESS_TOKEN_TTL_SECONDS };
    }

    /**
     * Counts a tx_code guess before it is evaluated, in one conditional update: only while the code is unused, its
     * session open and fewer than `maxAttempts` guesses were counted. So however many guesses race, at most
     * `maxAttempts` are ever compared. A refused guess is answered from the session alone, never from the tx_code.
     */
    private async reserveGuess(session: Session, maxAttempts: number, retentionSeconds: number): Promise<void> {
        const reserved = await this.deps.sessions.update(session.id, {}, {
            isNull: ['codeUsedAt'],
            status: ['active', 'fetched'],
            below: { column: 'txCodeFailures', limit: maxAttempts },
            increment: 'txCodeFailures'
        });
        if (!reserved) {
            const current = await this.deps.sessions.get(session.id);
            this.checkRedeemable(current ?? session, retentionSeconds);
            throw invalidGrant('The pre-authorized code is locked after too many wrong transaction codes');
        }
    }

    /** A code is good while unused, its session open and within both its offer lifetime and the retention period. */
    private checkRedeemable(session: Session, retentionSeconds: number): void {
        const now = Date.now();
        if (session.codeUsedAt) {
            throw invalidGrant('The pre-authorized code has already been used');
        }
        if (['completed', 'failed', 'expired'].includes(session.status)) {
            throw invalidGrant('The offer is no longer valid');
        }
        if ((session.expiresAt && Date.parse(session.expiresAt) <= now) || Date.parse(session.createdAt) + retentionSeconds * 1000 <= now) {
            throw invalidGrant('The pre-authorized code has expired');
        }
    }

    /** The session an access token belongs to; checks expiry and the DPoP binding. */
    async authenticate(request: WalletRequest, authorization: string | undefined): Promise<LiveSession<'issuance'>> {
        const match = /^(Bearer|DPoP)\s+([A-Za-z0-9\-._~+/]+=*)$/i.exec(authorization ?? '');
        if (!match) {
            throw new OAuthError(401, 'invalid_token', 'An access token is required in the Authorization header', { 'WWW-Authenticate': 'Bearer, DPoP algs="ES256"' });
        }
        const [, scheme, token] = match;
        const session = await this.deps.sessions.findBy('issuance', request.tenantId, 'accessTokenHash', sha256Hex(token!));
        if (!session || !session.accessTokenExpiresAt || Date.parse(session.accessTokenExpiresAt) <= Date.now()) {
            throw new OAuthError(401, 'invalid_token', 'The access token is not valid', { 'WWW-Authenticate': 'Bearer error="invalid_token"' });
        }
        const jkt = session.data.dpopJkt;
        if (jkt) {
            if (scheme!.toLowerCase() !== 'dpop') {
                throw new OAuthError(401, 'invalid_token', 'This access token is DPoP-bound: use the DPoP scheme with a proof', { 'WWW-Authenticate': 'DPoP error="invalid_token"' });
            }
            let proof;
            try {
                proof = await this.deps.dpop.verify({ tenantId: request.tenantId, proof: Array.isArray(request.dpop) ? request.dpop.join(',') : request.dpop, method: request.method, url: request.url, accessToken: token });
            }
            catch (err) {
                // At a protected resource a bad proof is a 401 with a DPoP challenge (RFC 9449 section 7.1). Anything
                // else (a database fault) is not the wallet's doing and must not show its message: it stays a 500.
                if (!(err instanceof OAuthError)) {
                    throw err;
                }
                const e = err;
                throw new OAuthError(401, e.oauthError ?? 'invalid_dpop_proof', e.message, { 'WWW-Authenticate': `DPoP error="${e.oauthError ?? 'invalid_dpop_proof'}"`, ...(e.headers ?? {}) });
            }
            if (proof.jkt !== jkt) {
                throw new OAuthError(401, 'invalid_dpop_proof', 'The DPoP proof is signed by another key than the token is bound to', { 'WWW-Authenticate': 'DPoP error="invalid_dpop_proof"' });
            }
        }
        else if (scheme!.toLowerCase() !== 'bearer') {
            throw new OAuthError(401, 'invalid_token', 'This access token is not DPoP-bound', { 'WWW-Authenticate': 'Bearer error="invalid_token"' });
        }
        return session;
    }
}
