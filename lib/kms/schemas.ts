import Joi from 'joi';

/* Option schemas shared by the KMS provider types that talk to a service over HTTP (http, vault, csc). */

/** An http(s) URL without credentials: they would escape secretPaths redaction (answers, exports) and are never sent. */
export const httpUrlSchema = (): Joi.StringSchema => Joi.string().uri({ scheme: ['http', 'https'] })
    .custom((value: string, helpers) => {
        const url = new URL(value);
        return url.username || url.password ? helpers.error('url.credentials') : value;
    })
    .messages({ 'url.credentials': '{{#label}} must not contain credentials; use the provider\'s secret fields' });

/** The address of a service that paths are appended to: http(s), no trailing slash, query, fragment or credentials. */
export const serviceUrlSchema = (): Joi.StringSchema => httpUrlSchema()
    .custom((value: string, helpers) => {
        if (value.endsWith('/')) {
            return helpers.error('serviceUrl.trailingSlash');
        }
        const url = new URL(value);
        if (url.search || url.hash || value.includes('?') || value.includes('#')) {
            return helpers.error('serviceUrl.query');
        }
        // Credentials in the URL would escape secretPaths redaction and end up in answers and exports.
        if (url.username || url.password) {
            return helpers.error('serviceUrl.credentials');
        }
        return value;
    })
    .messages({
        'serviceUrl.trailingSlash': '{{#label}} must not end with a slash (paths are appended to it)',
        'serviceUrl.query': '{{#label}} must not have a query or fragment',
        'serviceUrl.credentials': '{{#label}} must not contain credentials; use the provider\'s secret fields'
    });
