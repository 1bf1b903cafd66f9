import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { NotFoundError, OAuthError } from '../../../lib/errors';
import type { Issuer } from '../issuer';
import type { AuthorizationService } from '../services/authorization';
import { anyBody, noStore, protocol, tenantParams, walletRequestOf } from './wallet';

export interface AuthorizationRouteDeps {
    publicUrl: string;
    issuer: Issuer;
    authorization: AuthorizationService;
}

// A pushed request is a handful of short parameters; authorization_details is the largest (16 KiB at most).
const PAR_MAX_BYTES = 64 * 1024;

/** The built-in authorization server's front channel: PAR (RFC 9126) and the authorization endpoint. */
export const authorizationRoutes = (deps: AuthorizationRouteDeps): ServerRoute[] => {
    const known = async (tenantId: string) => {
        if (!(await deps.issuer.tenant(tenantId))) {
            throw new NotFoundError('Unknown issuer');
        }
    };
    return [
        {
            method: 'POST',
            path: '/issuers/{tenant}/authorize/par',
            options: {
                ...protocol,
                // JSON is let through to be refused with an OAuth error after the parameters are checked (a bad path or
                // query answers 400 before the body's type is looked at).
                payload: { allow: ['application/x-www-form-urlencoded', 'application/json'], maxBytes: PAR_MAX_BYTES },
                validate: { params: tenantParams, payload: anyBody },
                description: 'Pushed authorization request (RFC 9126): response_type=code, client_id, redirect_uri, PKCE S256, authorization_details (openid_credential) or scope, issuer_state, state; answers a single-use request_uri valid 60 s'
            },
            handler: async (request, h) => {
                const walletRequest = walletRequestOf(deps.publicUrl, request);
                await known(walletRequest.tenantId);
                if (request.mime !== 'application/x-www-form-urlencoded') {
                    throw new OAuthError(400, 'invalid_request', 'A pushed authorization request is form-encoded (application/x-www-form-urlencoded)');
                }
                const { dpopNonce, ...answer } = await deps.authorization.push(walletRequest, request.payload as Record<string, unknown>);
                const response = noStore(h.response(answer).code(201));
                return dpopNonce ? response.header('DPoP-Nonce', dpopNonce) : response;
            }
        },
        {
            method: 'GET',
            path: '/issuers/{tenant}/authorize',
            options: {
                ...protocol,
                validate: { params: tenantParams, query: Joi.object().unknown(true) },
                description: 'Authorization endpoint (client_id and the request_uri of a pushed request): an issuer-initiated request (issuer_state of an authorization code offer) is redirected with code, state and iss (RFC 9207)'
            },
            handler: async (request, h) => {
                const tenantId = request.params.tenant as string;
                await known(tenantId);
                const { location } = await deps.authorization.authorize(tenantId, request.query);
                return noStore(h.redirect(location).code(302));
            }
        }
    ];
};
