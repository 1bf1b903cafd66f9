import Crypto from 'node:crypto';
import type Hapi from '@hapi/hapi';
import * as Jose from 'jose';
import type { ChangeBus } from '../../lib/change-bus';
import type { Database } from '../../lib/db/database';
import type { ClientCache } from './clients';
import { ClientModel } from './models/client';
import { OAuthError } from '../../lib/errors';
import { AuthFailures } from './auth-failures';
import type { ServiceKeys } from './service-keys';
import { InvalidTokenError, type TokenVerifier } from './verifier';


const invalidClient = (description: string, basic: boolean) =>
    new OAuthError(401, 'invalid_client', description, basic ? { 'WWW-Authenticate': 'Basic realm="hallmark"' } : undefined);

/** What a verified access token says, kept until the token expires (see TokenService.verify). */
interface VerifiedToken {
    kid: string;
    sub: string;
    tenantId: string | undefined;
    roles: string[];
    /** Expiry, ms since the epoch. */
    expiresAt: number;
}

/** Verified tokens kept at most; the oldest go first. */
const VERIFIED_CACHE_SIZE = 10_000;

export interface IssuedToken {
    access_token: string;
    token_type: 'Bearer';
    expires_in: number;
}

/** The integrated OAuth2 server: client credentials in, ES256 JWT access tokens out. */
export class TokenService implements TokenVerifier {
    readonly audience: string;
    private readonly authFailures: AuthFailures;
    /**
     * Tokens whose signature and claims were verified, by the token itself (whose jti is unique): an ES256
     * verification per management request was half a millisecond of CPU. Only the signature check is saved: every
     * use still checks the expiry, that the signing key is still live (a removed service key ends its tokens) and
     * the client (deleted clients and removed roles take effect at once, as without the cache).
     */
    private readonly verified = new Map<string, VerifiedToken>();

    constructor(
        private readonly db: Database,
        private readonly keys: ServiceKeys,
        private readonly clients: ClientCache,
        private readonly options: { issuer: string; ttlSeconds: number; bus?: ChangeBus }
    ) {
        this.audience = `${options.issuer}/api`;
        this.authFailures = new AuthFailures(options.bus);
    }

    /** A client changed or went: its failed attempts no longer count (its tokens follow through the client cache). */
    forgetClient(clientId: string): void {
        this.authFailures.forgetClient(clientId);
    }

    async clientCredentials(clientId: string, secret: string, viaBasic: boolean, source: string): Promise<IssuedToken> {
        const client = await this.db.model(ClientModel).query().findById(clientId);
        if (!client) {
            // Same work as a real check, so timing does not tell which client ids exist.
            this.db.secretHasher.verify(secret, 'hmac-sha256.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA');
            throw invalidClient('Client authentication failed', viaBasic);
        }
        if (this.authFailures.isLocked(clientId, source)) {
            throw invalidClient('Client authentication failed: too many failed attempts, try again later', viaBasic);
        }
        if (!this.db.secretHasher.verify(secret, client.secretHash)) {
            this.authFailures.recordFailure(clientId, source);
            throw invalidClient('Client authentication failed', viaBasic);
        }
        this.authFailures.recordSuccess(clientId, source);
        return this.issue(client);
    }

    private async issue(client: ClientModel): Promise<IssuedToken> {
        const { kid, key } = this.keys.signingKey();
        const claims: Jose.JWTPayload = { roles: client.roles };
        if (client.tenantId) {
            claims.tenant_id = client.tenantId;
        }
        const accessToken = await new Jose.SignJWT(claims)
            .setProtectedHeader({ alg: 'ES256', kid, typ: 'at+jwt' })
            .setIssuer(this.options.issuer)
            .setSubject(client.clientId)
            .setAudience(this.audience)
            .setIssuedAt()
            .setExpirationTime(`${this.options.ttlSeconds}s`)
            .setJti(Crypto.randomUUID())
            .sign(key);
        return { access_token: accessToken, token_type: 'Bearer', expires_in: this.options.ttlSeconds };
    }

    async verify(token: string): Promise<Hapi.AppCredentials> {
        const known = await this.cached(token);
        const checked = known ?? await this.verifySignature(token);
        if (!known) {
            if (this.verified.size >= VERIFIED_CACHE_SIZE) {
                this.verified.delete(this.verified.keys().next().value as string);
            }
            this.verified.set(token, checked);
        }
        // Tokens are self-contained, but a deleted client (or tenant) must not keep acting, nor a client keep roles
        // taken from it, until the token expires.
        const client = await this.clients.get(checked.sub);
        if (!client || (client.tenantId ?? undefined) !== checked.tenantId) {
            throw new InvalidTokenError('The client of this token no longer exists');
        }
        return { clientId: checked.sub, tenantId: checked.tenantId, roles: checked.roles.filter((r) => client.roles.includes(r)) };
    }

    /** A token verified before, while it has not expired and its key is still live. */
    private async cached(token: string): Promise<VerifiedToken | undefined> {
        const entry = this.verified.get(token);
        if (!entry) {
            return undefined;
        }
        if (Date.now() >= entry.expiresAt) {
            this.verified.delete(token);
            throw new InvalidTokenError('The token has expired');
        }
        if (!(await this.keys.verificationKey(entry.kid))) {
            this.verified.delete(token);
            throw new InvalidTokenError('The token was not signed by this service');
        }
        return entry;
    }

    private async verifySignature(token: string): Promise<VerifiedToken> {
        let payload: Jose.JWTPayload;
        let kid: string | undefined;
        try {
            ({ payload } = await Jose.jwtVerify(token, async (header) => {
                kid = header.kid;
                const key = await this.keys.verificationKey(header.kid);
                if (!key) {
                    throw new InvalidTokenError('The token was not signed by this service');
                }
                return key;
            }, { issuer: this.options.issuer, audience: this.audience, algorithms: ['ES256'], typ: 'at+jwt', requiredClaims: ['sub', 'exp', 'iat'] }));
        }
        catch (err) {
            throw new InvalidTokenError(err instanceof Jose.errors.JWTExpired ? 'The token has expired' : err instanceof InvalidTokenError ? err.message : 'The token is not valid');
        }
        const roles = payload.roles;
        if (!Array.isArray(roles) || !roles.every((r) => typeof r === 'string')) {
            throw new InvalidTokenError('The token carries no roles');
        }
        return { kid: kid!, sub: payload.sub!, tenantId: typeof payload.tenant_id === 'string' ? payload.tenant_id : undefined, roles: roles as string[], expiresAt: payload.exp! * 1000 };
    }
}
