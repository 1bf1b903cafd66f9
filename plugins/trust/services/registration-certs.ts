import Crypto from 'node:crypto';
import * as Jose from 'jose';
import type { Logger } from 'pino';
import type { Database } from '../../../lib/db/database';
import { NotFoundError, UnavailableError, ValidationError } from '../../../lib/errors';
import { outboundRequest, OutboundBlockedError, OutboundRequestError, type OutboundPolicy } from '../../../lib/outbound';
import type { TenantContext } from '../../../lib/registry/kind';
import type { Registry } from '../../../lib/registry/registry';
import { VerificationFailure } from '../../../lib/verify/failures';
import { verifyCertificateChain } from '../../../lib/verify/trust';
import { presentationConfigKind, type PresentationConfig } from '../../../resources/presentation-config';
import type { RegistrationCertBody } from '../../../resources/presentation/registration-cert';
import { registrarConfigKind, type RegistrarConfig } from '../../../resources/registrar-config';

/**
 * Registration certificates of presentation configurations (spec 2.1 registration_cert, 4.3 reissue): obtained by
 * one of three strategies, kept in `registration_certs`, refreshed before expiry by a background job, and sent to
 * wallets in the request object as OpenID4VP `verifier_info` `{format: "registration_cert", data: <JWT>}`.
 *
 * - jwt: the imported JWT is the certificate (checked, never sent to the registrar);
 * - id: `GET {registrarUrl}/registration-certificates/{id}` answers it;
 * - body: `POST {registrarUrl}/relying-parties/{relyingPartyId}/registration-certificates` with the body (and the
 *   credentials of the DCQL query when the body names none) registers and answers it.
 * Answers are `{id?, jwt}` JSON or the JWT itself (application/jwt). With the registrar's signerCertificates set,
 * the JWT's x5c must chain to one of them and its signature verify. The protocol is described in docs/trust.md.
 *
 * The cached row is keyed by a digest of registration_cert, dcql_query and the registrar configuration: when any of
 * them changes the cache no longer applies (spec 2.1: cleared on change) and the next use requests a new one.
 * Only tenants with a registrar configuration attach certificates (spec 2.1).
 */

export const REFRESH_JOB = 'registration-certs:refresh';
const FETCH_TIMEOUT_MS = 10_000;
const MAX_ANSWER_BYTES = 256 * 1024;
/** A certificate without exp is kept until its configuration changes. */
const NEVER = Number.MAX_SAFE_INTEGER;

/** What answers show as registrationCertCache (read-only). */
export interface RegistrationCertCache {
    strategy: 'jwt' | 'id' | 'body';
    /** The registrar's id of the certificate, when it gave one. */
    id?: string;
    jwt: string;
    /** SHA-256 of the JWT, hex. */
    fingerprint: string;
    /** SHA-256 of the DER of the JWT's x5c leaf (the registrar's signing certificate), hex. */
    signerFingerprint?: string;
    issuedAt: string;
    expiresAt: string | null;
}

interface CertRow {
    tenantId: string;
    configId: string;
    sourceDigest: string;
    jwt: string;
    registrarId: string | null;
    issuedAt: string | number;
    expiresAt: string | number | null;
    refreshAt: string | number;
}

const systemContext = (tenantId: string): TenantContext => ({ tenantId, clientId: 'system:registrar', roles: [] });

const sha256 = (data: string | Buffer) => Crypto.createHash('sha256').update(data).digest('hex');

const strategyOf = (config: PresentationConfig): RegistrationCertCache['strategy'] | undefined => {
    const cert = config.registration_cert;
    return cert?.jwt ? 'jwt' : cert?.id ? 'id' : cert?.body ? 'body' : undefined;
};

/** What the certificate is requested for: a change of any of it clears the cache. */
const sourceDigest = (config: PresentationConfig, registrar: RegistrarConfig): string =>
    sha256(JSON.stringify([config.registration_cert ?? null, config.dcql_query, registrar]));

/** The credentials a body registers when it names none: what the DCQL query asks for (format, meta, claim paths). */
const credentialsOf = (config: PresentationConfig): Array<Record<string, unknown>> =>
    config.dcql_query.credentials.map((query) => ({
        id: query.id,
        format: query.format,
        meta: query.meta,
        ...(query.claims ? { claims: query.claims.map((claim) => ({ path: claim.path })) } : {})
    }));

export interface RegistrationCertsOptions {
    db: Database;
    registry: Registry;
    outbound: OutboundPolicy;
    log: Logger;
    now?: () => number;
}

export class RegistrationCerts {
    private readonly now: () => number;
    private readonly tokens = new Map<string, { token: string; until: number }>();
    private readonly inFlight = new Map<string, Promise<RegistrationCertCache>>();

