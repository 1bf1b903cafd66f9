import Crypto from 'node:crypto';
import * as Jose from 'jose';
import Joi from 'joi';
import { newP256Jwks } from '../../../lib/crypto/p256';
import { OAuthError, ValidationError } from '../../../lib/errors';
import type { Logger } from '../../../lib/logging';
import { checkUrl, OutboundBlockedError, type OutboundPolicy } from '../../../lib/outbound';
import { ChangeCache, changedResource } from '../../../lib/cache';
import type { StoredResource, TenantContext } from '../../../lib/registry/kind';
import type { Registry } from '../../../lib/registry/registry';
import type { LiveSession, SessionService } from '../../sessions/services/session-service';
import type { WebhookTarget } from '../../../lib/webhooks';
import { keyChainOfUsage } from '../../../resources/key-chain';
import { outboundAuthSchema, outboundUrlSchema } from '../../../resources/outbound-auth';
import { presentationConfigKind, skewSecondsSchema, withTenantUrl, type ClientIdPrefix, type PresentationConfig, type StatusCheckMode } from '../../../resources/presentation-config';
import { checkTransactionDataCredentialIds, transactionDataEntrySchema, type TransactionData } from '../../../resources/presentation/transaction-data';
import { webhookEndpointKind } from '../../../resources/webhook-endpoint';
import type { SigningService } from '../../kms/services/signing';
import { registrationCertsOf } from '../../trust/services/registration-certs';

export interface InlineWebhook extends WebhookTarget {
    includeRawTokensFor?: string[];
}

export interface PresentationRequest {
    requestId: string;
    response_type: 'uri' | 'dc-api' | 'iso-18013-7';
    webhook?: InlineWebhook;
    reference?: string;
    transaction_data?: TransactionData[];
    redirectUri?: string;
    skewSeconds?: number;
    expected_origins?: string[];
}

export const presentationRequestSchema = Joi.object<PresentationRequest, true>({
    requestId: Joi.string().max(128).required().description('The presentation configuration to use'),
    response_type: Joi.string().valid('uri', 'dc-api', 'iso-18013-7').default('uri'),
    webhook: Joi.object({
        url: outboundUrlSchema.required(),
        auth: outboundAuthSchema.default({ type: 'none' }),
        includeRawTokensFor: Joi.array().items(Joi.string()).unique()
    }).label('InlineWebhook'),
    reference: Joi.string().max(255),
    // The entry schema of the configuration (TS12 types and payloads included); credential ids are checked at create.
    transaction_data: Joi.array().items(transactionDataEntrySchema).min(1).description('Replaces the configuration\'s transaction_data'),
    redirectUri: Joi.string().max(2048).custom((value: string, helpers) => {
        // {sessionId} is replaced when the wallet is sent there, so the URL is checked with it filled in.
        try {
            const url = new URL(value.replaceAll('{sessionId}', 'session'));
            return ['http:', 'https:'].includes(url.protocol) ? value : helpers.error('string.uri');
        }
        catch {
            return helpers.error('string.uri');
        }
    }).description('Same-device redirect target; {sessionId} is replaced by the session id'),
    skewSeconds: skewSecondsSchema.description('Overrides the configuration\'s skewSeconds'),
    expected_origins: Joi.array().items(Joi.string().uri({ scheme: ['https', 'http'] })).min(1).max(20)
        .description('dc-api (required) and iso-18013-7 (at most one): the web origins the response may come from')
}).label('PresentationRequest');

/** What a presentation session keeps (sealed): protocol values, the ephemeral decryption key, and later the result. */
export interface PresentationData {
    clientId: string;
    responseUri: string;
    nonce: string;
    dcqlQuery: PresentationConfig['dcql_query'];
    transactionData?: string[];
    encryptionKey: { privateJwk: Jose.JWK; publicJwk: Jose.JWK };
    accessKeyChainId: string;
    skewSeconds: number;
    /** The configuration's statusCheckMode when the request was made; absent in sessions made before it was kept: strict. */
    statusCheckMode?: StatusCheckMode;
    /** Where the result goes, resolved when the request was made (spec 6.2): the inline webhook, else the endpoint's. */
    webhook?: InlineWebhook;
    redirectUri?: string;
    walletNonceParam?: string;
    /**
     * How the response arrives: absent for the redirect flow (request_uri, direct_post.jwt); `dc-api` for OpenID4VP
     * over the Digital Credentials API (dc_api.jwt, posted by the relying party's backend); another registered
     * response type (e.g. `iso-18013-7`) for sessions a plugin made through registerPresentationResponseType.
     */
    protocol?: 'dc-api' | 'iso-18013-7';
    /** DC API: the origins the response may come from (the request's expected_origins). */
    expectedOrigins?: string[];
    /** ISO 18013-7 Annex C: the base64url EncryptionInfo sent with the request and the origin of its SessionTranscript. */
    encryptionInfo?: string;
    origin?: string;
    result?: { outcome: Record<string, unknown>; credentials?: Array<Record<string, unknown>>; rawTokens?: Record<string, unknown[]> };
}

