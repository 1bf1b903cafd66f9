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

export interface IssuedToken {
    access_token: string;
    token_type: 'Bearer';
    expires_in: number;
}

/** The integrated OAuth2 server: client credentials in, ES256 JWT access tokens out. */
export class TokenService implements TokenVerifier {
    readonly audience: string;
    private readonly authFailures: AuthFailures;

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
        let payload: Jose.JWTPayload;
        try {
            ({ payload } = await Jose.jwtVerify(token, async (header) => {
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
        const tenantId = typeof payload.tenant_id === 'string' ? payload.tenant_id : undefined;
        // Tokens are self-contained, but a deleted client (or tenant) must not keep acting, nor a client keep roles
        // taken from it, until the token expires.
        const client = await this.clients.get(payload.sub!);
        if (!client || (client.tenantId ?? undefined) !== tenantId) {
            throw new InvalidTokenError('The client of this token no longer exists');
        }
        return { clientId: payload.sub!, tenantId, roles: roles.filter((r) => client.roles.includes(r)) };
    }
}
