import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { tenantContext } from '../../../lib/auth/context';
import { ForbiddenError, NotFoundError } from '../../../lib/errors';
import { tenantIdSchema } from '../../../resources/tenant';
import type { Issuer } from '../issuer';
import type { InteractiveAuthorizationService } from '../services/interactive';
import { anyBody, noStore, protocol, tenantParams, walletRequestOf } from './wallet';

// The first request is a pushed-request-sized form; a later one carries an encrypted presentation (openid4vp_response).
const INTERACTIVE_MAX_BYTES = 1024 * 1024;

const answerSchema = Joi.alternatives(
    Joi.object({
        status: Joi.string().valid('require_interaction').required(),
        type: Joi.string().valid('openid4vp_presentation', 'redirect_to_web').required(),
        auth_session: Joi.string().required(),
        openid4vp_request: Joi.object({ request: Joi.string().required() }),
        label: Joi.string()
    }).label('InteractiveAuthorizationStep'),
    Joi.object({ status: Joi.string().valid('ok').required(), code: Joi.string().required() }).label('InteractiveAuthorizationCode')
).label('InteractiveAuthorizationAnswer');

/** The interactive authorization endpoint (spec 4.5) and the issuer backend's completion of its web steps. */
export const interactiveRoutes = (deps: { publicUrl: string; issuer: Issuer; interactive: InteractiveAuthorizationService }): ServerRoute[] => [
    {
        method: 'POST',
        path: '/issuers/{tenant}/authorize/interactive',
        options: {
            ...protocol,
            payload: { allow: ['application/x-www-form-urlencoded', 'application/json'], maxBytes: INTERACTIVE_MAX_BYTES },
            validate: { params: tenantParams, payload: anyBody },
            response: { status: { 200: answerSchema } },
            description: 'Interactive authorization endpoint (OpenID4VCI draft, experimental)',
            notes: [
                'First request (form or JSON): client_id, interaction_types_supported (comma-separated), issuer_state of a redeemable authorization code offer,',
                'authorization_details (or scope), code_challenge and code_challenge_method=S256, optional redirect_uri; client authentication as at PAR.',
                'Later requests: auth_session with openid4vp_response (the encrypted direct_post.jwt response as a JSON string) for a presentation step,',
                'or auth_session with code_verifier once a web step is completed. Answers {status: require_interaction, type, auth_session, openid4vp_request?}',
                'until the last step, then {status: ok, code} (a code for the token endpoint, valid 60 s). auth_session is valid 10 minutes.',
                'Errors: 400 {error, error_description} with invalid_request, access_denied, invalid_grant or server_error.'
            ].join(' ')
        },
        handler: async (request, h) => {
            const walletRequest = walletRequestOf(deps.publicUrl, request);
            if (!(await deps.issuer.tenant(walletRequest.tenantId))) {
                throw new NotFoundError('Unknown issuer');
            }
            return noStore(h.response(await deps.interactive.handle(walletRequest, request.payload as Record<string, unknown> ?? {})));
        }
    },
    {
        method: 'POST',
        path: '/issuers/{tenant}/authorize/interactive/complete-web-auth/{auth_session}',
        options: {
            tags: ['api', 'issuance'],
            auth: { access: { scope: ['issuance:offer'] } },
            validate: { params: Joi.object({ tenant: tenantIdSchema.required(), auth_session: Joi.string().max(128).required() }) },
            response: { status: { 200: Joi.object({ success: Joi.boolean().valid(true).required() }).label('WebStepCompleted') } },
            description: 'Mark the current redirect_to_web step of an interactive authorization as done',
            notes: 'Needs a token with issuance:offer of the tenant in the path. Answers {success: true}, or 404 {error: not_found} for an unknown, expired or completed auth_session.'
        },
        handler: async (request, h) => {
            const ctx = tenantContext(request);
            const { tenant, auth_session: authSession } = request.params as { tenant: string; auth_session: string };
            if (tenant !== ctx.tenantId) {
                throw new ForbiddenError('The tenant in the path is not the caller\'s');
            }
            if (!(await deps.interactive.completeWebStep(tenant, authSession))) {
                return h.response({ error: 'not_found' }).code(404);
            }
            return { success: true };
        }
    }
];
