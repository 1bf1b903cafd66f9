import Joi from 'joi';
import type { ResourceKind } from '../lib/registry/kind';
import { OUTBOUND_AUTH_SECRETS, outboundAuthSchema, outboundUrlSchema, type OutboundAuth } from './outbound-auth';

/** A receiver of issuance and presentation notifications (spec 2.4, 6.2). */
export interface WebhookEndpoint {
    id: string;
    name: string;
    description?: string | null;
    url: string;
    auth: OutboundAuth;
}

export const webhookEndpointSchema = Joi.object<WebhookEndpoint, true>({
    id: Joi.string().pattern(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, 'webhook endpoint id').required()
        .description('Identifier within the tenant: letters, digits, _ . and -, up to 128 characters'),
    name: Joi.string().min(1).max(255).required(),
    description: Joi.string().max(2000).allow(null),
    url: outboundUrlSchema.required().description('Target of the POST requests (http or https)'),
    auth: outboundAuthSchema.required()
}).label('WebhookEndpoint');

export const webhookEndpointKind: ResourceKind<WebhookEndpoint> = {
    kind: 'WebhookEndpoint',
    file: 'WebhookEndpointConfigFile',
    version: 1,
    schema: webhookEndpointSchema,
    dependsOn: ['Tenant'],
    secrets: OUTBOUND_AUTH_SECRETS,
    secretDestinations: ['url'],
    outboundUrls: ['url'],
    id: (spec) => spec.id,
    location: { dir: 'webhook-endpoints' }
};
