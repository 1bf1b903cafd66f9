import { OAuthError } from '../../../lib/errors';

/** What client authentication sees of a PAR or token request. */
export interface ClientRequest {
    tenantId: string;
    headers: Record<string, string | string[] | undefined>;
    /** The form parameters of the request. */
    body: Record<string, unknown>;
}

export interface AuthenticatedClient {
    clientId: string;
}

const MAX_CLIENT_ID_LENGTH = 255;
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;

/**
 * The one place where the built-in authorization server authenticates wallets, at PAR and at the token endpoint
 * (authorization_code and refresh_token grants). Wallets are public clients identified by `client_id` in the form
 * (token_endpoint_auth_method `none`); wallet attestation (attest_jwt_client_auth) plugs in here.
 */
export class ClientAuthenticator {
    async authenticate(request: ClientRequest): Promise<AuthenticatedClient> {
        const clientId = request.body.client_id;
        if (typeof clientId !== 'string' || !clientId) {
            throw new OAuthError(400, 'invalid_request', 'client_id is required');
        }
        if (clientId.length > MAX_CLIENT_ID_LENGTH || CONTROL_CHARACTER.test(clientId)) {
            throw new OAuthError(400, 'invalid_request', `client_id must be at most ${MAX_CLIENT_ID_LENGTH} characters without control characters`);
        }
        return { clientId };
    }
}
