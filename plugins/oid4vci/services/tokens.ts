import Crypto from 'node:crypto';
import { OAuthError } from '../../../lib/errors';
import type { LiveSession, Session } from '../../sessions/services/session-service';
import type { DpopVerifier } from '../../../lib/oauth/dpop';
import { sha256Hex, type SessionService } from '../../sessions/services/session-service';
import type { RequestSessionLog } from '../../sessions/session-log';
import type { Issuer } from '../issuer';
import { verifierMatches } from './authorization';
import type { ClientAuthenticator } from './client-authentication';
import { AUTHORIZATION_CODE_GRANT, authorizationCodeHash, PRE_AUTHORIZED_GRANT, type OfferService } from './offers';

export const ACCESS_TOKEN_TTL_SECONDS = 300;
export const REFRESH_TOKEN_GRANT = 'refresh_token';
/** Used refresh tokens remembered per family: a replay of any of them revokes the family. */
const REMEMBERED_REFRESH_TOKENS = 100;
// A refresh token names its session (a UUID) and carries 32 random bytes.
const REFRESH_TOKEN = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.([A-Za-z0-9_-]{43})$/;

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
    code?: string;
    code_verifier?: string;
    redirect_uri?: string;
    refresh_token?: string;
    client_id?: string;
}

export interface TokenAnswer {
    access_token: string;
    token_type: 'Bearer' | 'DPoP';
    expires_in: number;
    refresh_token?: string;
    authorization_details?: Array<{ type: 'openid_credential'; credential_configuration_id: string; credential_identifiers: string[] }>;
}

/** Thrown out of a refresh token rotation to abandon it. */
class RefreshRefused extends Error {
    constructor(readonly reused: boolean) {
        super('refresh refused');
    }
}

export interface WalletRequest {
    tenantId: string;
    url: string;
    method: string;
    dpop?: string | string[];
    /** All request headers (client authentication reads its own). */
    headers?: Record<string, string | string[] | undefined>;
    /** The request's session flow log: the token endpoint binds the session it resolves by the code. */
    sessionLog: RequestSessionLog;
}

/**
 * The token endpoint. Pre-authorized code grant: the code is single use, the tx_code locks after
 * `txCodeMaxAttempts` guesses. Authorization code grant (HAIP): PKCE S256, the client and redirect URI of the pushed
 * request, a 60 s single-use code, DPoP with server nonces. Refresh token grant (refreshTokenEnabled): rotating,
 * single-use tokens bound to the client and the DPoP key of the first token; a replayed one revokes its family.
 */
export class TokenEndpoint {
    constructor(private readonly deps: { issuer: Issuer; sessions: SessionService; offers: OfferService; dpop: DpopVerifier; clients: ClientAuthenticator }) {}

    async exchange(request: WalletRequest, body: TokenRequest): Promise<TokenAnswer> {
        switch (body.grant_type) {
            case PRE_AUTHORIZED_GRANT:
                return this.preAuthorized(request, body);
            case AUTHORIZATION_CODE_GRANT:
                return this.authorizationCode(request, body);
            case REFRESH_TOKEN_GRANT:
                return this.refresh(request, body);
            default:
                throw new OAuthError(400, 'unsupported_grant_type', `grant_type must be ${PRE_AUTHORIZED_GRANT}, ${AUTHORIZATION_CODE_GRANT} or ${REFRESH_TOKEN_GRANT}`);
        }
    }

    /** The verified DPoP proof of a token request, when it has one; required by dPopRequired, nonces by the flow. */
    private async tokenDpop(request: WalletRequest, dPopRequired: boolean, requireNonce: boolean) {
        const dpop = request.dpop !== undefined
            ? await this.deps.dpop.verify({ tenantId: request.tenantId, proof: Array.isArray(request.dpop) ? request.dpop.join(',') : request.dpop, method: request.method, url: request.url, requireNonce })
            : undefined;
        if (!dpop && dPopRequired) {
            throw new OAuthError(400, 'invalid_dpop_proof', 'This issuer requires a DPoP proof');
        }
        return dpop;
    }

