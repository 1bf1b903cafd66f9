import Crypto from 'node:crypto';
import Joi from 'joi';
import type { Logger } from '../../../lib/logging';
import type { Registry } from '../../../lib/registry/registry';
import type { WebhookTarget } from '../../../lib/webhooks';
import { webhookEndpointKind } from '../../../resources/webhook-endpoint';
import { ValidationError } from '../../../lib/errors';
import type { TenantContext } from '../../../lib/registry/kind';
import { sha256Hex, type SessionService } from '../../sessions/services/session-service';
import { tenantUrl, type Issuer } from '../issuer';
import type { InteractiveAuthorization, PresentedCredentials } from './interactive';

export const PRE_AUTHORIZED_GRANT = 'urn:ietf:params:oauth:grant-type:pre-authorized_code';
export const AUTHORIZATION_CODE_GRANT = 'authorization_code';

/**
 * The codeHash column holds the hash of the value that redeems a session: the pre-authorized code, or for an
 * authorization code offer first its issuer_state, then (once authorized) the authorization code. Each kind is
 * hashed with its own prefix, so a value of one kind never finds a session through another kind's lookup.
 */
export const issuerStateHash = (issuerState: string): string => sha256Hex(`issuer_state:${issuerState}`);
export const authorizationCodeHash = (code: string): string => sha256Hex(`authorization_code:${code}`);

export type ClaimSource = { type: 'inline'; claims: Record<string, unknown> } | { type: 'attributeProvider'; attributeProviderId: string };

export interface OfferRequest {
    flow: 'pre_authorized_code' | 'authorization_code';
    credentialConfigurationIds: string[];
    credentialClaims?: Record<string, ClaimSource>;
    tx_code?: string | true;
    tx_code_description?: string;
    webhookEndpointId?: string;
    reference?: string;
    /** The caller's pseudonymous id of the holder (activeCredentials); only its keyed hash is kept. */
    subject?: string;
    offerLifetimeSeconds?: number;
    byReference: boolean;
    response_type?: 'uri';
}

export const offerRequestSchema = Joi.object<OfferRequest, true>({
    flow: Joi.string().valid('pre_authorized_code', 'authorization_code').default('pre_authorized_code'),
    credentialConfigurationIds: Joi.array().items(Joi.string().max(128)).min(1).unique().required(),
    credentialClaims: Joi.object().pattern(Joi.string(), Joi.alternatives().conditional('.type', {
        switch: [
            { is: 'inline', then: Joi.object({ type: Joi.string().valid('inline').required(), claims: Joi.object().unknown(true).required() }) },
            { is: 'attributeProvider', then: Joi.object({ type: Joi.string().valid('attributeProvider').required(), attributeProviderId: Joi.string().required() }) }
        ],
        otherwise: Joi.object({ type: Joi.string().valid('inline', 'attributeProvider').required() }).unknown(true)
    })).description([
        'Where the claims of each offered credential configuration come from, keyed by its id. Two forms:',
        '{"type": "inline", "claims": {...}}: the claim values themselves (for mso_mdoc grouped by namespace);',
        '{"type": "attributeProvider", "attributeProviderId": "..."}: fetched from that attribute provider when the wallet requests the credential.',
        'A configuration without an entry uses its own attributeProviderId, else only its field defaults.',
        'Every mandatory field needs a value, or the credential request is refused with credential_request_denied.'
    ].join(' ')).example({
        pid: { type: 'inline', claims: { given_name: 'Erika', family_name: 'Mustermann', birthdate: '1964-08-12' } },
        mdl: { type: 'attributeProvider', attributeProviderId: 'dmv-register' }
    }),
    tx_code: Joi.alternatives(Joi.string().pattern(/^[0-9]{4,12}$/, 'digits'), Joi.boolean().valid(true))
        .description('A transaction code of 4 to 12 digits, or true to have one generated and returned'),
    tx_code_description: Joi.string().max(300),
    webhookEndpointId: Joi.string().max(128),
    reference: Joi.string().max(255),
    subject: Joi.string().min(1).max(255)
        .description('The caller\'s own pseudonymous id of the holder; required when an offered configuration has activeCredentials. Only its keyed hash is stored'),
    offerLifetimeSeconds: Joi.number().integer().min(1),
    byReference: Joi.boolean().default(true),
    response_type: Joi.string().valid('uri')
}).label('CredentialOfferRequest');

