import Crypto from 'node:crypto';
import { ColumnCipher } from '../../../lib/crypto/column-cipher';
import type { SingleUseStore } from '../../../lib/db/single-use';
import { OAuthError } from '../../../lib/errors';
import type { DpopVerifier } from '../../../lib/oauth/dpop';
import type { LiveSession, SessionService } from '../../sessions/services/session-service';
import { tenantUrl, type Issuer } from '../issuer';
import type { ClientAuthenticator } from './client-authentication';
import { authorizationCodeHash, issuerStateHash, type AuthorizationGrant, type OfferService } from './offers';
import type { WalletRequest } from './tokens';

export const REQUEST_URI_TTL_SECONDS = 60;
export const AUTHORIZATION_CODE_TTL_SECONDS = 60;
export const REQUEST_URI_PREFIX = 'urn:ietf:params:oauth:request_uri:';

const LIMITS = { redirectUri: 2048, state: 1024, issuerState: 256, scope: 1024, authorizationDetails: 16384, details: 20 };
// RFC 7636 4.2: the S256 challenge is BASE64URL(SHA256(verifier)) without padding, always 43 characters.
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;
// RFC 7636 4.1: 43 to 128 unreserved characters.
const CODE_VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
const JKT = /^[A-Za-z0-9_-]{43}$/;
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;
// Schemes a redirect may never use: they run code or reach local content in the user agent, or are plain http.
const REFUSED_SCHEMES = new Set(['javascript:', 'data:', 'vbscript:', 'file:', 'blob:', 'about:', 'filesystem:', 'ftp:', 'ws:', 'wss:']);
const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

/** What a pushed authorization request holds until the wallet comes to the authorization endpoint. */
interface PushedRequest {
    v: 1;
    id: string;
    tenantId: string;
    clientId: string;
    redirectUri: string;
    codeChallenge: string;
    credentialConfigurationIds: string[];
    /** How the wallet named the credentials: an error about them names the same parameter. */
    via: 'authorization_details' | 'scope';
    state?: string;
    issuerState?: string;
    dpopJkt?: string;
    /** The attested wallet instance's key (thumbprint): the code goes to that instance only. */
    instanceJkt?: string;
}

export interface ParAnswer {
    request_uri: string;
    expires_in: number;
    /** A fresh DPoP nonce for the wallet's next proof, when it sent one. */
    dpopNonce?: string;
}

const parKey = (id: string) => `par:${id}`;

/** Thrown out of a data change to abandon it: another request authorized the offer first. */
class AlreadyAuthorized extends Error {}

export const invalidRequest = (description: string) => new OAuthError(400, 'invalid_request', description);

/** The PKCE parameters of an authorization request: S256 only (HAIP), the challenge in its S256 form. */
export const s256Challenge = (body: Record<string, unknown>): string => {
    if (body.code_challenge_method !== 'S256') {
        throw invalidRequest('PKCE with code_challenge_method S256 is required');
    }
    if (typeof body.code_challenge !== 'string' || !S256_CHALLENGE.test(body.code_challenge)) {
        throw invalidRequest('code_challenge must be an S256 challenge (43 base64url characters)');
    }
    return body.code_challenge;
};

/** Whether `verifier` is a PKCE code verifier whose S256 challenge is `challenge` (RFC 7636 4.6). */
export const verifierMatches = (verifier: unknown, challenge: string): boolean => {
    if (typeof verifier !== 'string' || !CODE_VERIFIER.test(verifier)) {
        return false;
    }
    const computed = Buffer.from(Crypto.createHash('sha256').update(verifier, 'ascii').digest('base64url'));
    const expected = Buffer.from(challenge);
    return computed.length === expected.length && Crypto.timingSafeEqual(computed, expected);
};

/**
 * A new authorization code and what the token endpoint redeems it by: the session's codeHash and its grant, valid
 * AUTHORIZATION_CODE_TTL_SECONDS. The authorization endpoint and the interactive authorization endpoint both issue
 * codes through this, so the token endpoint treats them alike.
 */
export const newAuthorizationCode = (grant: Omit<AuthorizationGrant, 'codeExpiresAt'>): { code: string; codeHash: string; authorization: AuthorizationGrant } => {
    const code = Crypto.randomBytes(32).toString('base64url');
    return {
        code,
        codeHash: authorizationCodeHash(code),
        authorization: { ...grant, codeExpiresAt: new Date(Date.now() + AUTHORIZATION_CODE_TTL_SECONDS * 1000).toISOString() }
    };
};

