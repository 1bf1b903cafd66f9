import type Hapi from '@hapi/hapi';
import type { Boom } from '@hapi/boom';
import { DomainError } from '../../lib/errors';

declare module '@hapi/hapi' {
    interface RouteOptionsApp {
        /** Wallet-facing route: errors answer `{error, error_description}` instead of Boom bodies. */
        protocol?: boolean;
    }
}

const OAUTH_ERROR_BY_STATUS: Record<number, string> = {
    400: 'invalid_request',
    401: 'invalid_token',
    403: 'access_denied',
    404: 'not_found',
    405: 'invalid_request',
    409: 'invalid_request',
    413: 'invalid_request',
    415: 'invalid_request',
    429: 'slow_down',
    503: 'temporarily_unavailable'
};

const GENERIC_SERVER_ERROR = 'An internal server error occurred';

/**
 * Maps every error response to one of two shapes: Boom's `{statusCode, error, message, details?}` on management
 * routes, `{error, error_description}` on protocol routes. Never a stack trace; a 5xx never echoes the cause.
 */
export const mapErrors = (request: Hapi.Request, h: Hapi.ResponseToolkit): Hapi.Lifecycle.ReturnValue => {
    const response = request.response;
    if (!response || !(response as Boom).isBoom) {
        return h.continue;
    }
    const err = response as Boom & Partial<DomainError>;
    const domain = err instanceof DomainError;
    const status = domain ? err.status! : err.output.statusCode;
    const headers: Record<string, string> = { ...(err.output.headers as Record<string, string>), ...(domain ? err.headers : {}) };

    if (status >= 500) {
        (request.app.log ?? request.server.app.log).error({ err, method: request.method, path: request.path }, 'request failed');
    }
    const message = status >= 500 && !(domain && status === 503) ? GENERIC_SERVER_ERROR : domain ? err.message : (err.output.payload.message ?? err.message);

    const body = request.route.settings.app?.protocol
        ? { error: domain ? err.oauthError : OAUTH_ERROR_BY_STATUS[status] ?? 'server_error', error_description: message }
        : {
            statusCode: status,
            error: status >= 500 && !domain ? 'Internal Server Error' : errorName(status, err),
            message,
            ...(domain && err.details ? { details: err.details } : {})
        };

    const out = h.response(body).code(status);
    for (const [name, value] of Object.entries(headers)) {
        if (name.toLowerCase() !== 'content-type') {
            out.header(name, value);
        }
    }
    return out;
};

const errorName = (status: number, err: Boom): string => {
    const payload = err.output.payload.error;
    if (err.output.statusCode === status && payload) {
        return payload;
    }
    return ({ 400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 409: 'Conflict', 503: 'Service Unavailable' } as Record<number, string>)[status] ?? 'Error';
};