export interface IssuanceData {
    offer: Record<string, unknown>;
    claims: Record<string, ClaimSource>;
    txCodeHash?: string;
    /** The offer's webhook endpoint as it was when the offer was made (spec 6.2: resolved at creation). */
    webhook?: WebhookTarget;
    dpopJkt?: string;
    /** HMAC of the offer's subject (subjectHash()); the subject itself is never stored. */
    subjectHash?: string;
    /** Absent for pre-authorized offers (sessions stored before this field existed are pre-authorized too). */
    flow?: 'authorization_code';
    /** Set when the wallet was authorized for an authorization code offer (its code, PKCE and client binding). */
    authorization?: AuthorizationGrant;
    /** An interactive authorization in progress (its auth_session's hash is then the codeHash). */
    interactive?: InteractiveAuthorization;
    /** The verified claims of presentations made at the interactive authorization endpoint. */
    presented?: PresentedCredentials[];
    /** The refresh token family of an authorization code session (refreshTokenEnabled). */
    refresh?: RefreshFamily;
    issued: Array<{ credentialConfigurationId: string; notificationId: string; at: string }>;
    events: Array<{ notificationId: string; event: string; description?: string; at: string }>;
}

export interface AuthorizationGrant {
    clientId: string;
    /** Absent when the interactive authorization endpoint issued the code to a request without redirect_uri. */
    redirectUri?: string;
    /** PKCE S256 challenge of the pushed request. */
    codeChallenge: string;
    /** The DPoP key the code is bound to (a DPoP proof or dpop_jkt at PAR, RFC 9449 section 10). */
    dpopJkt?: string;
    /** The attested wallet instance's key (thumbprint) that pushed the request: only it redeems the code. */
    instanceJkt?: string;
    credentialConfigurationIds: string[];
    /**
     * The wallet named the credentials by authorization_details: the token response then lists them with their
     * credential identifiers (OpenID4VCI 6.2), each the configuration id, as this issuer has one dataset per configuration.
     */
    authorizationDetails: boolean;
    codeExpiresAt: string;
}

export interface RefreshFamily {
    /** Hash of the one refresh token that may be used next. */
    hash: string;
    /** Hashes of refresh tokens already used (the most recent ones): presenting one again revokes the family. */
    used: string[];
    clientId: string;
    /** The DPoP key every refresh must be signed with (the key of the first token), when the tokens are DPoP-bound. */
    jkt?: string;
    /**
     * The wallet instance key (attestation cnf.jwk thumbprint) of an attested client: every refresh must be
     * authenticated by an attestation of that same key (attestation-based client authentication, refresh token binding).
     */
    instanceJkt?: string;
    revokedAt?: string;
}

declare module '../../sessions/services/session-service' {
    interface SessionDataTypes {
        issuance: IssuanceData;
    }
}

const GENERATED_TX_CODE_LENGTH = 6;

/** The subject's keyed hash, per tenant (the same subject in two tenants is not linkable by its hash). */
export const subjectHash = (key: Buffer, tenantId: string, subject: string): string =>
    Crypto.createHmac('sha256', key).update(`${tenantId}\n${subject}`, 'utf8').digest('hex');

export class OfferService {
    constructor(private readonly deps: {
        publicUrl: string; sessionTtl: number; issuer: Issuer; sessions: SessionService; registry: Registry; log: Logger;
        /** Keys subjectHash(); derived from the service secret. */
        subjectKey: Buffer;
    }) {}

