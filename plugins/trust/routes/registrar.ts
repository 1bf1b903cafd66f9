import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { tenantContext } from '../../../lib/auth/context';
import { singletonRoutes } from '../../../lib/http/resource-routes';
import { registrarConfigKind } from '../../../resources/registrar-config';
import type { RegistrationCerts } from '../services/registration-certs';

export const registrationCertCacheSchema = Joi.object({
    strategy: Joi.string().valid('jwt', 'id', 'body').required(),
    id: Joi.string(),
    jwt: Joi.string().required(),
    fingerprint: Joi.string().required().description('SHA-256 of the JWT, hex'),
    signerFingerprint: Joi.string().description('SHA-256 of the DER of the x5c leaf that signed it, hex'),
    issuedAt: Joi.string().required(),
    expiresAt: Joi.string().allow(null).required()
}).label('RegistrationCertCache');

/**
 * /api/registrar/config (contract: GET/PUT/DELETE, role registrar:manage; reads also tenant:read) and spec 4.3's
 * POST /api/verifier/config/{id}/registration-cert/reissue. A tenant without a registrar configuration gets 404 on
 * GET: unlike issuance settings there are no defaults that would work.
 */
export const registrarRoutes = (certs: RegistrationCerts): ServerRoute[] => [
    ...singletonRoutes({
        kind: registrarConfigKind,
        path: '/api/registrar/config',
        tag: 'verification',
        roles: ['registrar:manage'],
        notFound: 'RegistrarConfig not found',
        description: {
            get: { description: 'Get the tenant\'s registrar configuration (secrets redacted)' },
            put: {
                description: 'Set the tenant\'s registrar configuration',
                notes: 'Secrets sent back as [redacted] keep their stored value unless registrarUrl or auth.tokenUrl changed.'
            }
        },
        delete: { description: 'Delete the tenant\'s registrar configuration: requests carry no registration certificate any more' }
    }),
    {
        method: 'POST',
        path: '/api/verifier/config/{id}/registration-cert/reissue',
        options: {
            tags: ['api', 'verification'],
            description: 'Request a new registration certificate for a presentation configuration now',
            notes: 'Answers the new registrationCertCache; 400 without registration_cert or registrar configuration, 503 when the registrar fails.',
            auth: { access: { scope: ['presentation:config'] } },
            validate: { params: Joi.object({ id: Joi.string().max(255).required() }) },
            response: { status: { 200: registrationCertCacheSchema } }
        },
        handler: (request) => certs.reissue(tenantContext(request), (request.params as { id: string }).id)
    }
];
