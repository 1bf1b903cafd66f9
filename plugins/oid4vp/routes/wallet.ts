import type Hapi from '@hapi/hapi';
import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { NotFoundError } from '../../../lib/errors';
import type { LiveSession, SessionService } from '../../sessions/services/session-service';
import { REQUEST_OBJECT_TYP, type PresentationRequests } from '../services/requests';
import type { PresentationResponses } from '../services/responses';

const params = Joi.object({ walletNonce: Joi.string().max(64).required() });
const protocol = { auth: false as const, app: { protocol: true } };

/** Form fields that carry JSON in direct_post (vp_token is a JSON object serialised into the field). */
const parseForm = (payload: unknown): Record<string, unknown> => {
    const form = { ...(payload as Record<string, unknown> ?? {}) };
    if (typeof form.vp_token === 'string' && form.vp_token.trim().startsWith('{')) {
        try {
            form.vp_token = JSON.parse(form.vp_token);
        }
        catch {
            // left as is: verification reports it
        }
    }
    return form;
};

export const walletRoutes = (deps: { sessions: SessionService; requests: PresentationRequests; responses: PresentationResponses }): ServerRoute[] => {
    const session = async (request: Hapi.Request, dcApi = false) => {
        const handle = request.params.walletNonce as string;
        const found = await deps.sessions.findByWalletNonce('presentation', handle);
        if (found) {
            return found;
        }
        // The relying party's backend posts DC API responses: it knows the session id of the offer answer, which
        // stands for the wallet nonce there (the signed request carries neither response_uri nor state).
        const byId = dcApi ? await deps.sessions.get(handle) : undefined;
        if (byId?.type === 'presentation' && byId.data && (byId.data as { protocol?: string }).protocol === 'dc-api') {
            return byId as LiveSession<'presentation'>;
        }
        throw new NotFoundError('Unknown presentation request');
    };
    const requestObject = async (request: Hapi.Request, h: Hapi.ResponseToolkit) => {
        const form = (request.payload ?? {}) as Record<string, unknown>;
        const jwt = await deps.requests.requestObject(await session(request), typeof form.wallet_nonce === 'string' ? form.wallet_nonce : undefined);
        return h.response(jwt).type(`application/${REQUEST_OBJECT_TYP}`).header('Cache-Control', 'no-store');
    };
    return [
        {
            method: 'GET',
            path: '/presentations/{walletNonce}/oid4vp/request',
            options: { ...protocol, validate: { params }, description: 'The signed OpenID4VP request object' },
            handler: requestObject
        },
        {
            method: 'POST',
            path: '/presentations/{walletNonce}/oid4vp/request',
            options: {
                ...protocol,
                payload: { allow: ['application/x-www-form-urlencoded', 'application/json'], failAction: 'ignore' },
                validate: { params, payload: Joi.any() },
                description: 'The signed request object, fetched with request_uri_method=post (wallet_metadata, wallet_nonce)'
            },
            handler: requestObject
        },
        {
            method: 'POST',
            path: '/presentations/{walletNonce}/oid4vp',
            options: {
                ...protocol,
                payload: { allow: ['application/x-www-form-urlencoded', 'application/json'] },
                validate: { params, payload: Joi.object().unknown(true) },
                description: 'The authorization response (direct_post.jwt), or {response, origin} of a Digital Credentials API response (dc_api.jwt) posted by the relying party'
            },
            handler: async (request, h) => {
                const answer = await deps.responses.receive(await session(request, true), parseForm(request.payload));
                return h.response(answer.body).code(answer.status).header('Cache-Control', 'no-store');
            }
        }
    ];
};
