import Crypto from 'node:crypto';
import { OAuthError } from '../../../lib/errors';
import type { Logger } from '../../../lib/logging';
import type { CredentialConfig, IaeAction } from '../../../resources/credential-config';
import { sha256Hex, type LiveSession, type SessionService } from '../../sessions/services/session-service';
import type { Issuer } from '../issuer';
import { acceptableRedirectUri, invalidRequest, newAuthorizationCode, optionalString, s256Challenge, verifierMatches, type AuthorizationService } from './authorization';
import type { ClientAuthenticator } from './client-authentication';
import { credentialClaimPaths } from './metadata';
import { issuerStateHash, type ClaimSource, type IssuanceData } from './offers';
import type { WalletRequest } from './tokens';

export const AUTH_SESSION_TTL_SECONDS = 600;
export const INTERACTION_TYPES = ['openid4vp_presentation', 'redirect_to_web'] as const;
export type InteractionType = (typeof INTERACTION_TYPES)[number];

const LIMITS = { interactionTypes: 1024, openid4vpResponse: 512 * 1024 };

/** One step of an interactive authorization, as the auth_session keeps it (a web step's url stays in the configuration). */
export interface InteractiveStep {
    type: InteractionType;
    presentationConfigId?: string;
    label?: string;
}

/** An interactive authorization in progress, on the issuance session of the offer it authorizes. */
export interface InteractiveAuthorization {
    clientId: string;
    /** The attested wallet instance (its attestation's cnf key thumbprint): the code is bound to it. */
    instanceJkt?: string;
    codeChallenge: string;
    redirectUri?: string;
    credentialConfigurationIds: string[];
    authorizationDetails: boolean;
    /** auth_session validity (AUTH_SESSION_TTL_SECONDS from the first request). */
    expiresAt: string;
    steps: InteractiveStep[];
    /** Index of the step the wallet is in. */
    step: number;
    /** The presentation session of the current openid4vp_presentation step. */
    presentationSessionId?: string;
    /** The issuer backend called complete-web-auth for the current redirect_to_web step. */
    webCompleted?: boolean;
    /** A presentation failed: the auth_session is over. */
    failed?: boolean;
}

/** The verified claims of one presentation made at the interactive authorization endpoint. */
export interface PresentedCredentials {
    presentationConfigId: string;
    /** The presentation session that verified them. */
    presentationSessionId: string;
    /** Per DCQL credential query: format, and the disclosed claims of each presented credential. */
    credentials: Array<{ id: string; format: string; values: Array<Record<string, unknown>> }>;
}

/**
 * The OpenID4VP verifier as the interactive authorization endpoint uses it; the oid4vp plugin registers it. It
 * makes presentation sessions like POST /api/verifier/offer does and verifies responses like the response endpoint.
 */
export interface PresentationVerifier {
    /** The id of the tenant's most recently created presentation configuration. */
    latestConfiguration(tenantId: string): Promise<string | undefined>;
    /** A presentation session for the configuration, and its signed request object. */
    request(tenantId: string, presentationConfigId: string): Promise<{ sessionId: string; request: string }>;
    /**
     * Verifies an authorization response (the direct_post.jwt form parameters) for the session. Throws an OAuthError
     * for a response that cannot be taken (not decryptable, session used or expired).
     */
    verify(sessionId: string, response: Record<string, unknown>): Promise<{ verified: true; credentials: PresentedCredentials['credentials'] } | { verified: false; reason: string }>;
}

export type InteractiveAnswer =
    | { status: 'require_interaction'; type: 'openid4vp_presentation'; auth_session: string; openid4vp_request: { request: string }; label?: string }
    | { status: 'require_interaction'; type: 'redirect_to_web'; auth_session: string; label?: string }
    | { status: 'ok'; code: string };

/** The auth_session is found by its hash in the codeHash column, prefixed like the other values kept there. */
export const authSessionHash = (authSession: string): string => sha256Hex(`auth_session:${authSession}`);

