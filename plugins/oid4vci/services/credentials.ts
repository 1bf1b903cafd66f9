import Crypto from 'node:crypto';
import * as Jose from 'jose';
import { DomainError, OAuthError } from '../../../lib/errors';
import type { Logger } from '../../../lib/logging';
import { outboundRequest, type OutboundPolicy } from '../../../lib/outbound';
import type { Registry } from '../../../lib/registry/registry';
import type { LiveSession, SessionService } from '../../sessions/services/session-service';
import type { SessionLogger } from '../../sessions/session-log';
import { attributeProviderKind } from '../../../resources/attribute-provider';
import { statusManaged, type ClaimField, type CredentialConfig } from '../../../resources/credential-config';
import type { SigningService } from '../../kms/services/signing';
import { completeClaims, flattenFields, type Path } from '../formats/claims';
import { checkClaims as enforceClaimRules } from '../formats/constraints';
import { issueMdoc } from '../formats/mdoc';
import { issueSdJwtVc, typeMetadataDocument } from '../formats/sd-jwt';
import { systemContext, tenantUrl, type Issuer } from '../issuer';
import { deferredInterval, IssuanceDeferred, newTransactionId, type DeferredService, type IssuedCredentials } from './deferred';
import { responseEncryptionOf } from './encryption';
import type { ClaimSource } from './offers';
import type { ProofRequest, ProofVerifier } from './proofs';

const credentialError = (error: string, description: string) => new OAuthError(400, error, description);

export interface CredentialRequest extends ProofRequest {
    credential_configuration_id?: string;
    credential_identifier?: string;
    credential_response_encryption?: unknown;
}

/** A credential's entry in a token status list, as the credential carries it (SD-JWT VC `status`, mdoc MSO `status`). */
export interface CredentialStatus {
    status_list: { idx: number; uri: string };
}

export interface StatusAllocationRequest {
    tenantId: string;
    credential: CredentialConfig;
    /** The issuance session the credentials are issued in. */
    sessionId: string;
    /** Keyed hash of the offer's subject (activeCredentials); the subject itself never leaves the offer request. */
    subjectHash?: string;
    /** One entry per credential: every credential of a batch has its own index. */
    count: number;
}

export interface StatusAllocation {
    listId: string;
    idx: number;
    status: CredentialStatus;
}

/**
 * Gives issued credentials their status entries. oid4vci only declares it; the status plugin registers one with
 * `server.registerCredentialStatusProvider`. Without one, configurations that turn status management on are refused.
 */
export interface CredentialStatusProvider {
    /** `count` fresh entries (value 0) for credentials of the configuration, before they are signed. */
    allocate(request: StatusAllocationRequest): Promise<StatusAllocation[]>;
    /**
     * activeCredentials: once new credentials are issued to a subject, its earlier ones of the configuration are
     * revoked (`issued` are the new ones, kept). Answers how many entries changed.
     */
    supersede(request: { tenantId: string; credentialConfigurationId: string; subjectHash: string; issued: StatusAllocation[] }): Promise<number>;
}

/** The credential endpoint: proofs, claims, formats, and the session's move from active to fetched. */
export class CredentialService {
    constructor(private readonly deps: {
        publicUrl: string;
        outbound: OutboundPolicy;
        issuer: Issuer;
        sessions: SessionService;
        signing: SigningService;
        registry: Registry;
        log: Logger;
        proofs: ProofVerifier;
        /** The registered status provider, if any (it registers after this service is made). */
        statusProvider: () => CredentialStatusProvider | undefined;
        deferred: DeferredService;
    }) {}

    async nonce(tenantId: string): Promise<string> {
        return this.deps.proofs.nonce(tenantId);
    }

