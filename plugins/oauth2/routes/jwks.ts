import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import type { ServiceKeys } from '../service-keys';

export const jwksRoutes = (keys: ServiceKeys): ServerRoute[] => [{
    method: 'GET',
    path: '/api/oauth2/jwks',
    options: {
        auth: false,
        tags: ['api', 'oauth2'],
        description: 'Public keys that verify management access tokens',
        notes: 'Retired keys stay listed until the tokens they signed have expired.',
        response: { status: { 200: Joi.object({ keys: Joi.array().items(Joi.object().unknown(true)) }).label('Jwks') } }
    },
    handler: async (_request, h) => h.response(await keys.publicJwks()).header('Cache-Control', 'public, max-age=60')
}];