const AUTH_SESSION = /^[A-Za-z0-9_-]{43}$/;

/** Thrown out of a data change to abandon it. */
class StepTaken extends Error {}

const accessDenied = (description: string) => new OAuthError(400, 'access_denied', description);
const serverError = (description: string) => new OAuthError(400, 'server_error', description);
const unknownSession = () => invalidRequest('auth_session is unknown, expired or already used');

/**
 * The interactive authorization endpoint (OpenID4VCI interactive authorization draft; spec 3.2, 4.5, 7.1). The first
 * request authenticates the client as PAR does, takes PKCE S256 and the issuer_state of a redeemable authorization
 * code offer, and moves the offer's codeHash to the new auth_session (so the offer is authorized once, here or at the
 * authorization endpoint). The steps are the credential configuration's iaeActions in order. Each step is advanced
 * by one conditional write of the session data, so of concurrent replies to a step exactly one proceeds. The last
 * step's write issues the authorization code through the authorization endpoint's code machinery.
 */
export class InteractiveAuthorizationService {
    constructor(private readonly deps: {
        issuer: Issuer;
        sessions: SessionService;
        authorization: AuthorizationService;
        clients: ClientAuthenticator;
        presentations: () => PresentationVerifier | undefined;
        log: Logger;
    }) {}

    async handle(request: WalletRequest, body: Record<string, unknown>): Promise<InteractiveAnswer> {
        if (body.auth_session !== undefined) {
            return this.reply(request.tenantId, body);
        }
        // In a JSON body authorization_details may be the array itself rather than its JSON form (as in a form).
        const details = body.authorization_details;
        return this.start(request, Array.isArray(details) ? { ...body, authorization_details: JSON.stringify(details) } : body);
    }

    private async start(request: WalletRequest, body: Record<string, unknown>): Promise<InteractiveAnswer> {
        const { tenantId } = request;
        for (const name of ['request_uri', 'request', 'openid4vp_response', 'code_verifier']) {
            if (body[name] !== undefined) {
                throw invalidRequest(`${name} is not accepted in the first interactive authorization request`);
            }
        }
        const client = await this.deps.clients.authenticate({ tenantId, headers: request.headers ?? {}, body });
        const supported = this.interactionTypes(body);
        const codeChallenge = s256Challenge(body);
        const redirectUri = optionalString(body, 'redirect_uri', 2048);
        if (redirectUri !== undefined && !acceptableRedirectUri(redirectUri)) {
            throw invalidRequest('redirect_uri must be an absolute https URI, a loopback http URI or a private-use scheme URI, without fragment');
        }
        const issuerState = optionalString(body, 'issuer_state', 256);
        const offer = issuerState === undefined ? undefined : await this.deps.authorization.redeemableOffer(tenantId, issuerState);
        if (!offer) {
            throw invalidRequest('issuer_state must belong to a redeemable authorization code offer');
        }
        const { ids, via } = await this.deps.authorization.requestedCredentials(tenantId, body);
        if (!ids.every((id) => offer.credentialConfigurationIds!.includes(id))) {
            throw new OAuthError(400, via === 'scope' ? 'invalid_scope' : 'invalid_authorization_details', 'The request names credentials the offer does not include');
        }
        // The actions of the configuration named first (spec 3.2).
        const first = await this.deps.issuer.credentialConfig(tenantId, ids[0]!);
        const steps = await this.steps(tenantId, first!, supported);

        const authSession = Crypto.randomBytes(32).toString('base64url');
        const interactive: InteractiveAuthorization = {
            clientId: client.clientId,
            ...(client.instanceJkt !== undefined ? { instanceJkt: client.instanceJkt } : {}),
            codeChallenge,
            ...(redirectUri !== undefined ? { redirectUri } : {}),
            credentialConfigurationIds: ids,
            authorizationDetails: via === 'authorization_details',
            expiresAt: new Date(Date.now() + AUTH_SESSION_TTL_SECONDS * 1000).toISOString(),
            steps,
            step: 0
        };
        let claimed;
        try {
            claimed = await this.deps.sessions.mutateData<'issuance'>(offer, (data) => {
                if (data.authorization || data.interactive) {
                    throw new StepTaken();
                }
                return { ...data, interactive };
            }, { codeHash: authSessionHash(authSession) }, { status: ['active'], isNull: ['codeUsedAt'] });
        }
        catch (err) {
            if (!(err instanceof StepTaken)) {
                throw err;
            }
        }
        if (!claimed) {
            throw invalidRequest('issuer_state must belong to a redeemable authorization code offer');
        }
        try {
            return await this.enter(offer.id, authSession, tenantId, claimed);
        }
        catch (err) {
            // The first step could not be entered (no presentation request): the offer is given back, so the wallet can
            // start again once the issuer's configuration is fixed.
            await this.deps.sessions.mutateData<'issuance'>(offer.id, (data) => {
                if (data.interactive?.step !== 0 || data.interactive.presentationSessionId) {
                    throw new StepTaken();
                }
                const { interactive: _abandoned, ...rest } = data;
                return rest;
            }, { codeHash: issuerStateHash(issuerState!) }, { status: ['active'], isNull: ['codeUsedAt'] }).catch((revertErr: unknown) => {
                if (!(revertErr instanceof StepTaken)) {
                    throw revertErr;
                }
            });
            throw err;
        }
    }