    /** The credentials, or (HTTP 202) the transaction of a request the attribute provider deferred. */
    async issue(session: LiveSession<'issuance'>, body: CredentialRequest, log: SessionLogger): Promise<IssuedCredentials | { transaction_id: string; interval: number }> {
        const { issuer } = this.deps;
        const tenantId = session.tenantId;
        if (['completed', 'failed', 'expired'].includes(session.status)) {
            throw credentialError('invalid_credential_request', `The issuance session is ${session.status}`);
        }
        // Checked before anything is consumed or issued; the route encrypts the answer (encryptCredentialResponse).
        responseEncryptionOf(body);
        if (body.credential_identifier !== undefined) {
            throw credentialError('unknown_credential_identifier', 'This issuer issues no credential identifiers; use credential_configuration_id');
        }
        const configId = body.credential_configuration_id;
        if (typeof configId !== 'string' || !configId) {
            throw credentialError('invalid_credential_request', 'credential_configuration_id is required');
        }
        const credential = (session.credentialConfigurationIds ?? []).includes(configId) ? await issuer.credentialConfig(tenantId, configId) : undefined;
        if (!credential) {
            throw credentialError('unknown_credential_configuration', `Credential configuration ${configId} was not offered in this session`);
        }
        const settings = await issuer.settings(tenantId);
        const holderKeys = credential.keyBinding === false ? [undefined] : await this.deps.proofs.holderKeys(tenantId, tenantUrl(this.deps.publicUrl, tenantId), body, { ...credential.config, batchSize: settings.batchSize });

        let claims: Record<string, unknown>;
        try {
            claims = await this.claims(session, credential);
        }
        catch (err) {
            if (err instanceof IssuanceDeferred) {
                return this.deps.deferred.defer(session, credential, holderKeys, err, log);
            }
            throw err;
        }
        return this.sign(session, credential, holderKeys, claims, log);
    }

    /** Signs one credential per holder key (with status entries allocated now) and records the issuance on the session. */
    async sign(session: LiveSession<'issuance'>, credential: CredentialConfig, holderKeys: Array<Jose.JWK | undefined>, claims: Record<string, unknown>, log: SessionLogger): Promise<IssuedCredentials> {
        const { issuer } = this.deps;
        const { tenantId } = session;
        const configId = credential.id;
        const keyChainId = await issuer.signingKeyChain(tenantId, credential);
        const statusProvider = statusManaged(credential) ? this.deps.statusProvider() : undefined;
        if (statusManaged(credential) && !statusProvider) {
            // Stored while the status plugin was loaded: a credential without its status entry could never be revoked.
            throw credentialError('credential_request_denied', 'This credential needs token status lists, which this deployment does not provide');
        }
        // Allocated before signing: an index whose credential then fails to sign stays taken (valid, never reused).
        const statuses = await statusProvider?.allocate({ tenantId, credential, sessionId: session.id, subjectHash: session.data.subjectHash, count: holderKeys.length });
        const credentials: Array<{ credential: string }> = [];
        for (const [i, holderJwk] of holderKeys.entries()) {
            credentials.push({ credential: await this.format(tenantId, credential, keyChainId, claims, holderJwk, statuses?.[i]?.status) });
        }
        // Before the credentials are handed out: should it fail, the subject keeps its earlier credential and gets none.
        const subjectHash = session.data.subjectHash;
        if (statusProvider && statuses && credential.activeCredentials?.enabled && subjectHash) {
            const revoked = await statusProvider.supersede({ tenantId, credentialConfigurationId: configId, subjectHash, issued: statuses });
            log.info({ event: 'credentials_superseded', credentialConfigurationId: configId, count: revoked }, 'earlier credentials of the subject revoked');
        }

        const notificationId = Crypto.randomBytes(16).toString('base64url');
        // Appended without losing a concurrent request's id; a first issuance also moves active to fetched.
        const entry = { credentialConfigurationId: configId, notificationId, at: new Date().toISOString() };
        await this.deps.sessions.mutateData<'issuance'>(session, (current) => ({ ...current, issued: [...current.issued, entry] }), {}, { advance: { from: 'active', to: 'fetched' } });
        log.info({ event: 'credential_issued', credentialConfigurationId: configId, format: credential.config.format, count: credentials.length }, 'credential issued');
        return { credentials, notification_id: notificationId };
    }

    /** Claims from the offer, else from the attribute provider, with field defaults; mandatory ones must be there. */
    private async claims(session: LiveSession<'issuance'>, credential: CredentialConfig): Promise<Record<string, unknown>> {
        const { data } = session;
        const source: ClaimSource | undefined = data.claims[credential.id]
            ?? (credential.attributeProviderId ? { type: 'attributeProvider', attributeProviderId: credential.attributeProviderId } : undefined);
        const given = source?.type === 'inline' ? source.claims : source ? await this.fromProvider(session, credential, source.attributeProviderId) : {};
        return this.checkClaims(credential, given);
    }

