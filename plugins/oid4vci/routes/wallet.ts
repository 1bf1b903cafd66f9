import type Hapi from '@hapi/hapi';
import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { acceptQualities, preferredMediaType } from '../../../lib/http/accept';
import { DomainError, NotFoundError, OAuthError } from '../../../lib/errors';
import { tenantIdSchema } from '../../../resources/tenant';
import { keyChainKind } from '../../../resources/key-chain';
import { systemContext, type Issuer } from '../issuer';
import type { CredentialService } from '../services/credentials';
import type { DeferredService } from '../services/deferred';
import { encryptCredentialResponse, type CredentialRequestDecryption } from '../services/encryption';
import type { MetadataService } from '../services/metadata';
import type { NotificationService } from '../services/notifications';
import type { DpopVerifier } from '../../../lib/oauth/dpop';
import type { TokenEndpoint, WalletRequest } from '../services/tokens';
import type { LiveSession, SessionService } from '../../sessions/services/session-service';
import { sessionLogOf } from '../../sessions/session-log';
import { refuseNulCharacters } from '../../core/nul-guard';

export interface WalletRouteDeps {
    publicUrl: string;
    /** An offer may be fetched more than once. */
    multiConsumption: boolean;
    issuer: Issuer;
    sessions: SessionService;
    metadata: MetadataService;
    tokens: TokenEndpoint;
    credentials: CredentialService;
    notifications: NotificationService;
    dpop: DpopVerifier;
    deferred: DeferredService;
    requestDecryption: CredentialRequestDecryption;
}

export const tenantParams = Joi.object({ tenant: tenantIdSchema.required() });
// Wallet libraries send fields of other drafts: unknown fields are ignored, as the protocols say.
export const anyBody = Joi.object().unknown(true);
export const protocol = { auth: false as const, app: { protocol: true } };

export const noStore = (response: Hapi.ResponseObject): Hapi.ResponseObject => response.header('Cache-Control', 'no-store').header('Pragma', 'no-cache');

const tenantOf = (request: Hapi.Request): string => request.params.tenant as string;

/** A wallet request as the services see it: the tenant, the URL the wallet addressed (DPoP htu), its proofs. */
export const walletRequestOf = (publicUrl: string, request: Hapi.Request): WalletRequest => ({
    tenantId: request.params.tenant as string,
    url: `${publicUrl}${request.path}`,
    method: request.method.toUpperCase(),
    dpop: request.headers.dpop as string | string[] | undefined,
    headers: request.headers as Record<string, string | string[] | undefined>,
    sessionLog: sessionLogOf(request)
});

/**
 * A credential request of an authorization code session as the credential service takes it: by one of the
 * credential identifiers the token response listed (each the id of a configuration the wallet was authorized for)
 * turned into the request by that configuration; one for a configuration outside the authorization refused.
 */
const withinAuthorization = (session: LiveSession<'issuance'>, body: Record<string, unknown>): Record<string, unknown> => {
    const grant = session.data.authorization;
    if (!grant) {
        return body;
    }
    const { credential_identifier: identifier, ...rest } = body;
    const request = grant.authorizationDetails && typeof identifier === 'string' && body.credential_configuration_id === undefined && grant.credentialConfigurationIds.includes(identifier)
        ? { ...rest, credential_configuration_id: identifier }
        : body;
    const id = request.credential_configuration_id;
    if (typeof id === 'string' && !grant.credentialConfigurationIds.includes(id)) {
        throw new OAuthError(400, 'unknown_credential_configuration', `The wallet was not authorized for credential configuration ${id}`);
    }
    return request;
};

