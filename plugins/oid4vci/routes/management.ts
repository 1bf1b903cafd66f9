import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { assertConfigsAllowed } from '../../oauth2/allowed-configs';
import { tenantContext } from '../../../lib/auth/context';
import { resourceRoutes, singletonRoutes } from '../../../lib/http/resource-routes';
import { attributeProviderKind } from '../../../resources/attribute-provider';
import { credentialConfigKind } from '../../../resources/credential-config';
import { issuanceConfigKind } from '../../../resources/issuance-config';
import { webhookEndpointKind } from '../../../resources/webhook-endpoint';
import { offerRequestSchema, type OfferRequest, type OfferService } from '../services/offers';

const CONFIG = ['issuance:config'];

export const managementRoutes = (offers: OfferService): ServerRoute[] => [
    ...resourceRoutes({ kind: credentialConfigKind, path: '/api/issuer/credentials', tag: 'issuance', roles: CONFIG, description: { one: 'a credential configuration', many: 'credential configurations' } }),
    ...singletonRoutes({ kind: issuanceConfigKind, path: '/api/issuer/config', tag: 'issuance', roles: CONFIG, description: 'the tenant\'s issuance settings' }),
    ...resourceRoutes({ kind: attributeProviderKind, path: '/api/issuer/attribute-providers', tag: 'issuance', roles: CONFIG, description: { one: 'an attribute provider', many: 'attribute providers' } }),
    // spec 4.4: issuance:manage or presentation:manage (the *:config roles)
    ...resourceRoutes({ kind: webhookEndpointKind, path: '/api/issuer/webhook-endpoints', tag: 'issuance', roles: [...CONFIG, 'presentation:config'], description: { one: 'a webhook endpoint', many: 'webhook endpoints' } }),
    {
        method: 'POST',
        path: '/api/issuer/offer',
        options: {
            tags: ['api', 'issuance'],
            description: 'Create a credential offer (pre-authorized code flow) and its issuance session',
            notes: 'Answers the session id and the offer link (openid-credential-offer://, by reference unless byReference is false). tx_code: true generates a code and returns it once.',
            auth: { access: { scope: ['issuance:offer'] } },
            validate: { payload: offerRequestSchema },
            response: { status: { 201: Joi.object({ session: Joi.string().required(), uri: Joi.string().required(), tx_code: Joi.string() }).label('CredentialOfferAnswer') } }
        },
        handler: async (request, h) => {
            const body = request.payload as OfferRequest;
            await assertConfigsAllowed(request, 'issuance', body.credentialConfigurationIds);
            return h.response(await offers.create(tenantContext(request), body)).code(201);
        }
    }
];
