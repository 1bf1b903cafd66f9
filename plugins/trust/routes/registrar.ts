import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { tenantContext } from '../../../lib/auth/context';
import { NotFoundError } from '../../../lib/errors';
import { redactSecrets, restoreRedacted } from '../../../lib/registry/secrets';
import { registrarConfigKind, registrarConfigSchema, type RegistrarConfig } from '../../../resources/registrar-config';
import type { RegistrationCerts } from '../services/registration-certs';

const MANAGE = ['registrar:manage'];

export const registrationCertCacheSchema = Joi.object({
    strategy: Joi.string().valid('jwt', 'id', 'body').required(),
    id: Joi.string(),
    jwt: Joi.string().required(),
    fingerprint: Joi.string().required().description('SHA-256 of the JWT, hex'),
    signerFingerprint: Joi.string().description('SHA-256 of the DER of the x5c leaf that signed it, hex'),
    issuedAt: Joi.string().required(),
    expiresAt: Joi.string().allow(null).required()
}).label('RegistrationCertCache');

const view = registrarConfigSchema.label('RegistrarConfig');

/**
 * /api/registrar/config (contract: GET/PUT/DELETE, role registrar:manage; reads also tenant:read) and spec 4.3's
 * POST /api/verifier/config/{id}/registration-cert/reissue. A tenant without a registrar configuration gets 404 on
 * GET: unlike issuance settings there are no defaults that would work.
 */
export const registrarRoutes = (certs: RegistrationCerts): ServerRoute[] => [
    {
        method: 'GET',
        path: '/api/registrar/config',
        options: {
            tags: ['api', 'verification'],
            description: 'Get the tenant\'s registrar configuration (secrets redacted)',
            auth: { access: { scope: [...MANAGE, 'tenant:read'] } },
            response: { status: { 200: view } }
        },
        handler: async (request) => {
            const found = await request.server.registry.get(tenantContext(request), registrarConfigKind);
            if (!found) {
                throw new NotFoundError('RegistrarConfig not found');
            }
            return redactSecrets(found.spec, registrarConfigKind.secrets);
        }
    },
    {
        method: 'PUT',
        path: '/api/registrar/config',
        options: {
            tags: ['api', 'verification'],
            description: 'Set the tenant\'s registrar configuration',
            notes: 'Secrets sent back as [redacted] keep their stored value unless registrarUrl or auth.tokenUrl changed.',
            auth: { access: { scope: MANAGE } },
            validate: { payload: registrarConfigSchema },
            response: { status: { 200: view } }
        },
        handler: async (request) => {
            const { registry } = request.server;
            const ctx = tenantContext(request);
            const stored = await registry.get(ctx, registrarConfigKind);
            const result = await registry.write(ctx, registrarConfigKind, restoreRedacted(request.payload as RegistrarConfig, stored?.spec, registrarConfigKind));
            return redactSecrets(result.spec, registrarConfigKind.secrets);
        }
    },
    {
        method: 'DELETE',
        path: '/api/registrar/config',
        options: {
            tags: ['api', 'verification'],
            description: 'Delete the tenant\'s registrar configuration: requests carry no registration certificate any more',
            auth: { access: { scope: MANAGE } }
        },
        handler: async (request, h) => {
            await request.server.registry.remove(tenantContext(request), registrarConfigKind);
            return h.response().code(204);
        }
    },
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