declare module '../../sessions/services/session-service' {
    interface SessionDataTypes {
        presentation: PresentationData;
    }
}

const b64url = (value: string | Uint8Array) => Buffer.from(value).toString('base64url');

export const REQUEST_OBJECT_TYP = 'oauth-authz-req+jwt';

/** What every response type starts from: the configuration and the request, resolved and checked. */
export interface PreparedPresentation {
    config: PresentationConfig;
    dcqlQuery: PresentationConfig['dcql_query'];
    transactionData?: TransactionData[];
    webhook?: InlineWebhook;
    accessKeyChainId: string;
    clientId: string;
    skewSeconds: number;
    statusCheckMode: StatusCheckMode;
    redirectUri?: string;
}

/**
 * A response type another plugin provides (`server.registerPresentationResponseType`): it gets the prepared request
 * and answers the offer (201 body with at least `session`), creating the session through `openSession`.
 */
export interface PresentationResponseType {
    create(ctx: TenantContext & { tenantId: string }, request: PresentationRequest, prepared: PreparedPresentation): Promise<{ session: string } & Record<string, unknown>>;
}

const DNS_SAN = /(?:^|,\s*)DNS:([^,]+)/g;

/** When a session of a prepared request expires: the configuration's lifeTime (default 300 s) from now. */
const expiryOf = (prepared: PreparedPresentation): Date => new Date(Date.now() + (prepared.config.lifeTime ?? 300) * 1000);

/** How long another replica's change of a presentation configuration may go unseen here (this process's: never). */
const CONFIG_TTL_MS = 10_000;

export class PresentationRequests {
    /**
     * The presentation configurations, read on every request, cached until they change: the registry read through
     * objection and knex took 0.28 ms of CPU per ISO 18013-7 flow (their self time in a profile of the bench's
     * closed loop, 506 ms for 1,800 flows; none left with the cache), about 7 % of a flow.
     */
    private readonly configs: ChangeCache<[tenantId: string, id: string], StoredResource<PresentationConfig> | undefined>;

    constructor(private readonly deps: { publicUrl: string; outbound: OutboundPolicy; registry: Registry; sessions: SessionService; signing: SigningService; log: Logger }) {
        this.configs = new ChangeCache({ ttlMs: CONFIG_TTL_MS, load: (tenantId: string, id: string) => deps.registry.get(this.ctx(tenantId), presentationConfigKind, id) })
            .dropOnChange(deps.registry, [presentationConfigKind], changedResource);
    }

    private ctx(tenantId: string): TenantContext {
        return { tenantId, clientId: 'system:oid4vp', roles: [] };
    }

    /** The access key chain of a configuration: its own, else the tenant's only (or first) access chain. */
    private async accessKeyChain(tenantId: string, config: PresentationConfig): Promise<string> {
        if (config.accessKeyChainId) {
            return config.accessKeyChainId;
        }
        const access = await keyChainOfUsage(this.deps.registry, this.ctx(tenantId), 'access');
        if (!access) {
            throw new ValidationError(`Presentation configuration ${config.id} has no accessKeyChainId and the tenant has no access key chain`);
        }
        return access;
    }

    /**
     * `x509_hash:` + base64url SHA-256 of the leaf certificate (DER) of the access key chain; with `x509_san_dns`,
     * `x509_san_dns:` + the first DNS name of the leaf's subjectAltName (400 when it has none).
     */
    async clientId(tenantId: string, keyChainId: string, prefix: ClientIdPrefix = 'x509_hash'): Promise<string> {
        const { x5c } = await this.deps.signing.material(tenantId, keyChainId);
        const leaf = Buffer.from(x5c[0]!, 'base64');
        if (prefix === 'x509_san_dns') {
            const dns = [...(new Crypto.X509Certificate(leaf).subjectAltName ?? '').matchAll(DNS_SAN)].map((m) => m[1]!.trim());
            if (!dns.length) {
                throw new ValidationError(`clientIdPrefix x509_san_dns needs a DNS subjectAltName in the certificate of access key chain ${keyChainId}`, [{ path: 'clientIdPrefix', message: 'the access certificate has no DNS SAN' }]);
            }
            return `x509_san_dns:${dns[0]}`;
        }
        return `x509_hash:${b64url(Crypto.createHash('sha256').update(leaf).digest())}`;
    }