    constructor(private readonly deps: RegistrationCertsOptions) {
        this.now = deps.now ?? Date.now;
    }

    private get knex() {
        return this.deps.db.knex;
    }

    private async registrar(tenantId: string): Promise<RegistrarConfig | undefined> {
        return (await this.deps.registry.get(systemContext(tenantId), registrarConfigKind))?.spec;
    }

    /** The cache shown in answers: the stored certificate when it still applies to the configuration. */
    async cached(tenantId: string, config: PresentationConfig): Promise<RegistrationCertCache | undefined> {
        return (await this.cachedMany(tenantId, [config])).get(config.id);
    }

    /** cached() for a page of configurations: one read of the registrar and one of the certificates. */
    async cachedMany(tenantId: string, configs: PresentationConfig[]): Promise<Map<string, RegistrationCertCache>> {
        const found = new Map<string, RegistrationCertCache>();
        const wanted = configs.filter((config) => strategyOf(config));
        const registrar = wanted.length ? await this.registrar(tenantId) : undefined;
        if (!registrar) {
            return found;
        }
        const rows = await this.knex<CertRow>('registration_certs').where({ tenantId }).whereIn('configId', wanted.map((c) => c.id));
        for (const config of wanted) {
            const row = rows.find((r) => r.configId === config.id);
            if (row && row.sourceDigest === sourceDigest(config, registrar)) {
                found.set(config.id, this.cacheOf(config, row));
            }
        }
        return found;
    }

    /**
     * The `verifier_info` entry of a request object made from the presentation configuration `config` (the caller's
     * copy: the verifier keeps its configurations cached, and this is on every request object's path): undefined
     * when the tenant has no registrar configuration or the configuration no registration_cert. A certificate that
     * cannot be obtained fails the request (503): a wallet of the EUDI ecosystem refuses a request without it.
     */
    async verifierInfo(tenantId: string, config: PresentationConfig): Promise<Array<{ format: string; data: string }> | undefined> {
        if (!strategyOf(config)) {
            return undefined;
        }
        const registrar = await this.registrar(tenantId);
        if (!registrar) {
            return undefined;
        }
        let cert = await this.cached(tenantId, config);
        if (!cert || (cert.expiresAt && Date.parse(cert.expiresAt) <= this.now())) {
            cert = await this.issue(tenantId, config, registrar);
        }
        return [{ format: 'registration_cert', data: cert.jwt }];
    }

    /** POST …/registration-cert/reissue: a new certificate now, whatever is cached. */
    async reissue(ctx: TenantContext & { tenantId: string }, configId: string): Promise<RegistrationCertCache> {
        const stored = await this.deps.registry.get(ctx, presentationConfigKind, configId);
        if (!stored) {
            throw new NotFoundError(`PresentationConfig ${configId} not found`);
        }
        if (!strategyOf(stored.spec)) {
            throw new ValidationError(`Presentation configuration ${configId} has no registration_cert`, [{ path: 'registration_cert', message: 'is not set' }]);
        }
        const registrar = await this.registrar(ctx.tenantId);
        if (!registrar) {
            throw new ValidationError('The tenant has no registrar configuration (PUT /api/registrar/config)', [{ path: 'registrar', message: 'is not configured' }]);
        }
        return this.issue(ctx.tenantId, stored.spec, registrar);
    }

    /** Obtains, checks and stores the certificate (one request per configuration at a time). */
    private issue(tenantId: string, config: PresentationConfig, registrar: RegistrarConfig): Promise<RegistrationCertCache> {
        const key = `${tenantId}\u0000${config.id}`;
        const running = this.inFlight.get(key);
        if (running) {
            return running;
        }
        const issuing = this.obtain(tenantId, config, registrar).finally(() => this.inFlight.delete(key));
        this.inFlight.set(key, issuing);
        return issuing;
    }