/**
 * A redirect URI a public wallet may use, decided by RFC 8252 and the OAuth security BCP since wallets are not
 * registered: an absolute https URI; a loopback http URI (127.0.0.1, [::1], localhost); or a private-use scheme of a
 * native app (e.g. `eudi-wallet://authorize`). Never a fragment, user info, or a scheme that runs or reaches content
 * in the user agent (javascript:, data:, file:, ...), and never plain http elsewhere. The token request must repeat
 * it exactly.
 */
export const acceptableRedirectUri = (value: string): boolean => {
    if (value.length > LIMITS.redirectUri || CONTROL_CHARACTER.test(value) || /\s/.test(value) || value.includes('#')) {
        return false;
    }
    let url: URL;
    try {
        url = new URL(value);
    }
    catch {
        return false;
    }
    if (url.username || url.password || REFUSED_SCHEMES.has(url.protocol)) {
        return false;
    }
    if (url.protocol === 'https:') {
        return !!url.hostname;
    }
    if (url.protocol === 'http:') {
        return LOOPBACK_HOSTS.has(url.hostname);
    }
    return /^[a-z][a-z0-9+.-]*:$/.test(url.protocol);
};

/** `location` with the parameters added to its query (RFC 6749 3.1.2: the redirect URI's own query is kept). */
const withQuery = (location: string, params: Record<string, string | undefined>): string => {
    const url = new URL(location);
    for (const [name, value] of Object.entries(params)) {
        if (value !== undefined) {
            url.searchParams.set(name, value);
        }
    }
    return url.toString();
};

export const optionalString = (body: Record<string, unknown>, name: string, max: number): string | undefined => {
    const value = body[name];
    if (value === undefined) {
        return undefined;
    }
    if (typeof value !== 'string' || !value || value.length > max || CONTROL_CHARACTER.test(value)) {
        throw invalidRequest(`${name} must be a non-empty string of at most ${max} characters without control characters`);
    }
    return value;
};

/**
 * The built-in authorization server's front channel: pushed authorization requests (RFC 9126) and the authorization
 * endpoint. A pushed request is sealed (AES-GCM) into its request_uri, so any replica can read it; its single use
 * and 60 s lifetime are a row of the single-use store, consumed atomically by the authorization request.
 * Issuer-initiated requests (an authorization code offer's issuer_state) are authorized at once: the issuer backend
 * already knows the user. Wallet-initiated ones need the interactive authorization endpoint.
 */
export class AuthorizationService {
    private readonly sealer: ColumnCipher;

    constructor(private readonly deps: {
        publicUrl: string;
        issuer: Issuer;
        sessions: SessionService;
        offers: OfferService;
        singleUse: SingleUseStore;
        dpop: DpopVerifier;
        clients: ClientAuthenticator;
        /** At least 32 bytes; the request_uri sealing key is derived from it. */
        secret: Buffer;
    }) {
        this.sealer = new ColumnCipher(Buffer.from(Crypto.hkdfSync('sha256', deps.secret, 'hallmark', 'par-request-uri/v1', 32)));
    }