    /** Another plugin's response type (e.g. iso-18013-7); without it that response_type answers 400. */
    registerResponseType(type: 'iso-18013-7', handler: PresentationResponseType): void {
        if (this.responseTypes.has(type)) {
            throw new Error(`Presentation response type ${type} is already registered`);
        }
        this.responseTypes.set(type, handler);
    }

    private readonly responseTypes = new Map<string, PresentationResponseType>();

    async create(ctx: TenantContext & { tenantId: string }, request: PresentationRequest): Promise<{ session: string } & Record<string, unknown>> {
        const type = request.response_type ?? 'uri';
        const handler = this.responseTypes.get(type);
        if (type !== 'uri' && type !== 'dc-api' && !handler) {
            throw new ValidationError(`response_type ${type} is not available in this deployment`, [{ path: 'response_type', message: 'no plugin of this deployment provides it' }]);
        }
        if (type === 'uri' && request.expected_origins) {
            throw new ValidationError('expected_origins applies to the Digital Credentials API only', [{ path: 'expected_origins', message: 'only with response_type dc-api or iso-18013-7' }]);
        }
        const prepared = await this.prepare(ctx, request);
        if (handler) {
            return handler.create(ctx, request, prepared);
        }
        return type === 'dc-api' ? this.createDcApi(ctx, request, prepared) : this.createRedirect(ctx, request, prepared);
    }

    /** The configuration, DCQL query, transaction data, webhook and access key chain of a request, checked (400). */
    async prepare(ctx: TenantContext & { tenantId: string }, request: PresentationRequest): Promise<PreparedPresentation> {
        const stored = await this.configs.get(ctx.tenantId, request.requestId);
        if (!stored) {
            throw new ValidationError(`Unknown presentation configuration ${request.requestId}`, [{ path: 'requestId', message: 'does not exist' }]);
        }
        const config = stored.spec;
        const tenantUrl = `${this.deps.publicUrl}/issuers/${ctx.tenantId}`;
        const dcqlQuery = withTenantUrl(config, tenantUrl);
        const queryIds = new Set(dcqlQuery.credentials.map((c: { id: string }) => c.id));
        const transactionData = request.transaction_data ?? config.transaction_data ?? undefined;
        const unknownIds = checkTransactionDataCredentialIds(transactionData ?? [], dcqlQuery);
        if (unknownIds.length) {
            throw new ValidationError(`transaction_data names credential ids that are not in the DCQL query: ${unknownIds.map((p) => p.message).join('; ')}`, unknownIds.map((p) => ({ ...p, path: `transaction_data.${p.path}` })));
        }
        for (const id of request.webhook?.includeRawTokensFor ?? []) {
            if (!queryIds.has(id)) {
                throw new ValidationError(`includeRawTokensFor names unknown credential query id ${id}`, [{ path: 'webhook.includeRawTokensFor', message: 'must be ids of the DCQL query' }]);
            }
        }
        const webhook = request.webhook ? await this.inlineWebhook(request.webhook) : await this.endpointWebhook(ctx, config.webhookEndpointId);
        const accessKeyChainId = await this.accessKeyChain(ctx.tenantId, config);
        const clientId = await this.clientId(ctx.tenantId, accessKeyChainId, config.clientIdPrefix ?? 'x509_hash');
        const redirectUri = request.redirectUri ?? config.redirectUri ?? undefined;
        return {
            config,
            dcqlQuery,
            ...(transactionData ? { transactionData } : {}),
            ...(webhook ? { webhook } : {}),
            accessKeyChainId,
            clientId,
            skewSeconds: request.skewSeconds ?? config.skewSeconds ?? 60,
            statusCheckMode: config.statusCheckMode ?? 'strict',
            ...(redirectUri ? { redirectUri } : {})
        };
    }