    private async obtain(tenantId: string, config: PresentationConfig, registrar: RegistrarConfig): Promise<RegistrationCertCache> {
        const strategy = strategyOf(config)!;
        const cert = config.registration_cert!;
        let answer: { id?: string; jwt: string };
        if (strategy === 'jwt') {
            answer = { jwt: cert.jwt! };
        }
        else if (strategy === 'id') {
            answer = await this.call(tenantId, registrar, 'GET', `registration-certificates/${encodeURIComponent(cert.id!)}`);
        }
        else {
            if (!registrar.relyingPartyId) {
                throw new ValidationError('The registrar configuration has no relyingPartyId, which registering a registration_cert body needs', [{ path: 'relyingPartyId', message: 'is not set' }]);
            }
            const body: RegistrationCertBody = { ...cert.body, credentials: cert.body!.credentials ?? credentialsOf(config) };
            answer = await this.call(tenantId, registrar, 'POST', `relying-parties/${encodeURIComponent(registrar.relyingPartyId)}/registration-certificates`, body);
        }
        const checked = await this.check(answer.jwt, registrar);
        const issuedAt = this.now();
        const refreshAt = checked.expiresAt === undefined || strategy === 'jwt' ? NEVER : Math.max(issuedAt + 60_000, checked.expiresAt - (registrar.refreshBeforeExpirySeconds ?? 86400) * 1000);
        const row: CertRow = {
            tenantId: tenantId,
            configId: config.id,
            sourceDigest: sourceDigest(config, registrar),
            jwt: answer.jwt,
            registrarId: answer.id ?? cert.id ?? null,
            issuedAt: issuedAt,
            expiresAt: checked.expiresAt ?? null,
            refreshAt: refreshAt
        };
        await this.knex('registration_certs').insert(row).onConflict(['tenantId', 'configId']).merge();
        this.deps.log.info({ tenantId, presentationConfig: config.id, strategy, expiresAt: checked.expiresAt ? new Date(checked.expiresAt).toISOString() : null }, 'registration certificate obtained');
        return this.cacheOf(config, row);
    }

    private cacheOf(config: PresentationConfig, row: CertRow): RegistrationCertCache {
        let signerFingerprint: string | undefined;
        try {
            const x5c = Jose.decodeProtectedHeader(row.jwt).x5c;
            signerFingerprint = x5c?.[0] ? sha256(Buffer.from(x5c[0], 'base64')) : undefined;
        }
        catch {
            // checked when stored
        }
        return {
            strategy: strategyOf(config)!,
            ...(row.registrarId ? { id: row.registrarId } : {}),
            jwt: row.jwt,
            fingerprint: sha256(row.jwt),
            ...(signerFingerprint ? { signerFingerprint } : {}),
            issuedAt: new Date(Number(row.issuedAt)).toISOString(),
            expiresAt: row.expiresAt === null ? null : new Date(Number(row.expiresAt)).toISOString()
        };
    }

    /** A compact JWS, not expired, and with signer certificates configured: signed by one of them (x5c). */
    private async check(jwt: string, registrar: RegistrarConfig): Promise<{ expiresAt?: number }> {
        let header: Jose.ProtectedHeaderParameters;
        let claims: Jose.JWTPayload;
        try {
            header = Jose.decodeProtectedHeader(jwt);
            claims = Jose.decodeJwt(jwt);
        }
        catch {
            throw new UnavailableError('The registration certificate is not a JWT');
        }
        const expiresAt = typeof claims.exp === 'number' ? claims.exp * 1000 : undefined;
        if (expiresAt !== undefined && expiresAt <= this.now()) {
            throw new UnavailableError('The registration certificate has expired');
        }
        if (registrar.signerCertificates?.length) {
            try {
                const anchors = registrar.signerCertificates.map((certificate) => ({ certificate, serviceType: 'other' as const }));
                const { leafPublicKey } = await verifyCertificateChain(header.x5c, anchors, new Date(this.now()), { serviceTypes: ['other'] });
                await Jose.compactVerify(jwt, leafPublicKey);
            }
            catch (err) {
                const why = err instanceof VerificationFailure ? err.detail ?? err.code : (err as Error).message;
                throw new UnavailableError(`The registration certificate is not signed by a registrar signer certificate: ${why}`);
            }
        }
        return { ...(expiresAt !== undefined ? { expiresAt } : {}) };
    }

    /** One registrar API call with the configured authentication; the answer is `{id?, jwt}` or a bare JWT. */
    private async call(tenantId: string, registrar: RegistrarConfig, method: 'GET' | 'POST', path: string, body?: object): Promise<{ id?: string; jwt: string }> {
        const url = `${registrar.registrarUrl.replace(/\/+$/, '')}/${path}`;
        const headers: Record<string, string> = { accept: 'application/json, application/jwt' };
        if (registrar.auth.type === 'apiKey') {
            headers[registrar.auth.config.headerName] = registrar.auth.config.value;
        }
        else if (registrar.auth.type === 'clientCredentials') {
            headers.authorization = `Bearer ${await this.accessToken(tenantId, registrar)}`;
        }
        const response = await this.send(url, { method, headers, ...(body ? { body } : {}) });
        if (response.status === 404) {
            throw new UnavailableError('The registrar does not know this registration certificate (HTTP 404)');
        }
        if (response.status < 200 || response.status > 299) {
            throw new UnavailableError(`The registrar answered HTTP ${response.status}`);
        }
        const text = response.text().trim();
        if (/^[\w-]+\.[\w-]+\.[\w-]+$/.test(text)) {
            return { jwt: text };
        }
        let json: unknown;
        try {
            json = JSON.parse(text);
        }
        catch {
            throw new UnavailableError('The registrar answer is neither JSON nor a JWT');
        }
        const answer = json as { id?: unknown; jwt?: unknown };
        if (typeof answer?.jwt !== 'string') {
            throw new UnavailableError('The registrar answer has no jwt');
        }
        return { jwt: answer.jwt, ...(typeof answer.id === 'string' ? { id: answer.id } : {}) };
    }

