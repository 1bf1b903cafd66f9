import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { OAuthError } from '../../../lib/errors';
import type { TokenService } from '../token-service';

const tokenRequest = Joi.object({
    grant_type: Joi.string().required(),
    client_id: Joi.string().max(255),
    client_secret: Joi.string().max(1024),
    scope: Joi.string().allow('')
}).unknown(true).label('TokenRequest');

const tokenResponse = Joi.object({
    access_token: Joi.string().required(),
    token_type: Joi.string().valid('Bearer').required(),
    expires_in: Joi.number().integer().required()
}).label('TokenResponse');

const parseBasic = (header: string): { id: string; secret: string } => {
    const match = /^Basic\s+([A-Za-z0-9+/]+=*)\s*$/i.exec(header);
    const decoded = match ? Buffer.from(match[1]!, 'base64').toString('utf8') : '';
    const colon = decoded.indexOf(':');
    if (colon < 1) {
        throw new OAuthError(401, 'invalid_client', 'Malformed Basic authorization header', { 'WWW-Authenticate': 'Basic realm="hallmark"' });
    }
    // RFC 6749 2.3.1: both parts are form-urlencoded before base64.
    const unescape = (v: string) => {
        try {
            return decodeURIComponent(v.replace(/\+/g, ' '));
        }
        catch {
            return v;
        }
    };
    const id = unescape(decoded.slice(0, colon));
    const secret = unescape(decoded.slice(colon + 1));
    // The NUL guard sees the body, not this header: a NUL here is refused like a malformed header, before any lookup.
    if (id.includes('\u0000') || secret.includes('\u0000')) {
        throw new OAuthError(401, 'invalid_client', 'Malformed Basic authorization header', { 'WWW-Authenticate': 'Basic realm="hallmark"' });
    }
    return { id, secret };
};

export const tokenRoutes = (tokens: TokenService): ServerRoute[] => [{
    method: 'POST',
    path: '/api/oauth2/token',
    options: {
        auth: false,
        app: { protocol: true },
        // A docs page (Swagger UI's Authorize) or tool served from another origin may ask for a token; the answer
        // needs the client's secret, so allowing any origin gives nothing away. Swagger UI adds X-Requested-With.
        cors: { origin: ['*'], additionalHeaders: ['X-Requested-With'] },
        tags: ['api', 'oauth2'],
        description: 'Issue an access token (client credentials grant)',
        notes: 'JSON or form body, client credentials in the body or as HTTP Basic. Errors follow RFC 6749: invalid_request, invalid_client, unsupported_grant_type.',
        payload: { allow: ['application/json', 'application/x-www-form-urlencoded'] },
        validate: { payload: tokenRequest },
        response: { status: { 200: tokenResponse } }
    },
    handler: async (request, h) => {
        const body = request.payload as { grant_type: string; client_id?: string; client_secret?: string };
        if (body.grant_type !== 'client_credentials') {
            throw new OAuthError(400, 'unsupported_grant_type', 'Only the client_credentials grant is supported');
        }
        const header = request.headers.authorization as string | undefined;
        if (header && (body.client_secret !== undefined)) {
            throw new OAuthError(400, 'invalid_request', 'Use one client authentication method, not both');
        }
        const basic = header ? parseBasic(header) : undefined;
        const id = basic?.id ?? body.client_id;
        const secret = basic?.secret ?? body.client_secret;
        if (!id || !secret) {
            throw new OAuthError(400, 'invalid_request', 'client_id and client_secret are required');
        }
        if (basic && body.client_id && body.client_id !== basic.id) {
            throw new OAuthError(400, 'invalid_request', 'client_id does not match the Basic credentials');
        }
        const token = await tokens.clientCredentials(id, secret, !!basic, request.info.remoteAddress);
        return h.response(token).header('Cache-Control', 'no-store').header('Pragma', 'no-cache');
    }
}];
