import { DomainError, type ErrorDetail } from '../../lib/errors';

/**
 * An error of the bundle routes with a machine-readable `code` (spec 7.4 names, BUNDLE_INVALID,
 * OPERATION_IN_PROGRESS), answered as the Boom body plus `code` (see routes' `answer`).
 */
export class BundleError extends DomainError {
    constructor(status: number, readonly code: string, message: string, readonly extra?: { details?: ErrorDetail[] | unknown }) {
        super(status, message, status === 409 ? 'conflict' : 'invalid_request', Array.isArray(extra?.details) ? extra.details as ErrorDetail[] : undefined);
    }
}

export const bundleInvalid = (message: string, details: ErrorDetail[]): BundleError =>
    new BundleError(400, 'BUNDLE_INVALID', message, { details });

export const bundleTooLarge = (message: string): BundleError => new BundleError(413, 'BUNDLE_TOO_LARGE', message);