    /**
     * Claims as given (offer, attribute provider, or a deferred issuance's completion), with field defaults;
     * mandatory ones must be there, and every value must keep its field's type and constraints.
     */
    checkClaims(credential: CredentialConfig, given: Record<string, unknown>): Record<string, unknown> {
        const fields = this.fullPaths(credential);
        let complete: Record<string, unknown>;
        try {
            complete = completeClaims(given, fields);
        }
        catch (err) {
            throw credentialError('credential_request_denied', (err as Error).message);
        }
        try {
            enforceClaimRules(complete, fields);
        }
        catch (err) {
            throw credentialError('invalid_credential_request', (err as Error).message);
        }
        return complete;
    }

    /** mso_mdoc field paths as [namespace, element]; dc+sd-jwt paths as they are. */
    private fullPaths(credential: CredentialConfig): Array<ClaimField & { path: Path }> {
        const fields = flattenFields(credential.fields as never) as Array<ClaimField & { path: Path }>;
        if (credential.config.format !== 'mso_mdoc') {
            return fields;
        }
        return fields.map((f) => ({ ...f, path: f.path.length === 1 ? [f.namespace ?? credential.config.docType!, f.path[0]!] : f.path }));
    }

    private async fromProvider(session: LiveSession<'issuance'>, credential: CredentialConfig, providerId: string): Promise<Record<string, unknown>> {
        const provider = await this.deps.registry.get(systemContext(session.tenantId), attributeProviderKind, providerId);
        if (!provider) {
            throw credentialError('credential_request_denied', `Attribute provider ${providerId} does not exist`);
        }
        const { url, auth } = provider.spec;
        const headers: Record<string, string> = auth.type === 'apiKey' ? { [auth.config.headerName]: auth.config.value } : {};
        // The id the request's deferred transaction gets, should the provider defer it: it completes it by this id.
        const transactionId = newTransactionId();
        try {
            const res = await outboundRequest(this.deps.outbound, url, { method: 'POST', headers, body: { session: session.id, credential_configuration_id: credential.id, transaction_id: transactionId, ...(session.data.presented ? { presentations: session.data.presented } : {}) } });
            const answer = res.status >= 200 && res.status < 300 ? res.json<{ claims?: Record<string, unknown>; deferred?: boolean; interval?: unknown }>() : undefined;
            if (answer?.deferred === true) {
                throw new IssuanceDeferred(transactionId, deferredInterval(answer.interval));
            }
            if (!answer?.claims || typeof answer.claims !== 'object') {
                throw new Error(`attribute provider answered ${res.status} without claims`);
            }
            return answer.claims;
        }
        catch (err) {
            if (err instanceof DomainError || err instanceof IssuanceDeferred) {
                throw err;
            }
            this.deps.log.warn({ err: (err as Error).message, attributeProvider: providerId }, 'attribute provider failed');
            throw credentialError('credential_request_denied', 'The claims for this credential could not be obtained');
        }
    }

    private async format(tenantId: string, credential: CredentialConfig, keyChainId: string, claims: Record<string, unknown>, holderJwk: Jose.JWK | undefined, status?: CredentialStatus): Promise<string> {
        if (credential.config.format === 'mso_mdoc') {
            if (!holderJwk) {
                throw credentialError('invalid_proof', 'An mdoc needs a device key: send a proof');
            }
            return issueMdoc(this.deps.signing, {
                tenantId, keyChainId, docType: credential.config.docType!, namespaces: claims as Record<string, Record<string, unknown>>, deviceJwk: holderJwk, lifetimeSeconds: credential.lifeTime, status
            });
        }
        const vct = typeof credential.vct === 'string' ? credential.vct : credential.vct?.vct;
        return issueSdJwtVc(this.deps.signing, {
            tenantId, keyChainId, issuer: tenantUrl(this.deps.publicUrl, tenantId), vct: vct!, vctIntegrity: typeMetadataDocument(credential.vct)?.integrity, claims, fields: credential.fields as never, holderJwk, lifetimeSeconds: credential.lifeTime, status
        });
    }
}
