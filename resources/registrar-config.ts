import Joi from 'joi';
import type { ResourceKind } from '../lib/registry/kind';
import { apiKeyConfigSchema, outboundUrlSchema, type ApiKeyConfig } from './outbound-auth';
import { pemCertificateSchema } from './trust-list';

/*
 * Registrar configuration (spec 9 RegistrarConfigFile, `registrar.json`, /api/registrar/config, role
 * registrar:manage): where the tenant's registrar issues registration certificates for its presentation
 * configurations (spec 2.1 registration_cert), how the service authenticates to it, and which certificates may sign
 * what it issues. The spec leaves the fields open; docs/trust.md describes them and the registrar protocol.
 */

export interface ClientCredentialsAuth {
    type: 'clientCredentials';
    /** OAuth 2.0 token endpoint of the registrar's authorization server. */
    tokenUrl: string;
    clientId: string;
    /** Secret. */
    clientSecret: string;
    scope?: string;
}

export type RegistrarAuth =
    | { type: 'none' }
    | { type: 'apiKey'; config: ApiKeyConfig }
    | ClientCredentialsAuth;

export interface RegistrarConfig {
    /** Base URL of the registrar API (the paths of docs/trust.md are below it). */
    registrarUrl: string;
    /** The registrar's identifier of this tenant as a relying party: registration requests (strategy body) go there. */
    relyingPartyId?: string;
    auth: RegistrarAuth;
    /**
     * Certificates that may sign registration certificates (the registrar's CA or signing certificate). When set, a
     * certificate the registrar answers (or an imported one) must carry an x5c that chains to one of them.
     */
    signerCertificates?: string[];
    /** Seconds before a certificate's expiry at which the background job requests a new one. Default 86400. */
    refreshBeforeExpirySeconds?: number;
}

/** Secret values: redacted in answers, audit, logs and exports (`${VAR}` placeholders in files). */
export const REGISTRAR_SECRETS = ['auth.config.value', 'auth.clientSecret'];

const clientCredentialsSchema = Joi.object<ClientCredentialsAuth, true>({
    type: Joi.string().valid('clientCredentials').required(),
    tokenUrl: outboundUrlSchema.required().description('OAuth 2.0 token endpoint of the registrar'),
    clientId: Joi.string().min(1).max(255).required(),
    clientSecret: Joi.string().min(1).max(4096).required().description('Secret; use a ${VAR} placeholder in configuration files'),
    scope: Joi.string().max(1024)
}).label('RegistrarClientCredentials');

export const registrarAuthSchema = Joi.alternatives().conditional('.type', {
    switch: [
        { is: 'none', then: Joi.object({ type: Joi.string().valid('none').required() }).label('NoAuth') },
        { is: 'apiKey', then: Joi.object({ type: Joi.string().valid('apiKey').required(), config: apiKeyConfigSchema.required() }).label('ApiKeyAuth') },
        { is: 'clientCredentials', then: clientCredentialsSchema }
    ],
    otherwise: Joi.object({ type: Joi.string().valid('none', 'apiKey', 'clientCredentials').required() }).unknown(true)
}).label('RegistrarAuth').description('none; apiKey (a header with a secret value); or clientCredentials (an OAuth 2.0 access token from tokenUrl)');

export const registrarConfigSchema = Joi.object<RegistrarConfig, true>({
    registrarUrl: outboundUrlSchema.required().description('Base URL of the registrar API'),
    relyingPartyId: Joi.string().min(1).max(255).pattern(/^[^/?#]+$/, 'path segment')
        .description('The registrar\'s id of this tenant as relying party; needed to register a registration_cert body'),
    auth: registrarAuthSchema.required(),
    signerCertificates: Joi.array().items(pemCertificateSchema).min(1)
        .description('Certificates that may sign registration certificates; when set, every certificate must chain to one'),
    refreshBeforeExpirySeconds: Joi.number().integer().min(60).max(30 * 86400).default(86400)
        .description('Seconds before expiry at which a new registration certificate is requested. Default 86400')
}).label('RegistrarConfig');

export const registrarConfigKind: ResourceKind<RegistrarConfig> = {
    kind: 'RegistrarConfig',
    file: 'RegistrarConfigFile',
    version: 1,
    schema: registrarConfigSchema,
    dependsOn: ['Tenant'],
    singleton: true,
    secrets: REGISTRAR_SECRETS,
    // A stored secret is never sent to a registrar or token endpoint that changed since it was stored.
    secretDestinations: ['registrarUrl', 'auth.tokenUrl'],
    outboundUrls: ['registrarUrl', 'auth.tokenUrl'],
    id: () => 'RegistrarConfig',
    location: { file: 'registrar.json' }
};