    private async accessToken(tenantId: string, registrar: RegistrarConfig): Promise<string> {
        const auth = registrar.auth as Extract<RegistrarConfig['auth'], { type: 'clientCredentials' }>;
        const key = sha256(JSON.stringify([tenantId, auth.tokenUrl, auth.clientId, auth.clientSecret, auth.scope]));
        const cached = this.tokens.get(key);
        if (cached && cached.until > this.now()) {
            return cached.token;
        }
        const form = new URLSearchParams({ grant_type: 'client_credentials', client_id: auth.clientId, client_secret: auth.clientSecret, ...(auth.scope ? { scope: auth.scope } : {}) });
        const response = await this.send(auth.tokenUrl, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' }, body: form.toString() });
        const answer = response.status === 200 ? (() => {
            try {
                return response.json<{ access_token?: unknown; expires_in?: unknown }>();
            }
            catch {
                return undefined;
            }
        })() : undefined;
        if (typeof answer?.access_token !== 'string') {
            throw new UnavailableError(`The registrar's token endpoint gave no access token (HTTP ${response.status})`);
        }
        const lifetime = typeof answer.expires_in === 'number' ? answer.expires_in : 60;
        this.tokens.set(key, { token: answer.access_token, until: this.now() + Math.max(0, lifetime - 30) * 1000 });
        return answer.access_token;
    }

    private async send(url: string, request: { method: 'GET' | 'POST'; headers: Record<string, string>; body?: string | object }) {
        try {
            return await outboundRequest(this.deps.outbound, url, { ...request, timeoutMs: FETCH_TIMEOUT_MS, maxResponseBytes: MAX_ANSWER_BYTES });
        }
        catch (err) {
            if (err instanceof OutboundBlockedError || err instanceof OutboundRequestError) {
                // Their messages name scheme, host and port only, never the path or a credential.
                throw new UnavailableError(`The registrar cannot be reached: ${err.message}`);
            }
            throw err;
        }
    }

    /**
     * Spec 2.1: when registration_cert or dcql_query changes the cache is cleared and refreshed in the background. A
     * configuration that was just written gets its certificate now (when the tenant has a registrar), unless the
     * cached one still applies; failures are logged, and the next request or the refresh job tries again.
     */
    refreshInBackground(tenantId: string, configId: string): void {
        void (async () => {
            const config = (await this.deps.registry.get(systemContext(tenantId), presentationConfigKind, configId))?.spec;
            const registrar = config && strategyOf(config) ? await this.registrar(tenantId) : undefined;
            if (config && registrar && !await this.cached(tenantId, config)) {
                await this.issue(tenantId, config, registrar);
            }
        })().catch((err: unknown) => {
            this.deps.log.warn({ tenantId, presentationConfig: configId, err: (err as Error).message }, 'registration certificate could not be obtained after the configuration changed');
        });
    }

    /**
     * The background refresh: certificates whose refresh time has come (refreshBeforeExpirySeconds before exp) are
     * requested again; rows of configurations or registrars that are gone are deleted.
     */
    async refreshDue(): Promise<{ refreshed: number; failed: number; removed: number }> {
        const due = await this.knex<CertRow>('registration_certs').where('refreshAt', '<=', this.now()).select('tenantId', 'configId');
        let refreshed = 0;
        let failed = 0;
        let removed = 0;
        for (const row of due) {
            const config = (await this.deps.registry.get(systemContext(row.tenantId), presentationConfigKind, row.configId))?.spec;
            const registrar = await this.registrar(row.tenantId);
            if (!config || !registrar || !strategyOf(config)) {
                await this.knex('registration_certs').where({ tenantId: row.tenantId, configId: row.configId }).delete();
                removed++;
                continue;
            }
            try {
                await this.issue(row.tenantId, config, registrar);
                refreshed++;
            }
            catch (err) {
                failed++;
                this.deps.log.warn({ tenantId: row.tenantId, presentationConfig: row.configId, err: (err as Error).message }, 'registration certificate refresh failed; retried at the next run');
            }
        }
        return { refreshed, failed, removed };
    }
}

const services = new WeakMap<Registry, RegistrationCerts>();

/** Found through the registry like the remote trust lists (see remote-lists.ts): absent without the trust plugin. */
export const attachRegistrationCerts = (registry: Registry, certs: RegistrationCerts): void => {
    services.set(registry, certs);
};

export const registrationCertsOf = (registry: Registry): RegistrationCerts | undefined => services.get(registry);