    /** The session data every OpenID4VP response type shares: nonce, a fresh ECDH-ES response key, the request's settings. */
    private async sessionData(prepared: PreparedPresentation, responseUri: string): Promise<PresentationData> {
        const { privateJwk, publicJwk } = newP256Jwks();
        const kid = Crypto.randomBytes(8).toString('base64url');
        return {
            clientId: prepared.clientId,
            responseUri,
            nonce: Crypto.randomBytes(24).toString('base64url'),
            dcqlQuery: prepared.dcqlQuery,
            ...(prepared.transactionData ? { transactionData: prepared.transactionData.map((t) => b64url(JSON.stringify(t))) } : {}),
            encryptionKey: {
                privateJwk: { ...privateJwk, kid },
                publicJwk: { ...publicJwk, kid, use: 'enc', alg: 'ECDH-ES' }
            },
            accessKeyChainId: prepared.accessKeyChainId,
            skewSeconds: prepared.skewSeconds,
            statusCheckMode: prepared.statusCheckMode,
            ...(prepared.webhook ? { webhook: prepared.webhook } : {}),
            ...(prepared.redirectUri ? { redirectUri: prepared.redirectUri } : {})
        };
    }

    /** Creates the session of a prepared request (expiry from the configuration's lifeTime unless given). */
    async openSession(ctx: TenantContext & { tenantId: string }, request: PresentationRequest, prepared: PreparedPresentation, walletNonce: string, data: PresentationData, expiresAt = expiryOf(prepared)): Promise<string> {
        const session = await this.deps.sessions.create({
            tenantId: ctx.tenantId,
            type: 'presentation',
            requestId: prepared.config.id,
            reference: request.reference ?? null,
            walletNonce,
            expiresAt: expiresAt.toISOString(),
            data
        });
        return session.id;
    }

    private async createRedirect(ctx: TenantContext & { tenantId: string }, request: PresentationRequest, prepared: PreparedPresentation): Promise<{ session: string; uri: string; crossDeviceUri: string }> {
        const walletNonce = Crypto.randomBytes(24).toString('base64url');
        const data = await this.sessionData(prepared, `${this.deps.publicUrl}/presentations/${walletNonce}/oid4vp`);
        const session = await this.openSession(ctx, request, prepared, walletNonce, data);
        const requestUri = `${this.deps.publicUrl}/presentations/${walletNonce}/oid4vp/request`;
        const uri = `openid4vp://?client_id=${encodeURIComponent(data.clientId)}&request_uri=${encodeURIComponent(requestUri)}`;
        return { session, uri, crossDeviceUri: `${uri}&request_uri_method=post` };
    }

    /** An inline webhook's URL must be one the outbound policy allows now (400), and is checked again at delivery. */
    private async inlineWebhook(webhook: InlineWebhook): Promise<InlineWebhook> {
        try {
            await checkUrl(this.deps.outbound, webhook.url);
        }
        catch (err) {
            if (err instanceof OutboundBlockedError) {
                throw new ValidationError(`webhook.url: ${err.message}`, [{ path: 'webhook.url', message: err.message }]);
            }
            // A name that does not resolve now is not a policy violation; delivery checks it again and logs the failure.
        }
        return webhook;
    }

    /**
     * The configuration's webhook endpoint as it is now (spec 6.2: the target is resolved when the request is made), so a
     * later change or deletion of the endpoint does not redirect this session's result. A missing one sends nothing.
     */
    private async endpointWebhook(ctx: TenantContext, webhookEndpointId: string | null | undefined): Promise<WebhookTarget | undefined> {
        if (!webhookEndpointId) {
            return undefined;
        }
        const endpoint = await this.deps.registry.get(ctx, webhookEndpointKind, webhookEndpointId);
        if (!endpoint) {
            this.deps.log.warn({ tenantId: ctx.tenantId, webhookEndpointId }, 'webhook endpoint of the presentation configuration does not exist; no presentation webhook will be sent');
            return undefined;
        }
        return { url: endpoint.spec.url, auth: endpoint.spec.auth };
    }

