import Joi from 'joi';

/** An external OpenID Connect provider issues the management tokens (external mode). */
export interface OidcOptions {
    issuer: string;
    /** The address this service reaches the provider at, when it differs from the issuer (containers). */
    internalIssuer?: string;
    /** A client of the provider allowed to create the root client there (Keycloak admin API). */
    clientId?: string;
    clientSecret?: string;
    /** The audience tokens must carry; any when absent. */
    audience?: string;
    /** The token claim that names the tenant. */
    tenantClaim: string;
}

export interface OAuth2Options {
    /** The issuer of the tokens this service makes; required in integrated mode. */
    publicUrl?: string;
    /** Seconds a management token lives. */
    tokenTtl: number;
    /** The root client (tenant:manage), created at start: here (integrated mode) or in the provider (external mode). */
    clientId?: string;
    clientSecret?: string;
    /** Absent: this service is the OAuth2 server (integrated mode). */
    oidc?: OidcOptions;
}

const url = Joi.string().uri({ scheme: ['http', 'https'] });

export const oauth2OptionsSchema = Joi.object<OAuth2Options, true>({
    publicUrl: url.when('oidc', { not: Joi.exist(), then: Joi.required() }),
    tokenTtl: Joi.number().integer().min(60).default(3600),
    clientId: Joi.string(),
    clientSecret: Joi.string().min(16),
    oidc: Joi.object<OidcOptions, true>({
        issuer: url.required(),
        internalIssuer: url,
        clientId: Joi.string(),
        clientSecret: Joi.string(),
        audience: Joi.string(),
        tenantClaim: Joi.string().default('tenant_id')
    })
});
