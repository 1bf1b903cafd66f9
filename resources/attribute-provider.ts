import Joi from 'joi';
import type { ResourceKind } from '../lib/registry/kind';
import { OUTBOUND_AUTH_SECRETS, outboundAuthSchema, outboundUrlSchema, type OutboundAuth } from './outbound-auth';

/**
 * Resolves claim values at issuance: the service POSTs `{session, credential_configuration_id, identity?, claims?}`
 * to url and expects `{claims}` or `{deferred: true, interval?}`.
 */
export interface AttributeProvider {
    id: string;
    description?: string | null;
    url: string;
    auth: OutboundAuth;
}

export const attributeProviderSchema = Joi.object<AttributeProvider, true>({
    id: Joi.string().pattern(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, 'attribute provider id').required()
        .description('Identifier within the tenant: letters, digits, _ . and -, up to 128 characters'),
    description: Joi.string().max(2000).allow(null),
    url: outboundUrlSchema.required().description('Endpoint the service POSTs claim requests to (http or https)'),
    auth: outboundAuthSchema.required()
}).label('AttributeProvider');

export const attributeProviderKind: ResourceKind<AttributeProvider> = {
    kind: 'AttributeProvider',
    file: 'AttributeProviderConfigFile',
    version: 1,
    schema: attributeProviderSchema,
    dependsOn: ['Tenant'],
    secrets: OUTBOUND_AUTH_SECRETS,
    secretDestinations: ['url'],
    outboundUrls: ['url'],
    id: (spec) => spec.id,
    location: { dir: 'attribute-providers' }
};
