import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { tenantContext } from '../../../lib/auth/context';
import { NotFoundError } from '../../../lib/errors';
import { redactSecrets, restoreRedacted } from '../../../lib/registry/secrets';
import { kmsConfigKind, type KmsConfig } from '../../../resources/kms-config';
import type { KmsService } from '../services/kms-service';
import { checkTenantKmsConfig } from '../tenant-policy';

const READ = ['key:manage', 'key:read', 'tenant:read'];
const WRITE = ['key:manage'];

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
    {
        method: 'GET',
        path: '/api/key-chain/providers/config',
        options: {
            tags: ['api', 'key-chains'],
            description: 'The tenant\'s own KMS configuration (secrets redacted)',
            auth: { access: { scope: READ } }
        },
        handler: async (request) => {
            const ctx = tenantContext(request);
            const kind = request.server.registry.kind(kmsConfigKind);
            const found = await request.server.registry.get(ctx, kmsConfigKind);
            if (!found) {
                throw new NotFoundError('This tenant has no KMS configuration of its own');
            }
            return redactSecrets(found.spec, kind.secrets);
        }
    },
    {
        method: 'PUT',
        path: '/api/key-chain/providers/config',
        options: {
            tags: ['api', 'key-chains'],
            description: 'Set the tenant\'s KMS configuration (spec 2.5); every provider is opened and checked before it is saved',
            notes: 'Values are taken literally (placeholders are resolved only in the operator\'s kms.json files). pkcs11 providers and mTLS key files are operator-only; http provider URLs follow the outbound policy (OUTBOUND_URL_*).',
            auth: { access: { scope: WRITE } },
            validate: { payload: (value) => kmsConfigSchema().validateAsync(value, { abortEarly: false }) }
        },
        handler: async (request) => {
            const ctx = tenantContext(request);
            const kind = request.server.registry.kind(kmsConfigKind);
            const stored = await request.server.registry.get(ctx, kmsConfigKind);
            const config = restoreRedacted(request.payload as KmsConfig, stored?.spec, kind);
            await checkTenantKmsConfig(config, request.server.outbound);
            const result = await request.server.registry.write(ctx, kmsConfigKind, config);
            return redactSecrets(result.spec, kind.secrets);
        }
    },
    {
        method: 'DELETE',
        path: '/api/key-chain/providers/config',
        options: {
            tags: ['api', 'key-chains'],
            description: 'Remove the tenant\'s KMS configuration: the global kms.json (or the db provider) applies again',
            auth: { access: { scope: WRITE } }
        },
        handler: async (request, h) => {
            await request.server.registry.remove(tenantContext(request), kmsConfigKind);
            return h.response().code(204);
        }
    }
];