    /** interaction_types_supported: a comma-separated list (the draft's form); an array of strings is taken too. */
    private interactionTypes(body: Record<string, unknown>): Set<InteractionType> {
        const value = body.interaction_types_supported;
        const list = typeof value === 'string' && value.length <= LIMITS.interactionTypes ? value.split(',').map((v) => v.trim())
            : Array.isArray(value) && value.length <= 20 && value.every((v) => typeof v === 'string' && v.length <= 255) ? value as string[]
                : undefined;
        if (!list?.some(Boolean)) {
            throw invalidRequest('interaction_types_supported is required: the interaction types the wallet supports, comma-separated');
        }
        return new Set(list.filter((v): v is InteractionType => (INTERACTION_TYPES as readonly string[]).includes(v)));
    }

    /**
     * The configuration's iaeActions, each of a type the wallet supports; without actions one step chosen from what
     * the wallet supports: a presentation with the tenant's most recent presentation configuration, else a web step.
     */
    private async steps(tenantId: string, credential: CredentialConfig, supported: Set<InteractionType>): Promise<InteractiveStep[]> {
        const actions: IaeAction[] = credential.iaeActions ?? [];
        if (actions.length) {
            const unsupported = actions.find((a) => !supported.has(a.type));
            if (unsupported) {
                throw invalidRequest(`Credential configuration ${credential.id} needs the interaction type ${unsupported.type}, which interaction_types_supported does not include`);
            }
            return actions.map((a) => ({
                type: a.type,
                ...(a.type === 'openid4vp_presentation' ? { presentationConfigId: a.presentationConfigId } : {}),
                ...(a.label ? { label: a.label } : {})
            }));
        }
        if (supported.has('openid4vp_presentation')) {
            const latest = await this.deps.presentations()?.latestConfiguration(tenantId);
            if (latest) {
                return [{ type: 'openid4vp_presentation', presentationConfigId: latest }];
            }
            if (!supported.has('redirect_to_web')) {
                throw serverError('No presentation configuration is available for an openid4vp_presentation step');
            }
        }
        if (supported.has('redirect_to_web')) {
            return [{ type: 'redirect_to_web' }];
        }
        throw invalidRequest(`interaction_types_supported names none of the supported types (${INTERACTION_TYPES.join(', ')})`);
    }

