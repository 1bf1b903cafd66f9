import Boom from '@hapi/boom';
import type Hapi from '@hapi/hapi';
import { effectiveScopes } from '../../lib/auth/roles';
import { InvalidTokenError, type TokenVerifier } from './verifier';

declare module '@hapi/hapi' {
    interface RouteOptionsApp {
        /** Also accept the bearer token as `?token=` (event streams, which browsers open without headers). */
        queryToken?: boolean;
    }
}

const bearer = (request: Hapi.Request): string | undefined => {
    const header = request.headers.authorization;
    if (header) {
        const match = /^Bearer\s+([A-Za-z0-9\-._~+/]+=*)\s*$/i.exec(String(header));
        return match ? match[1] : '';
    }
    if (request.route.settings.app?.queryToken && typeof request.query.token === 'string') {
        return request.query.token;
    }
    return undefined;
};

/** RFC 6750 bearer authentication; the roles in the token become hapi scopes, so routes declare their roles. */
export const bearerScheme = (verifier: TokenVerifier): Hapi.ServerAuthScheme => () => ({
    async authenticate(request, h) {
        const token = bearer(request);
        if (token === undefined) {
            throw Boom.unauthorized(null, 'Bearer', { realm: 'hallmark' });
        }
        if (!token) {
            throw Boom.unauthorized('Malformed Authorization header', 'Bearer', { realm: 'hallmark', error: 'invalid_request' });
        }
        try {
            const app = await verifier.verify(token);
            return h.authenticated({ credentials: { app, scope: effectiveScopes(app.roles) } });
        }
        catch (err) {
            if (err instanceof InvalidTokenError) {
                throw Boom.unauthorized(err.message, 'Bearer', { realm: 'hallmark', error: 'invalid_token', error_description: err.message });
            }
            throw err;
        }
    }
});
