import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { assertConfigsAllowed } from '../../oauth2/allowed-configs';
import { tenantContext } from '../../../lib/auth/context';
import { resourceRoutes, singletonRoutes } from '../../../lib/http/resource-routes';
import { attributeProviderKind } from '../../../resources/attribute-provider';
import { credentialConfigKind } from '../../../resources/credential-config';
import { issuanceConfigKind } from '../../../resources/issuance-config';
import { webhookEndpointKind } from '../../../resources/webhook-endpoint';
import { deferredCompleteSchema, deferredFailSchema, transactionIdParam, type DeferredService } from '../services/deferred';
import { offerRequestSchema, type OfferRequest, type OfferService } from '../services/offers';
import { sessionLogOf } from '../../sessions/session-log';

const CONFIG = ['issuance:config'];

const deferredStateAnswer = Joi.object({
    transactionId: Joi.string().required(),
    session: Joi.string().required(),
    credentialConfigurationId: Joi.string().required(),
    state: Joi.string().valid('ready', 'failed').required()
}).label('DeferredIssuanceState');

export const managementRoutes = (offers: OfferService, deferred: DeferredService): ServerRoute[] => [
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
    },
    {
        method: 'POST',
        path: '/api/issuer/deferred/{transactionId}/complete',
        options: {
            tags: ['api', 'issuance'],
            description: 'Complete a deferred credential request with its claims',
            notes: [
                'The transaction id is the one the attribute provider was sent with the request it deferred (and the offer webhook was told).',
                'The claims are checked as an attribute provider answer is; the credentials are signed now (status list entries allocated now) and kept until the wallet fetches them once at the deferred credential endpoint.',
                'An unknown transaction, or one of another tenant, answers 404; one no longer pending 409.'
            ].join(' '),
            auth: { access: { scope: ['issuance:offer'] } },
            validate: { params: Joi.object({ transactionId: transactionIdParam }), payload: deferredCompleteSchema },
            response: { status: { 200: deferredStateAnswer } }
        },
        handler: async (request) => {
            const { tenantId } = tenantContext(request);
            const { claims } = request.payload as { claims: Record<string, unknown> };
            return deferred.complete(tenantId, request.params.transactionId as string, claims, (session) => sessionLogOf(request).bind(session, 'deferred'));
        }
    },
    {
        method: 'POST',
        path: '/api/issuer/deferred/{transactionId}/fail',
        options: {
            tags: ['api', 'issuance'],
            description: 'Fail a deferred credential request',
            notes: 'The next deferred credential request answers credential_request_denied with `error` as its description. An unknown transaction, or one of another tenant, answers 404; one no longer pending 409.',
            auth: { access: { scope: ['issuance:offer'] } },
            validate: { params: Joi.object({ transactionId: transactionIdParam }), payload: deferredFailSchema },
            response: { status: { 200: deferredStateAnswer } }
        },
        handler: async (request) => {
            const { tenantId } = tenantContext(request);
            return deferred.fail(tenantId, request.params.transactionId as string, (request.payload as { error?: string } | null)?.error);
        }
    }
];