    private async preAuthorized(request: WalletRequest, body: TokenRequest): Promise<TokenAnswer> {
        const code = body['pre-authorized_code'];
        if (typeof code !== 'string' || !code) {
            throw new OAuthError(400, 'invalid_request', 'pre-authorized_code is required as a string');
        }
        if (body.tx_code !== undefined && typeof body.tx_code !== 'string') {
            throw new OAuthError(400, 'invalid_request', 'tx_code must be a string');
        }
        const { sessions, issuer, offers } = this.deps;
        // HAIP: with walletAttestationRequired the pre-authorized grant needs the attestation as well.
        await this.deps.clients.authenticateAnonymous({ tenantId: request.tenantId, headers: request.headers ?? {}, body: body as Record<string, unknown> });
        const settings = await issuer.settings(request.tenantId);
        const dpop = await this.tokenDpop(request, settings.dPopRequired, false);

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

    private async authorizationCode(request: WalletRequest, body: TokenRequest): Promise<TokenAnswer> {
        for (const name of ['code', 'code_verifier', 'redirect_uri'] as const) {
            // redirect_uri only when sent: a code of the interactive authorization endpoint may have none (RFC 6749 4.1.3).
            if ((name !== 'redirect_uri' || body[name] !== undefined) && (typeof body[name] !== 'string' || !body[name])) {
                throw new OAuthError(400, 'invalid_request', `${name} is required as a string`);
            }
        }
        const client = await this.deps.clients.authenticate({ tenantId: request.tenantId, headers: request.headers ?? {}, body: body as Record<string, unknown> });
        const { sessions, issuer } = this.deps;
        const settings = await issuer.settings(request.tenantId);
        const dpop = await this.tokenDpop(request, settings.dPopRequired, true);

        // Found by an authorization code, the session has the grant that issued it.
        const session = await sessions.findBy('issuance', request.tenantId, 'codeHash', authorizationCodeHash(body.code!));
        if (!session) {
            throw invalidGrant('The authorization code is not valid');
        }
        const grant = session.data.authorization!;
        const log = request.sessionLog.bind(session, 'token');
        if (session.codeUsedAt) {
            throw invalidGrant('The authorization code has already been used');
        }
        if (Date.parse(grant.codeExpiresAt) <= Date.now() || ['completed', 'failed', 'expired'].includes(session.status)) {
            throw invalidGrant('The authorization code has expired');
        }
        if (client.clientId !== grant.clientId) {
            throw invalidGrant('The authorization code was issued to another client');
        }
        // A wallet that authenticated by attestation at PAR is not downgraded to a public client at the token endpoint.
        if (grant.instanceJkt !== undefined && client.instanceJkt !== grant.instanceJkt) {
            throw invalidGrant('The authorization code was issued to another wallet instance: authenticate with its wallet attestation');
        }
        if (grant.redirectUri !== undefined && body.redirect_uri === undefined) {
            throw new OAuthError(400, 'invalid_request', 'redirect_uri is required as a string');
        }
        if (body.redirect_uri !== grant.redirectUri) {
            throw invalidGrant('redirect_uri is not the one of the authorization request');
        }
        if (!verifierMatches(body.code_verifier, grant.codeChallenge)) {
            throw invalidGrant('code_verifier does not match the code_challenge');
        }
        if (grant.dpopJkt && dpop?.jkt !== grant.dpopJkt) {
            throw invalidGrant('The authorization code is bound to another DPoP key');
        }

        const accessToken = Crypto.randomBytes(32).toString('base64url');
        const refreshToken = settings.refreshTokenEnabled ? `${session.id}.${Crypto.randomBytes(32).toString('base64url')}` : undefined;
        const redeemed = await sessions.update(session.id, {
            codeUsedAt: new Date().toISOString(),
            accessTokenHash: sha256Hex(accessToken),
            accessTokenExpiresAt: new Date(Date.now() + ACCESS_TOKEN_TTL_SECONDS * 1000).toISOString(),
            data: {
                ...session.data,
                ...(dpop ? { dpopJkt: dpop.jkt } : {}),
                ...(refreshToken ? { refresh: { hash: sha256Hex(refreshToken), used: [], clientId: client.clientId, ...(dpop ? { jkt: dpop.jkt } : {}), ...(client.instanceJkt ? { instanceJkt: client.instanceJkt } : {}) } } : {})
            }
        }, { isNull: ['codeUsedAt'], status: ['active', 'fetched'] });
        if (!redeemed) {
            throw invalidGrant('The authorization code has already been used');
        }
        log.info({ event: 'token_issued', tokenType: dpop ? 'DPoP' : 'Bearer', grant: AUTHORIZATION_CODE_GRANT }, 'access token issued');
        return {
            access_token: accessToken,
            token_type: dpop ? 'DPoP' : 'Bearer',
            expires_in: ACCESS_TOKEN_TTL_SECONDS,
            ...(refreshToken ? { refresh_token: refreshToken } : {}),
            ...(grant.authorizationDetails
                ? { authorization_details: grant.credentialConfigurationIds.map((id) => ({ type: 'openid_credential' as const, credential_configuration_id: id, credential_identifiers: [id] })) }
                : {})
        };
    }

    private async refresh(request: WalletRequest, body: TokenRequest): Promise<TokenAnswer> {
        if (typeof body.refresh_token !== 'string' || !body.refresh_token) {
            throw new OAuthError(400, 'invalid_request', 'refresh_token is required as a string');
        }
        const client = await this.deps.clients.authenticate({ tenantId: request.tenantId, headers: request.headers ?? {}, body: body as Record<string, unknown> });
        const { sessions, issuer, offers } = this.deps;
        const settings = await issuer.settings(request.tenantId);
        if (!settings.refreshTokenEnabled) {
            throw invalidGrant('This issuer does not accept refresh tokens');
        }
        const dpop = await this.tokenDpop(request, settings.dPopRequired, true);
        const notValid = () => invalidGrant('The refresh token is not valid');
        const match = REFRESH_TOKEN.exec(body.refresh_token);
        const found = match ? await sessions.get(match[1]!) : undefined;
        const session = found?.type === 'issuance' && found.tenantId === request.tenantId && found.data ? found as LiveSession<'issuance'> : undefined;
        const family = session?.data.refresh;
        if (!session || !family || family.revokedAt) {
            throw notValid();
        }
        const log = request.sessionLog.bind(session, 'token');
        const retentionSeconds = await offers.retentionSeconds(request.tenantId);
        if (['completed', 'failed', 'expired'].includes(session.status) || Date.parse(session.createdAt) + retentionSeconds * 1000 <= Date.now()) {
            throw invalidGrant('The issuance session of this refresh token is over');
        }
        if (client.clientId !== family.clientId) {
            throw invalidGrant('The refresh token was issued to another client');
        }
        // Every instance of a wallet shares its client_id: the family belongs to the attested instance's key.
        if (family.instanceJkt !== undefined && client.instanceJkt !== family.instanceJkt) {
            throw invalidGrant('The refresh token was issued to another wallet instance: authenticate with its wallet attestation');
        }
        if (family.jkt !== dpop?.jkt) {
            throw invalidGrant(family.jkt ? 'The refresh token is bound to another DPoP key' : 'The refresh token is not DPoP-bound');
        }

        const presented = sha256Hex(body.refresh_token);
        const accessToken = Crypto.randomBytes(32).toString('base64url');
        const next = `${session.id}.${Crypto.randomBytes(32).toString('base64url')}`;
        try {
            // Rotation is one optimistic update of the sealed data: of concurrent uses of one token exactly one
            // finds it current; the others re-read, find it used, and so revoke the family.
            const rotated = await sessions.mutateData<'issuance'>(session, (data) => {
                const current = data.refresh!;
                if (current.revokedAt || current.hash !== presented) {
                    throw new RefreshRefused(!current.revokedAt && current.used.includes(presented));
                }
                return { ...data, refresh: { ...current, hash: sha256Hex(next), used: [...current.used, presented].slice(-REMEMBERED_REFRESH_TOKENS) } };
            }, {
                accessTokenHash: sha256Hex(accessToken),
                accessTokenExpiresAt: new Date(Date.now() + ACCESS_TOKEN_TTL_SECONDS * 1000).toISOString()
            }, { status: ['active', 'fetched'] });
            if (!rotated) {
                throw notValid();
            }
        }
        catch (err) {
            if (!(err instanceof RefreshRefused)) {
                throw err;
            }
            if (err.reused) {
                await this.revokeFamily(session);
                log.warn({ event: 'refresh_token_reused' }, 'a used refresh token was presented again: its family is revoked');
            }
            throw notValid();
        }
        log.info({ event: 'token_issued', tokenType: dpop ? 'DPoP' : 'Bearer', grant: REFRESH_TOKEN_GRANT }, 'access token refreshed');
        return { access_token: accessToken, token_type: dpop ? 'DPoP' : 'Bearer', expires_in: ACCESS_TOKEN_TTL_SECONDS, refresh_token: next };
    }

    /** Ends a refresh token family: no refresh token of it is accepted again, and its access token stops working. */
    private async revokeFamily(session: Session): Promise<void> {
        await this.deps.sessions.mutateData<'issuance'>(session.id, (data) => ({ ...data, refresh: { ...data.refresh!, revokedAt: new Date().toISOString() } }), {
            accessTokenHash: null,
            accessTokenExpiresAt: null
        });
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
                // Tokens of the authorization code flow (HAIP) need server nonces in their proofs as well.
                proof = await this.deps.dpop.verify({
                    tenantId: request.tenantId, proof: Array.isArray(request.dpop) ? request.dpop.join(',') : request.dpop, method: request.method, url: request.url, accessToken: token,
                    requireNonce: session.data.authorization !== undefined
                });
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