    async push(request: WalletRequest, body: Record<string, unknown>): Promise<ParAnswer> {
        const { tenantId } = request;
        for (const name of ['request_uri', 'request']) {
            if (body[name] !== undefined) {
                throw invalidRequest(`${name} is not accepted in a pushed authorization request`);
            }
        }
        const client = await this.deps.clients.authenticate({ tenantId, headers: request.headers ?? {}, body });
        if (body.response_type !== 'code') {
            throw new OAuthError(400, 'unsupported_response_type', 'response_type must be code');
        }
        const redirectUri = body.redirect_uri;
        if (typeof redirectUri !== 'string' || !acceptableRedirectUri(redirectUri)) {
            throw invalidRequest('redirect_uri is required: an absolute https URI, a loopback http URI or a private-use scheme URI, without fragment');
        }
        const codeChallenge = s256Challenge(body);
        // RFC 8707: the only protected resource here is this credential issuer.
        const resource = optionalString(body, 'resource', LIMITS.redirectUri);
        if (resource !== undefined && resource !== tenantUrl(this.deps.publicUrl, tenantId)) {
            throw new OAuthError(400, 'invalid_target', 'resource may only name this credential issuer');
        }
        const state = optionalString(body, 'state', LIMITS.state);
        const issuerState = optionalString(body, 'issuer_state', LIMITS.issuerState);
        const { ids, via } = await this.requestedCredentials(tenantId, body);

        let dpopJkt = optionalString(body, 'dpop_jkt', 43);
        if (dpopJkt !== undefined && !JKT.test(dpopJkt)) {
            throw invalidRequest('dpop_jkt must be a SHA-256 JWK thumbprint');
        }
        let dpopNonce: string | undefined;
        if (request.dpop !== undefined) {
            const proof = await this.deps.dpop.verify({ tenantId, proof: Array.isArray(request.dpop) ? request.dpop.join(',') : request.dpop, method: request.method, url: request.url, requireNonce: true });
            if (dpopJkt !== undefined && dpopJkt !== proof.jkt) {
                throw new OAuthError(400, 'invalid_dpop_proof', 'dpop_jkt is not the thumbprint of the DPoP proof key');
            }
            dpopJkt = proof.jkt;
            dpopNonce = this.deps.dpop.nonce();
        }

        const id = Crypto.randomBytes(24).toString('base64url');
        const pushed: PushedRequest = {
            v: 1, id, tenantId, clientId: client.clientId, redirectUri, codeChallenge, credentialConfigurationIds: ids, via,
            ...(state !== undefined ? { state } : {}),
            ...(issuerState !== undefined ? { issuerState } : {}),
            ...(dpopJkt !== undefined ? { dpopJkt } : {}),
            ...(client.instanceJkt !== undefined ? { instanceJkt: client.instanceJkt } : {})
        };
        await this.deps.singleUse.issue(tenantId, parKey(id), REQUEST_URI_TTL_SECONDS);
        return { request_uri: `${REQUEST_URI_PREFIX}${this.sealer.encrypt(JSON.stringify(pushed))}`, expires_in: REQUEST_URI_TTL_SECONDS, ...(dpopNonce ? { dpopNonce } : {}) };
    }

    /** The configurations named by authorization_details (type openid_credential) and by scope, each known here. */
    async requestedCredentials(tenantId: string, body: Record<string, unknown>): Promise<{ ids: string[]; via: PushedRequest['via'] }> {
        const credentials = await this.deps.issuer.credentialConfigs(tenantId);
        const ids = new Set<string>();
        const rawDetails = optionalString(body, 'authorization_details', LIMITS.authorizationDetails);
        if (rawDetails !== undefined) {
            const invalidDetails = (description: string) => new OAuthError(400, 'invalid_authorization_details', description);
            let details: unknown;
            try {
                details = JSON.parse(rawDetails);
            }
            catch {
                throw invalidDetails('authorization_details must be a JSON array');
            }
            if (!Array.isArray(details) || !details.length || details.length > LIMITS.details) {
                throw invalidDetails(`authorization_details must be a JSON array of 1 to ${LIMITS.details} objects`);
            }
            const issuerId = tenantUrl(this.deps.publicUrl, tenantId);
            for (const detail of details as unknown[]) {
                if (typeof detail !== 'object' || detail === null || Array.isArray(detail)) {
                    throw invalidDetails('every authorization_details entry must be an object');
                }
                const { type, credential_configuration_id: id, locations } = detail as Record<string, unknown>;
                if (type !== 'openid_credential') {
                    throw invalidDetails('authorization_details entries must be of type openid_credential');
                }
                if (typeof id !== 'string' || !credentials.some((c) => c.id === id)) {
                    throw invalidDetails('credential_configuration_id must name a credential configuration of this issuer');
                }
                if (locations !== undefined && (!Array.isArray(locations) || !locations.every((l) => l === issuerId))) {
                    throw invalidDetails('locations may only name this credential issuer');
                }
                ids.add(id);
            }
        }
        const scope = optionalString(body, 'scope', LIMITS.scope);
        if (scope !== undefined) {
            for (const value of scope.split(' ').filter(Boolean)) {
                const matching = credentials.filter((c) => c.config.scope === value);
                if (!matching.length) {
                    throw new OAuthError(400, 'invalid_scope', 'scope names a value that is no credential configuration\'s scope');
                }
                matching.forEach((c) => ids.add(c.id));
            }
        }
        if (!ids.size) {
            throw invalidRequest('authorization_details (type openid_credential) or scope must name the credentials');
        }
        return { ids: [...ids], via: rawDetails !== undefined ? 'authorization_details' : 'scope' };
    }