    async create(ctx: TenantContext & { tenantId: string }, request: OfferRequest): Promise<{ session: string; uri: string; tx_code?: string }> {
        const { publicUrl, issuer, sessions } = this.deps;
        const authorizationCode = request.flow === 'authorization_code';
        for (const id of request.credentialConfigurationIds) {
            const credential = await issuer.credentialConfig(ctx.tenantId, id);
            if (!credential) {
                throw new ValidationError(`Unknown credential configuration ${id}`, [{ path: 'credentialConfigurationIds', message: `${id} does not exist` }]);
            }
            if (credential.activeCredentials?.enabled && request.subject === undefined) {
                throw new ValidationError(`Credential configuration ${id} keeps one active credential per subject: the offer needs a subject`, [{ path: 'subject', message: `is required for ${id} (activeCredentials)` }]);
            }
            // HAIP: every configuration offered for the authorization code flow has a scope the wallet may request.
            if (authorizationCode && !credential.config.scope) {
                throw new ValidationError(`Credential configuration ${id} has no scope`, [{ path: 'credentialConfigurationIds', message: `${id} needs config.scope to be offered with the authorization_code flow` }]);
            }
        }
        if (authorizationCode && request.tx_code !== undefined) {
            throw new ValidationError('tx_code belongs to the pre-authorized code flow', [{ path: 'tx_code', message: 'is not allowed with flow authorization_code' }]);
        }
        for (const id of Object.keys(request.credentialClaims ?? {})) {
            if (!request.credentialConfigurationIds.includes(id)) {
                throw new ValidationError(`credentialClaims names ${id}, which is not offered`, [{ path: `credentialClaims.${id}`, message: 'is not in credentialConfigurationIds' }]);
            }
        }
        const settings = await issuer.settings(ctx.tenantId);
        const webhook = request.webhookEndpointId ? await this.webhook(ctx, request.webhookEndpointId) : undefined;
        const code = Crypto.randomBytes(32).toString('base64url');
        const txCode = request.tx_code === true
            ? Crypto.randomInt(0, 10 ** GENERATED_TX_CODE_LENGTH).toString().padStart(GENERATED_TX_CODE_LENGTH, '0')
            : request.tx_code;
        const offerId = Crypto.randomBytes(24).toString('base64url');
        const baseUrl = tenantUrl(publicUrl, ctx.tenantId);
        const offer = {
            credential_issuer: baseUrl,
            credential_configuration_ids: request.credentialConfigurationIds,
            grants: authorizationCode
                ? { [AUTHORIZATION_CODE_GRANT]: { issuer_state: code } }
                : {
                    [PRE_AUTHORIZED_GRANT]: {
                        'pre-authorized_code': code,
                        ...(txCode ? { tx_code: { input_mode: 'numeric', length: txCode.length, ...(request.tx_code_description ? { description: request.tx_code_description } : {}) } } : {})
                    }
                }
        };
        const lifetime = request.offerLifetimeSeconds ?? settings.offerLifetimeSeconds;
        const retention = await this.retentionSeconds(ctx.tenantId);
        const expiresAt = lifetime ? new Date(Date.now() + Math.min(lifetime, retention) * 1000).toISOString() : null;
        const data: IssuanceData = {
            offer,
            claims: request.credentialClaims ?? {},
            ...(authorizationCode ? { flow: 'authorization_code' as const } : {}),
            ...(txCode ? { txCodeHash: sha256Hex(txCode) } : {}),
            ...(webhook ? { webhook } : {}),
            ...(request.subject !== undefined ? { subjectHash: subjectHash(this.deps.subjectKey, ctx.tenantId, request.subject) } : {}),
            issued: [],
            events: []
        };
        const session = await sessions.create({
            tenantId: ctx.tenantId,
            type: 'issuance',
            credentialConfigurationIds: request.credentialConfigurationIds,
            reference: request.reference ?? null,
            offerId: request.byReference ? offerId : null,
            codeHash: authorizationCode ? issuerStateHash(code) : sha256Hex(code),
            expiresAt,
            data
        });
        const uri = request.byReference
            ? `openid-credential-offer://?credential_offer_uri=${encodeURIComponent(`${baseUrl}/vci/credential-offers/${offerId}`)}`
            : `openid-credential-offer://?credential_offer=${encodeURIComponent(JSON.stringify(offer))}`;
        return { session: session.id, uri, ...(request.tx_code === true ? { tx_code: txCode as string } : {}) };
    }

    private async webhook(ctx: TenantContext, id: string): Promise<WebhookTarget | undefined> {
        const endpoint = await this.deps.registry.get(ctx, webhookEndpointKind, id);
        if (!endpoint) {
            this.deps.log.warn({ webhookEndpointId: id }, 'webhook endpoint of the offer does not exist; no notification webhook will be sent');
            return undefined;
        }
        return { url: endpoint.spec.url, auth: endpoint.spec.auth };
    }

    /** Session retention of the tenant (ttlSeconds, else the sessions plugin's default): no offer or code outlives it. */
    async retentionSeconds(tenantId: string): Promise<number> {
        const tenant = await this.deps.issuer.tenant(tenantId);
        return tenant?.sessionConfig?.ttlSeconds ?? this.deps.sessionTtl;
    }
}