    /**
     * OpenID4VP over the Digital Credentials API (Appendix A), signed requests only (`openid4vp-v1-signed`): the
     * request object carries expected_origins and response_mode dc_api.jwt, and has no response_uri or state; the
     * relying party's backend posts the wallet's response with the page's origin to the response endpoint. No
     * request object is fetched, so the session stays active until the response (it skips fetched).
     */
    private async createDcApi(ctx: TenantContext & { tenantId: string }, request: PresentationRequest, prepared: PreparedPresentation): Promise<{ session: string; request: string }> {
        if (!request.expected_origins?.length) {
            throw new ValidationError('expected_origins is required for response_type dc-api', [{ path: 'expected_origins', message: 'required for the Digital Credentials API' }]);
        }
        if (request.redirectUri) {
            throw new ValidationError('redirectUri does not apply to the Digital Credentials API', [{ path: 'redirectUri', message: 'the browser returns the response to the page' }]);
        }
        const walletNonce = Crypto.randomBytes(24).toString('base64url');
        const { redirectUri: _none, ...data } = await this.sessionData(prepared, `${this.deps.publicUrl}/presentations/${walletNonce}/oid4vp`);
        const expectedOrigins = request.expected_origins.map((o) => new URL(o).origin);
        const withOrigins: PresentationData = { ...data, protocol: 'dc-api', expectedOrigins };
        const expiresAt = expiryOf(prepared);
        const session = await this.openSession(ctx, request, prepared, walletNonce, withOrigins, expiresAt);
        const verifierInfo = await this.verifierInfo(ctx.tenantId, prepared.config);
        const { response_uri: _uri, state: _state, ...payload } = this.requestPayload(withOrigins, walletNonce, undefined, verifierInfo);
        // The page holds this request until it calls the API: it is valid as long as its session, not the 300 s of a fetched one.
        const jwt = await this.deps.signing.jws(ctx.tenantId, data.accessKeyChainId, {
            header: { typ: REQUEST_OBJECT_TYP },
            payload: { ...payload, response_mode: 'dc_api.jwt', expected_origins: expectedOrigins, exp: Math.floor(expiresAt.getTime() / 1000) }
        });
        return { session, request: jwt };
    }

    /** The signed request object (JAR); the first fetch moves the session from active to fetched. */
    async requestObject(session: LiveSession<'presentation'>, walletNonceParam?: string): Promise<string> {
        const { data } = session;
        if (session.expiresAt && Date.parse(session.expiresAt) <= Date.now()) {
            throw new OAuthError(400, 'invalid_request', 'The presentation session has expired');
        }
        if (data.protocol) {
            throw new OAuthError(400, 'invalid_request', 'This presentation request is not fetched by request_uri');
        }
        if (!['active', 'fetched'].includes(session.status)) {
            throw new OAuthError(400, 'invalid_request', 'The presentation offer has already been used');
        }
        const config = session.requestId ? (await this.configs.get(session.tenantId, session.requestId))?.spec : undefined;
        const verifierInfo = config ? await this.verifierInfo(session.tenantId, config) : undefined;
        await this.deps.sessions.transition(session.id, ['active'], 'fetched');
        return this.deps.signing.jws(session.tenantId, data.accessKeyChainId, { header: { typ: REQUEST_OBJECT_TYP }, payload: this.requestPayload(data, session.walletNonce!, walletNonceParam, verifierInfo) });
    }

    /** The registration certificate (spec 2.1, plugins/trust): only when the tenant has a registrar configuration. */
    private verifierInfo(tenantId: string, config: PresentationConfig): Promise<Array<{ format: string; data: string }> | undefined> {
        return registrationCertsOf(this.deps.registry)?.verifierInfo(tenantId, config) ?? Promise.resolve(undefined);
    }

    /** The request object's claims (OpenID4VP 1.0 section 5, HAIP): the redirect form; the DC API drops response_uri and state. */
    private requestPayload(data: PresentationData, walletNonce: string, walletNonceParam?: string, verifierInfo?: Array<{ format: string; data: string }>): Record<string, unknown> {
        const now = Math.floor(Date.now() / 1000);
        return {
            iss: data.clientId,
            aud: 'https://self-issued.me/v2',
            client_id: data.clientId,
            response_type: 'vp_token',
            response_mode: 'direct_post.jwt',
            response_uri: data.responseUri,
            nonce: data.nonce,
            state: walletNonce,
            ...(walletNonceParam ? { wallet_nonce: walletNonceParam } : {}),
            dcql_query: data.dcqlQuery,
            ...(data.transactionData ? { transaction_data: data.transactionData } : {}),
            ...(verifierInfo ? { verifier_info: verifierInfo } : {}),
            client_metadata: {
                jwks: { keys: [data.encryptionKey.publicJwk] },
                encrypted_response_enc_values_supported: ['A128GCM', 'A256GCM'],
                vp_formats_supported: {
                    'dc+sd-jwt': { 'sd-jwt_alg_values': ['ES256'], 'kb-jwt_alg_values': ['ES256'] },
                    mso_mdoc: { issuerauth_alg_values: [-7], deviceauth_alg_values: [-7] }
                }
            },
            iat: now,
            exp: now + 300
        };
    }
}