    /**
     * The authorization code offer an issuer_state belongs to, while it is redeemable: found by its issuer_state, the
     * session is an authorization code offer not authorized yet (authorizing it replaces the hash it is found by).
     */
    async redeemableOffer(tenantId: string, issuerState: string): Promise<LiveSession<'issuance'> | undefined> {
        const session = await this.deps.sessions.findBy('issuance', tenantId, 'codeHash', issuerStateHash(issuerState));
        const retentionSeconds = await this.deps.offers.retentionSeconds(tenantId);
        const now = Date.now();
        if (!session || session.status !== 'active' || session.data.flow !== 'authorization_code'
            || (session.expiresAt && Date.parse(session.expiresAt) <= now) || Date.parse(session.createdAt) + retentionSeconds * 1000 <= now) {
            return undefined;
        }
        return session;
    }

    private unseal(tenantId: string, requestUri: string): PushedRequest | undefined {
        if (!requestUri.startsWith(REQUEST_URI_PREFIX)) {
            return undefined;
        }
        try {
            const pushed = JSON.parse(this.sealer.decrypt(requestUri.slice(REQUEST_URI_PREFIX.length))) as PushedRequest;
            return pushed.tenantId === tenantId ? pushed : undefined;
        }
        catch {
            return undefined;
        }
    }

    /**
     * The authorization endpoint: a redirect (the code, or an error, with state and iss) once the pushed request is
     * known; a thrown 400 while it is not, since an unverified redirect URI must never be followed (RFC 6749 4.1.2.1).
     */
    async authorize(tenantId: string, query: Record<string, unknown>): Promise<{ location: string }> {
        const requestUri = query.request_uri;
        if (requestUri === undefined) {
            throw invalidRequest('This authorization server requires pushed authorization requests: push the request to the PAR endpoint and send its request_uri');
        }
        const pushed = typeof requestUri === 'string' ? this.unseal(tenantId, requestUri) : undefined;
        if (!pushed) {
            throw new OAuthError(400, 'invalid_request_uri', 'request_uri is not a request pushed to this authorization server');
        }
        if (query.client_id !== pushed.clientId) {
            throw invalidRequest('client_id must be the client_id of the pushed authorization request');
        }
        const iss = tenantUrl(this.deps.publicUrl, tenantId);
        const redirect = (params: Record<string, string | undefined>) => ({ location: withQuery(pushed.redirectUri, { ...params, state: pushed.state, iss }) });
        const fail = (error: string, description: string) => redirect({ error, error_description: description });

        if (!(await this.deps.singleUse.consume(tenantId, parKey(pushed.id)))) {
            return fail('invalid_request_uri', 'request_uri has expired or was already used');
        }
        if (pushed.issuerState === undefined) {
            return fail('invalid_request', `Without issuer_state the wallet must authorize at the interactive authorization endpoint ${iss}/authorize/interactive (interactive_authorization_endpoint in the metadata)`);
        }
        const notRedeemable = () => fail('invalid_request', 'issuer_state does not belong to a redeemable authorization code offer');
        const session = await this.redeemableOffer(tenantId, pushed.issuerState);
        if (!session) {
            return notRedeemable();
        }
        const offered = session.credentialConfigurationIds!;
        if (!pushed.credentialConfigurationIds.every((id) => offered.includes(id))) {
            return fail(pushed.via === 'scope' ? 'invalid_scope' : 'invalid_authorization_details', 'The request names credentials the offer does not include');
        }

        const { code, codeHash, authorization } = newAuthorizationCode({
            clientId: pushed.clientId,
            redirectUri: pushed.redirectUri,
            codeChallenge: pushed.codeChallenge,
            credentialConfigurationIds: pushed.credentialConfigurationIds,
            authorizationDetails: pushed.via === 'authorization_details',
            ...(pushed.dpopJkt ? { dpopJkt: pushed.dpopJkt } : {}),
            ...(pushed.instanceJkt ? { instanceJkt: pushed.instanceJkt } : {})
        });
        let authorized;
        try {
            // A concurrent authorization of the same issuer_state makes this re-read the data: it then finds the
            // other's grant (or interactive authorization) and gives up, so one code per offer ever exists.
            authorized = await this.deps.sessions.mutateData<'issuance'>(session, (data) => {
                if (data.authorization || data.interactive) {
                    throw new AlreadyAuthorized();
                }
                return { ...data, authorization };
            }, { codeHash }, { status: ['active'], isNull: ['codeUsedAt'] });
        }
        catch (err) {
            if (err instanceof AlreadyAuthorized) {
                return notRedeemable();
            }
            throw err;
        }
        if (!authorized) {
            return notRedeemable();
        }
        return redirect({ code });
    }
}

