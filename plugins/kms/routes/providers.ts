import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { tenantContext } from '../../../lib/auth/context';
import { singletonRoutes } from '../../../lib/http/resource-routes';
import { kmsConfigKind } from '../../../resources/kms-config';
import type { KmsService } from '../services/kms-service';
import { checkTenantKmsConfig } from '../tenant-policy';

const WRITE = ['key:manage'];
/** Who may read besides the writers and tenant:read. */
const READERS = ['key:read'];
const READ = [...WRITE, ...READERS, 'tenant:read'];

const health = Joi.object({
    id: Joi.string().required(),
    type: Joi.string().required(),
    description: Joi.string(),
    default: Joi.boolean().required(),
    status: Joi.string().valid('up', 'down').required(),
    error: Joi.string()
}).label('KmsProviderHealth');

export const providerRoutes = (kms: KmsService, kmsConfigSchema: () => Joi.ObjectSchema): ServerRoute[] => [
    {
        method: 'GET',
        path: '/api/key-chain/providers',
        options: {
            tags: ['api', 'key-chains'],
            description: 'The tenant\'s KMS providers (global kms.json merged with the tenant\'s) and their health',
            auth: { access: { scope: READ } },
            response: { status: { 200: Joi.array().items(health).label('KmsProviderHealthList') } }
        },
        handler: (request) => kms.health(tenantContext(request).tenantId)
    },
    ...singletonRoutes({
        kind: kmsConfigKind,
        path: '/api/key-chain/providers/config',
        tag: 'key-chains',
        roles: WRITE,
        readRoles: READERS,
        notFound: 'This tenant has no KMS configuration of its own',
        description: {
            get: { description: 'The tenant\'s own KMS configuration (secrets redacted)' },
            put: {
                description: 'Set the tenant\'s KMS configuration (spec 2.5); every provider is opened and checked before it is saved',
                notes: 'Values are taken literally (placeholders are resolved only in the operator\'s kms.json files). pkcs11 providers and mTLS key files are operator-only; http provider URLs follow the outbound policy (OUTBOUND_URL_*).'
            }
        },
        validatePayload: (value) => kmsConfigSchema().validateAsync(value, { abortEarly: false }),
        beforeWrite: (config, request) => checkTenantKmsConfig(config, request.server.outbound),
        delete: { description: 'Remove the tenant\'s KMS configuration: the global kms.json (or the db provider) applies again' }
    })
];
