import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { assertConfigsAllowed } from '../../../lib/auth/allowed-configs';
import { tenantContext } from '../../../lib/auth/context';
import { resourceRoutes } from '../../../lib/http/resource-routes';
import { presentationConfigKind } from '../../../resources/presentation-config';
import { trustListKind } from '../../../resources/trust-list';
import { presentationRequestSchema, type PresentationRequest, type PresentationRequests } from '../services/requests';

const CONFIG = ['presentation:config'];

export const managementRoutes = (requests: PresentationRequests): ServerRoute[] => [
    ...resourceRoutes({ kind: presentationConfigKind, path: '/api/verifier/config', tag: 'verification', roles: CONFIG, description: { one: 'a presentation configuration', many: 'presentation configurations' } }),
    ...resourceRoutes({ kind: trustListKind, path: '/api/trust-lists', tag: 'verification', roles: CONFIG, description: { one: 'a trust list', many: 'trust lists' } }),
    {
        method: 'POST',
        path: '/api/verifier/offer',
        options: {
            tags: ['api', 'verification'],
            description: 'Create an OpenID4VP presentation request and its session',
            notes: 'Answers the session id and the openid4vp:// link whose request_uri the wallet fetches.',
            auth: { access: { scope: ['presentation:request'] } },
            validate: { payload: presentationRequestSchema },
            response: { status: { 201: Joi.object({ session: Joi.string().required(), uri: Joi.string().required(), crossDeviceUri: Joi.string().required() }).label('PresentationRequestAnswer') } }
        },
        handler: async (request, h) => {
            const body = request.payload as PresentationRequest;
            await assertConfigsAllowed(request, 'presentation', [body.requestId]);
            return h.response(await requests.create(tenantContext(request), body)).code(201);
        }
    }
];
