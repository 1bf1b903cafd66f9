import Joi from 'joi';

/** How the service authenticates to a receiver it calls (webhook endpoints, attribute providers): spec 2.4, 5.3. */
export type OutboundAuth =
    | { type: 'none' }
    | { type: 'apiKey'; config: ApiKeyConfig };

export interface ApiKeyConfig {
    /** The header that carries `value`. */
    headerName: string;
    /** Secret: redacted in audit, logs and exports. */
    value: string;
}

/** Secret paths of a kind whose spec holds an `auth` field of this shape. */
export const OUTBOUND_AUTH_SECRETS = ['auth.config.value'];

export const apiKeyConfigSchema = Joi.object<ApiKeyConfig, true>({
    headerName: Joi.string().max(256).pattern(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'HTTP header name').required()
        .description('HTTP header name (an RFC 9110 token)'),
    // Joi's pattern message quotes the offending value, and this value is a secret: say what is wrong without it.
    value: Joi.string().min(1).max(4096).pattern(/^[^\r\n]*$/).required()
        .messages({ 'string.pattern.base': '{{#label}} must not contain line breaks' })
        .description('Secret header value; use a ${VAR} placeholder in configuration files')
}).label('ApiKeyConfig');

export const outboundAuthSchema = Joi.alternatives().conditional('.type', {
    switch: [
        { is: 'none', then: Joi.object({ type: Joi.string().valid('none').required() }).label('NoAuth') },
        { is: 'apiKey', then: Joi.object({ type: Joi.string().valid('apiKey').required(), config: apiKeyConfigSchema.required() }).label('ApiKeyAuth') }
    ],
    // Names the known types instead of a bare "does not match any of the allowed types".
    otherwise: Joi.object({ type: Joi.string().valid('none', 'apiKey').required() }).unknown(true)
}).label('OutboundAuth').description('type none, or type apiKey: the service sends config.value in the header config.headerName');

/** An http(s) URL the service calls. */
export const outboundUrlSchema = Joi.string().uri({ scheme: ['http', 'https'] }).max(2048);