    /** The answer for the current step; a presentation step gets its presentation session here. */
    private async enter(sessionId: string, authSession: string, tenantId: string, data: IssuanceData): Promise<InteractiveAnswer> {
        const interactive = data.interactive!;
        const step = interactive.steps[interactive.step]!;
        const label = step.label ? { label: step.label } : {};
        if (step.type === 'redirect_to_web') {
            return { status: 'require_interaction', type: 'redirect_to_web', auth_session: authSession, ...label };
        }
        const verifier = this.deps.presentations();
        if (!verifier) {
            throw serverError('Presentations are not available in this deployment');
        }
        let created;
        try {
            created = await verifier.request(tenantId, step.presentationConfigId!);
        }
        catch (err) {
            this.deps.log.warn({ err: (err as Error).message, presentationConfigId: step.presentationConfigId }, 'interactive authorization: the presentation request could not be created');
            throw serverError('The presentation request could not be created');
        }
        const index = interactive.step;
        const stored = await this.deps.sessions.mutateData<'issuance'>(sessionId, (current) => {
            if (current.interactive?.step !== index || current.interactive.presentationSessionId) {
                throw new StepTaken();
            }
            return { ...current, interactive: { ...current.interactive, presentationSessionId: created.sessionId } };
        }, {}, { status: ['active'], isNull: ['codeUsedAt'] }).catch((err: unknown) => {
            if (err instanceof StepTaken) {
                return undefined;
            }
            throw err;
        });
        if (!stored) {
            throw unknownSession();
        }
        return { status: 'require_interaction', type: 'openid4vp_presentation', auth_session: authSession, openid4vp_request: { request: created.request }, ...label };
    }

    /** The session of an auth_session while it may go on. */
    private async activeSession(tenantId: string, authSession: unknown): Promise<LiveSession<'issuance'> & { data: { interactive: InteractiveAuthorization } } | undefined> {
        if (typeof authSession !== 'string' || !AUTH_SESSION.test(authSession)) {
            return undefined;
        }
        const session = await this.deps.sessions.findBy('issuance', tenantId, 'codeHash', authSessionHash(authSession));
        const interactive = session?.data.interactive;
        // The offer's own expiry still applies: it is not redeemed until the code is.
        const now = Date.now();
        if (!session || !interactive || interactive.failed || session.status !== 'active' || session.codeUsedAt
            || Date.parse(interactive.expiresAt) <= now || (session.expiresAt && Date.parse(session.expiresAt) <= now)) {
            return undefined;
        }
        return session as LiveSession<'issuance'> & { data: { interactive: InteractiveAuthorization } };
    }

    private async reply(tenantId: string, body: Record<string, unknown>): Promise<InteractiveAnswer> {
        const authSession = body.auth_session as string;
        const session = await this.activeSession(tenantId, authSession);
        if (!session) {
            throw unknownSession();
        }
        const { interactive } = session.data;
        const index = interactive.step;
        const step = interactive.steps[index]!;
        const verifierSent = body.code_verifier !== undefined;
        if (verifierSent && !verifierMatches(body.code_verifier, interactive.codeChallenge)) {
            throw new OAuthError(400, 'invalid_grant', 'code_verifier does not match the code_challenge');
        }
        if (step.type === 'redirect_to_web') {
            if (body.openid4vp_response !== undefined || !verifierSent) {
                throw invalidRequest('The current step is redirect_to_web: send auth_session and code_verifier once the web step is done');
            }
            if (!interactive.webCompleted) {
                throw accessDenied('The web step has not been completed');
            }
            return this.advance(session, authSession, index, (current) => current.webCompleted === true);
        }
        if (typeof body.openid4vp_response !== 'string') {
            throw invalidRequest('The current step is openid4vp_presentation: send auth_session and openid4vp_response');
        }
        const response = this.openid4vpResponse(body.openid4vp_response);
        const verifier = this.deps.presentations();
        if (!verifier || !interactive.presentationSessionId) {
            throw unknownSession();
        }
        const presentationSessionId = interactive.presentationSessionId;
        let result;
        try {
            result = await verifier.verify(presentationSessionId, response);
        }
        catch (err) {
            if (err instanceof OAuthError) {
                throw invalidRequest(`openid4vp_response was not accepted: ${err.message}`);
            }
            throw err;
        }
        if (!result.verified) {
            await this.deps.sessions.mutateData<'issuance'>(session, (current) => current.interactive?.presentationSessionId === presentationSessionId
                ? { ...current, interactive: { ...current.interactive, failed: true } }
                : current);
            throw accessDenied(`The presentation could not be verified: ${result.reason}`);
        }
        const presented: PresentedCredentials = { presentationConfigId: step.presentationConfigId!, presentationSessionId, credentials: result.credentials };
        return this.advance(session, authSession, index, (current) => current.presentationSessionId === presentationSessionId, presented);
    }

