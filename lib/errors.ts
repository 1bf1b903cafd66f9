/**
 * Domain errors thrown by services. One onPreResponse extension (plugins/core) maps them to Boom bodies on
 * management routes and to OAuth-style `{error, error_description}` bodies on protocol routes.
 */

export interface ErrorDetail {
    path: string;
    message: string;
}

export class DomainError extends Error {
    constructor(
        readonly status: number,
        message: string,
        readonly oauthError: string,
        readonly details?: ErrorDetail[],
        readonly headers?: Record<string, string>
    ) {
        super(message);
        this.name = new.target.name;
    }
}

export class ValidationError extends DomainError {
    constructor(message: string, details?: ErrorDetail[]) {
        super(400, message, 'invalid_request', details);
    }
}

export class NotFoundError extends DomainError {
    constructor(message = 'Not Found') {
        super(404, message, 'not_found');
    }
}

export class ConflictError extends DomainError {
    constructor(message: string) {
        super(409, message, 'conflict');
    }
}

export class ForbiddenError extends DomainError {
    constructor(message = 'Forbidden') {
        super(403, message, 'access_denied');
    }
}

export class UnauthorizedError extends DomainError {
    constructor(message = 'Unauthorized', headers: Record<string, string> = { 'WWW-Authenticate': 'Bearer' }) {
        super(401, message, 'invalid_token', undefined, headers);
    }
}

export class UnavailableError extends DomainError {
    constructor(message: string) {
        super(503, message, 'temporarily_unavailable');
    }
}

/** A protocol error with an explicit OAuth error code, e.g. invalid_grant or invalid_nonce. */
export class OAuthError extends DomainError {
    constructor(status: number, error: string, description: string, headers?: Record<string, string>) {
        super(status, description, error, undefined, headers);
    }
}

export const joiDetails = (error: { details: Array<{ path: Array<string | number>; message: string }> }): ErrorDetail[] =>
    error.details.map((d) => ({ path: d.path.join('.'), message: d.message }));
