import type Hapi from '@hapi/hapi';

/** Checks a bearer token and says who calls. Integrated mode and external OIDC mode each provide one. */
export interface TokenVerifier {
    /** Throws InvalidTokenError for any token it does not accept. */
    verify(token: string): Promise<Hapi.AppCredentials>;
}

export class InvalidTokenError extends Error {
    override name = 'InvalidTokenError';
}