export const walletRoutes = (deps: WalletRouteDeps): ServerRoute[] => {
    const known = async (tenantId: string) => {
        if (!(await deps.issuer.tenant(tenantId))) {
            throw new NotFoundError('Unknown issuer');
        }
    };
    const walletRequest = (request: Hapi.Request) => walletRequestOf(deps.publicUrl, request);
    const refuseQueryToken = (request: Hapi.Request) => {
        if ('access_token' in request.query) {
            throw new OAuthError(400, 'invalid_request', 'Access tokens are not accepted in the query string');
        }
    };

    return [
        {
            method: 'GET',
            path: '/.well-known/openid-credential-issuer/issuers/{tenant}',
            options: { ...protocol, validate: { params: tenantParams }, description: 'OpenID4VCI credential issuer metadata (JSON, or signed as application/jwt when Accept asks for it)' },
            handler: async (request, h) => {
                const tenantId = tenantOf(request);
                await known(tenantId);
                const accept = request.headers.accept as string | undefined;
                if (preferredMediaType(accept, ['application/json', 'application/jwt']) === 'application/jwt') {
                    const signed = await deps.metadata.signedIssuerMetadata(tenantId);
                    if (signed) {
                        return h.response(signed).type('application/jwt').vary('accept');
                    }
                    if (!(acceptQualities(accept, ['application/json'])['application/json'] > 0)) {
                        throw new DomainError(406, 'Signed metadata needs an access key chain, which this issuer has not; application/json is available', 'not_acceptable');
                    }
                }
                return h.response(await deps.metadata.issuerMetadata(tenantId)).vary('accept');
            }
        },
        {
            method: 'GET',
            path: '/.well-known/oauth-authorization-server/issuers/{tenant}',
            options: { ...protocol, validate: { params: tenantParams }, description: 'Authorization server metadata (RFC 8414)' },
            handler: async (request) => {
                await known(tenantOf(request));
                return deps.metadata.authorizationServerMetadata(tenantOf(request));
            }
        },
        {
            method: 'GET',
            path: '/issuers/{tenant}/jwks',
            options: { ...protocol, validate: { params: tenantParams }, description: 'Public keys of the tenant\'s key chains' },
            handler: async (request) => {
                const tenantId = request.params.tenant as string;
                await known(tenantId);
                const { registry, signing } = request.server;
                const chains = await registry.list(systemContext(tenantId), keyChainKind);
                return { keys: await Promise.all(chains.map((c) => signing.publicJwk(tenantId, c.spec.id))) };
            }
        },
        {
            method: 'GET',
            path: '/issuers/{tenant}/vci/credential-offers/{id}',
            options: { ...protocol, validate: { params: tenantParams.keys({ id: Joi.string().max(64).required() }) }, description: 'A credential offer by reference' },
            handler: async (request, h) => {
                const tenantId = request.params.tenant as string;
                const session = await deps.sessions.findBy('issuance', tenantId, 'offerId', request.params.id as string);
                const log = sessionLogOf(request).bind(session, 'offer');
                const gone = () => new NotFoundError('Unknown or already used credential offer');
                if (!session || session.status !== 'active' || (session.expiresAt && Date.parse(session.expiresAt) <= Date.now())) {
                    throw gone();
                }
                if (!deps.multiConsumption
                    && !(await deps.sessions.update(session.id, { offerFetchedAt: new Date().toISOString() }, { isNull: ['offerFetchedAt'], status: ['active'] }))) {
                    throw gone();
                }
                log.info({ event: 'flow_start' }, 'credential offer fetched');
                return noStore(h.response(session.data.offer));
            }
        },
        {
            method: 'POST',
            path: '/issuers/{tenant}/authorize/token',
            options: {
                ...protocol,
                payload: { allow: ['application/x-www-form-urlencoded', 'application/json'] },
                validate: { params: tenantParams, payload: anyBody },
                description: 'Token endpoint: pre-authorized code, authorization code (PKCE S256) and refresh token grants; DPoP optional or required by the issuance config, with server nonces in the authorization code flow'
            },
            handler: async (request, h) => {
                const answer = await deps.tokens.exchange(walletRequest(request), request.payload as object);
                // A fresh nonce for the wallet's next DPoP proof (credential, notification and refresh requests).
                const response = noStore(h.response(answer));
                return answer.token_type === 'DPoP' ? response.header('DPoP-Nonce', deps.dpop.nonce()) : response;
            }
        },
        {
            method: 'POST',
            path: '/issuers/{tenant}/vci/nonce',
            options: { ...protocol, payload: { failAction: 'ignore' }, validate: { params: tenantParams }, description: 'A fresh, single-use c_nonce, and a fresh DPoP nonce in the DPoP-Nonce header' },
            handler: async (request, h) => {
                await known(tenantOf(request));
                return noStore(h.response({ c_nonce: await deps.credentials.nonce(tenantOf(request)) })).header('DPoP-Nonce', deps.dpop.nonce());
            }
        },
        {
            method: 'POST',
            path: '/issuers/{tenant}/vci/credential',
            options: {
                ...protocol,
                // Read here, not by hapi: an encrypted request (application/jwt) is decrypted before it is parsed.
                payload: { parse: false, output: 'data', allow: ['application/json', 'application/jwt'] },
                ext: {
                    onPostAuth: {
                        // After the core's NUL guard has checked path and query; the request it could not read is checked here.
                        method: async (request, h) => {
                            (request as { payload: unknown }).payload = await deps.requestDecryption.read(tenantOf(request), request.headers['content-type'] as string | undefined, request.payload as Buffer | null);
                            return refuseNulCharacters.call(null, request, h);
                        },
                        options: { after: ['hallmark-core'] }
                    }
                },
                // No payload validation: hapi allows it only on payloads it parses; read() answers a JSON object or refuses.
                validate: { params: tenantParams },
                description: 'Credential endpoint: the request as JSON or as a compact JWE (application/jwt) to the credential_request_encryption key; the answer JSON, or a compact JWE when the request has credential_response_encryption'
            },
            handler: async (request, h) => {
                refuseQueryToken(request);
                const session = await deps.tokens.authenticate(walletRequest(request), request.headers.authorization as string | undefined);
                const log = sessionLogOf(request).bind(session, 'credential');
                const credentialRequest = withinAuthorization(session, request.payload as Record<string, unknown>);
                const answer = await deps.credentials.issue(session, credentialRequest, log);
                const encoded = await encryptCredentialResponse(credentialRequest, answer);
                // A deferred request answers 202 with its transaction (OpenID4VCI 8.3).
                return noStore(h.response(encoded.payload).type(encoded.type)).code('transaction_id' in answer ? 202 : 200);
            }
        },
        {
            method: 'POST',
            path: '/issuers/{tenant}/vci/notification',
            options: { ...protocol, validate: { params: tenantParams, payload: anyBody }, description: 'Wallet notifications about issued credentials' },
            handler: async (request, h) => {
                refuseQueryToken(request);
                const session = await deps.tokens.authenticate(walletRequest(request), request.headers.authorization as string | undefined);
                const log = sessionLogOf(request).bind(session, 'notification');
                await deps.notifications.notify(session, request.payload as object, log);
                return h.response().code(204);
            }
        },
        {
            method: 'POST',
            path: '/issuers/{tenant}/vci/deferred_credential',
            options: {
                ...protocol,
                validate: { params: tenantParams, payload: anyBody },
                description: 'Deferred credential endpoint: the credentials of a deferred request once, with a token of its session; issuance_pending with interval until they are ready'
            },
            handler: async (request, h) => {
                refuseQueryToken(request);
                const session = await deps.tokens.authenticate(walletRequest(request), request.headers.authorization as string | undefined);
                const log = sessionLogOf(request).bind(session, 'deferred');
                const answer = await deps.deferred.fetch(session, request.payload as { transaction_id?: unknown }, log);
                if ('pending' in answer) {
                    // The contract's answer for a credential not ready yet: the issuance_pending error with the interval.
                    return noStore(h.response({ error: 'issuance_pending', error_description: `The credential is not ready yet; ask again in ${answer.pending.interval} seconds`, interval: answer.pending.interval }).code(400));
                }
                return noStore(h.response(answer.issued));
            }
        }
    ];
};
