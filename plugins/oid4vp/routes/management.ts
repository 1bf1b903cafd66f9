import type Hapi from '@hapi/hapi';
import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { assertConfigsAllowed } from '../../oauth2/allowed-configs';
import { tenantContext } from '../../../lib/auth/context';
import { resourceRoutes } from '../../../lib/http/resource-routes';
import { presentationConfigKind } from '../../../resources/presentation-config';
import { REGISTRATION_CERT_FLAT_FIELDS } from '../../../resources/presentation/registration-cert';
import { trustListKind } from '../../../resources/trust-list';
import { presentationRequestSchema, type PresentationRequest, type PresentationRequests } from '../services/requests';

const CONFIG = ['presentation:config'];

/**
 * Spec 2.1: flat registrationCert* fields become registration_cert when registration_cert is not sent. A PATCH is
 * merged over the stored configuration, whose registration_cert would hide the flat fields of the body; so a PATCH
 * that sends flat fields without registration_cert clears the stored one first, and the flat fields replace it.
 */
const flatFieldsReplaceStoredCert = (route: ServerRoute): ServerRoute => {
    if (route.method !== 'PATCH') {
        return route;
    }
    const handler = route.handler as Hapi.Lifecycle.Method;
    return {
        ...route,
        handler(request, h) {
            const body = request.orig.payload as Record<string, unknown>;
            if (!('registration_cert' in body) && REGISTRATION_CERT_FLAT_FIELDS.some((field) => field in body)) {
                body.registration_cert = undefined;
            }
            return handler.call(this, request, h);
        }
    };
};

export const managementRoutes = (requests: PresentationRequests): ServerRoute[] => [
    ...resourceRoutes({ kind: presentationConfigKind, path: '/api/verifier/config', tag: 'verification', roles: CONFIG, description: { one: 'a presentation configuration', many: 'presentation configurations' } })
        .map(flatFieldsReplaceStoredCert),
    ...resourceRoutes({ kind: trustListKind, path: '/api/trust-lists', tag: 'verification', roles: CONFIG, description: { one: 'a trust list', many: 'trust lists' } }),
    {
        method: 'POST',
        path: '/api/verifier/offer',
        options: {
            tags: ['api', 'verification'],
            description: 'Create a presentation request and its session',
            notes: 'response_type uri answers the session id and the openid4vp:// link whose request_uri the wallet fetches; dc-api the signed request object for the Digital Credentials API (openid4vp-v1-signed); iso-18013-7 (when the iso18013 plugin is present) the base64url CBOR deviceRequest and encryptionInfo of ISO 18013-7 Annex C.',
            auth: { access: { scope: ['presentation:request'] } },
            validate: { payload: presentationRequestSchema },
            response: {
                status: {
                    201: Joi.object({
                        session: Joi.string().required(),
                        uri: Joi.string(),
                        crossDeviceUri: Joi.string(),
                        request: Joi.string().description('dc-api: the signed request object'),
                        deviceRequest: Joi.string().description('iso-18013-7: base64url CBOR DeviceRequest'),
                        encryptionInfo: Joi.string().description('iso-18013-7: base64url CBOR EncryptionInfo')
                    }).label('PresentationRequestAnswer')
                }
            }
        },
        handler: async (request, h) => {
            const body = request.payload as PresentationRequest;
            await assertConfigsAllowed(request, 'presentation', [body.requestId]);
            return h.response(await requests.create(tenantContext(request), body)).code(201);
        }
    }
];
