import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { NotFoundError } from '../../../lib/errors';
import type { MetadataService } from '../services/metadata';
import { protocol, tenantParams } from './wallet';

/**
 * SD-JWT VC type metadata of the tenant's configurations that give their vct in object form, at
 * `{tenant base}/vct/{credential configuration id}`: a stable URL a configuration can use as its vct, so that
 * wallets resolve it, and whose bytes the credentials' vct#integrity covers.
 */
export const typeMetadataRoutes = (metadata: MetadataService): ServerRoute[] => [
    {
        method: 'GET',
        path: '/issuers/{tenant}/vct/{id}',
        options: {
            ...protocol,
            validate: { params: tenantParams.keys({ id: Joi.string().min(1).max(255).required() }) },
            description: 'SD-JWT VC type metadata of a credential configuration whose vct is given in object form'
        },
        handler: async (request, h) => {
            const document = await metadata.typeMetadata(request.params.tenant as string, request.params.id as string);
            if (!document) {
                throw new NotFoundError('Unknown type metadata');
            }
            // The exact bytes vct#integrity was computed over.
            return h.response(document.body).type('application/json');
        }
    }
];