    /** openid4vp_response: the authorization response parameters (direct_post.jwt: `response`, the JWE) as a JSON string. */
    private openid4vpResponse(value: string): Record<string, unknown> {
        let parsed: unknown;
        try {
            parsed = value.length <= LIMITS.openid4vpResponse ? JSON.parse(value) : undefined;
        }
        catch {
            parsed = undefined;
        }
        if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
            throw invalidRequest('openid4vp_response must be the OpenID4VP authorization response as a JSON object string');
        }
        const response = parsed as Record<string, unknown>;
        if (typeof response.response !== 'string' && typeof response.error !== 'string') {
            throw invalidRequest('openid4vp_response must be an encrypted OpenID4VP response (direct_post.jwt: {"response": "<JWE>"})');
        }
        return response;
    }

    /**
     * Completes step `index` in one conditional write (the step must still be current and `done` hold), then enters
     * the next step, or on the last step issues the authorization code in the same write.
     */
    private async advance(session: LiveSession<'issuance'>, authSession: string, index: number, done: (current: InteractiveAuthorization) => boolean, presented?: PresentedCredentials): Promise<InteractiveAnswer> {
        const interactive = session.data.interactive!;
        const last = index === interactive.steps.length - 1;
        const issued = last
            ? newAuthorizationCode({
                clientId: interactive.clientId,
                ...(interactive.redirectUri !== undefined ? { redirectUri: interactive.redirectUri } : {}),
                codeChallenge: interactive.codeChallenge,
                credentialConfigurationIds: interactive.credentialConfigurationIds,
                authorizationDetails: interactive.authorizationDetails,
                ...(interactive.instanceJkt !== undefined ? { instanceJkt: interactive.instanceJkt } : {})
            })
            : undefined;
        const credentials = presented ? await this.presentedClaims(session.tenantId, interactive.credentialConfigurationIds, session.data.claims, presented) : {};
        let written;
        try {
            written = await this.deps.sessions.mutateData<'issuance'>(session, (current) => {
                const now = current.interactive;
                if (!now || now.failed || now.step !== index || !done(now)) {
                    throw new StepTaken();
                }
                const withClaims: IssuanceData = presented
                    ? { ...current, presented: [...current.presented ?? [], presented], claims: mergeClaims(current.claims, credentials) }
                    : current;
                if (issued) {
                    const { interactive: _finished, ...rest } = withClaims;
                    return { ...rest, authorization: issued.authorization };
                }
                const { presentationSessionId: _p, webCompleted: _w, ...next } = now;
                return { ...withClaims, interactive: { ...next, step: index + 1 } };
            }, issued ? { codeHash: issued.codeHash } : {}, { status: ['active'], isNull: ['codeUsedAt'] });
        }
        catch (err) {
            if (!(err instanceof StepTaken)) {
                throw err;
            }
        }
        if (!written) {
            throw unknownSession();
        }
        return issued ? { status: 'ok', code: issued.code } : this.enter(session.id, authSession, session.tenantId, written);
    }

    /**
     * What a presentation gives each authorized configuration: the disclosed claims whose names are claims of the
     * configuration (dc+sd-jwt: top-level claim names; mso_mdoc: namespace and element), from presented credentials
     * of the same format. The offer's own claims take precedence (see mergeClaims).
     */
    private async presentedClaims(tenantId: string, ids: string[], sources: Record<string, ClaimSource>, presented: PresentedCredentials): Promise<Record<string, Record<string, unknown>>> {
        const result: Record<string, Record<string, unknown>> = {};
        for (const id of ids) {
            const credential = await this.deps.issuer.credentialConfig(tenantId, id);
            // An attribute provider stays the source: it is sent the presented claims and answers the credential's.
            if (!credential || (sources[id] ?? (credential.attributeProviderId ? { type: 'attributeProvider' } : undefined))?.type === 'attributeProvider') {
                continue;
            }
            const mdoc = credential.config.format === 'mso_mdoc';
            const picked: Record<string, unknown> = {};
            for (const path of credentialClaimPaths(credential)) {
                const [head, element] = path;
                if (typeof head !== 'string' || (mdoc && typeof element !== 'string')) {
                    continue;
                }
                for (const values of presented.credentials.filter((c) => c.format === credential.config.format).flatMap((c) => c.values)) {
                    if (mdoc) {
                        const namespace = values[head];
                        const value = namespace && typeof namespace === 'object' ? (namespace as Record<string, unknown>)[element as string] : undefined;
                        if (value !== undefined) {
                            picked[head] = { ...picked[head] as Record<string, unknown> | undefined, [element as string]: value };
                        }
                    }
                    else if (values[head] !== undefined && picked[head] === undefined) {
                        picked[head] = values[head];
                    }
                }
            }
            if (Object.keys(picked).length) {
                result[id] = picked;
            }
        }
        return result;
    }

    /** complete-web-auth: the issuer backend marks the current web step of an auth_session done. */
    async completeWebStep(tenantId: string, authSession: string): Promise<boolean> {
        const session = await this.activeSession(tenantId, authSession);
        const index = session?.data.interactive.step;
        if (!session || session.data.interactive.steps[index!]!.type !== 'redirect_to_web' || session.data.interactive.webCompleted) {
            return false;
        }
        try {
            return !!await this.deps.sessions.mutateData<'issuance'>(session, (current) => {
                const now = current.interactive;
                if (!now || now.step !== index || now.webCompleted) {
                    throw new StepTaken();
                }
                return { ...current, interactive: { ...now, webCompleted: true } };
            }, {}, { status: ['active'], isNull: ['codeUsedAt'] });
        }
        catch (err) {
            if (err instanceof StepTaken) {
                return false;
            }
            throw err;
        }
    }
}

/**
 * The offer's claim sources with the presented claims beneath: inline claims (or none) become inline claims over
 * the presented ones, so the offer's values win; an attribute provider stays the source (it is sent the presented
 * claims with its request).
 */
const mergeClaims = (claims: Record<string, ClaimSource>, presented: Record<string, Record<string, unknown>>): Record<string, ClaimSource> => {
    const merged = { ...claims };
    for (const [id, values] of Object.entries(presented)) {
        const source = merged[id];
        merged[id] = { type: 'inline', claims: deepMerge(values, source?.type === 'inline' ? source.claims : {}) };
    }
    return merged;
};

const isObject = (value: unknown): value is Record<string, unknown> => !!value && typeof value === 'object' && !Array.isArray(value);

/** `over` on top of `base`, objects merged key by key. */
const deepMerge = (base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> => {
    const result: Record<string, unknown> = { ...base };
    for (const [key, value] of Object.entries(over)) {
        result[key] = isObject(value) && isObject(result[key]) ? deepMerge(result[key], value) : value;
    }
    return result;
};
