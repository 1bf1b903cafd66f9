import { OAuthError } from '../../../lib/errors';
import { tenantUrl, type Issuer } from '../issuer';
import { hasClientAttestation, type ClientAttestationVerifier } from './client-attestation';

/** What client authentication sees of a PAR or token request. */
export interface ClientRequest {
    tenantId: string;
    headers: Record<string, string | string[] | undefined>;
    /** The form parameters of the request. */
    body: Record<string, unknown>;
}

export interface AuthenticatedClient {
    clientId: string;
    /** Whether the wallet proved a wallet attestation (attest_jwt_client_auth). */
    attested: boolean;
    /** The attested instance key's thumbprint (cnf.jwk): refresh tokens of an attested wallet are bound to it. */
    instanceJkt?: string;
}

const MAX_CLIENT_ID_LENGTH = 255;
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;

/**
 * The one place where the built-in authorization server authenticates wallets, at PAR and at the token endpoint
 * (every grant). A wallet that sends attestation headers is authenticated by them (attest_jwt_client_auth), and a
 * failed attestation is never downgraded to a public client. Without them the wallet is a public client identified
 * by `client_id` in the form (token_endpoint_auth_method `none`), which `walletAttestationRequired` refuses with
 * `invalid_client`.
 */
export class ClientAuthenticator {
    constructor(private readonly deps: { publicUrl: string; issuer: Issuer; attestation: ClientAttestationVerifier }) {}

    /** PAR and the authorization_code and refresh_token grants: a client is always named. */
    async authenticate(request: ClientRequest): Promise<AuthenticatedClient> {
        const client = await this.identify(request, true);
        return { clientId: client.clientId!, attested: client.attested, ...(client.instanceJkt ? { instanceJkt: client.instanceJkt } : {}) };
    }

    /** The pre-authorized code grant: without attestation the wallet may stay anonymous (no client_id). */
    async authenticateAnonymous(request: ClientRequest): Promise<{ clientId?: string; attested: boolean }> {
        return this.identify(request, false);
    }

    /** `named`: whether a public client must name itself. An attested wallet is named by its attestation's sub. */
    private async identify(request: ClientRequest, named: boolean): Promise<{ clientId?: string; attested: boolean; instanceJkt?: string }> {
        const attested = hasClientAttestation(request.headers);
        const clientId = this.clientIdOf(request.body, named && !attested);
        if (attested) {
            const client = await this.deps.attestation.authenticate({
                tenantId: request.tenantId,
                headers: request.headers,
                issuer: tenantUrl(this.deps.publicUrl, request.tenantId),
                ...(clientId !== undefined ? { clientId } : {})
            });
            return { clientId: client.clientId, attested: true, instanceJkt: client.cnfJkt };
        }
        if ((await this.deps.issuer.settings(request.tenantId)).walletAttestationRequired) {
            throw new OAuthError(400, 'invalid_client', 'This issuer requires a wallet attestation: send the OAuth-Client-Attestation and OAuth-Client-Attestation-PoP headers');
        }
        return { ...(clientId !== undefined ? { clientId } : {}), attested: false };
    }

    private clientIdOf(body: Record<string, unknown>, required: boolean): string | undefined {
        const clientId = body.client_id;
        if (clientId === undefined && !required) {
            return undefined;
        }
        if (typeof clientId !== 'string' || !clientId) {
            throw new OAuthError(400, 'invalid_request', 'client_id is required');
        }
        if (clientId.length > MAX_CLIENT_ID_LENGTH || CONTROL_CHARACTER.test(clientId)) {
            throw new OAuthError(400, 'invalid_request', `client_id must be at most ${MAX_CLIENT_ID_LENGTH} characters without control characters`);
        }
        return clientId;
    }
}
