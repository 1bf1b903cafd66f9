import type { Logger } from '../../../lib/logging';

export interface KeycloakAdminOptions {
    /** The realm's issuer, e.g. https://idp.example.com/realms/hallmark (an optional base path before /realms/ is kept). */
    issuer: string;
    /** Where this service reaches Keycloak (OIDC_INTERNAL_ISSUER_URL); every request goes there when set. */
    internalIssuer?: string;
    /** The service's own client in the realm (OIDC_CLIENT_ID/OIDC_CLIENT_SECRET); needs realm-management rights on clients, roles and users. */
    clientId: string;
    clientSecret: string;
    log: Logger;
    /** Timeout of each request. Default 10000. */
    fetchTimeoutMs?: number;
}

export interface RootClient {
    clientId: string;
    secret: string;
    /** Realm roles the client's service account holds. Default ['tenant:manage']. */
    roles?: string[];
}

/** What ensureRootClient changed; all false when the provider already matched. */
export interface RootClientChanges {
    created: boolean;
    secretUpdated: boolean;
    rolesCreated: string[];
    rolesMapped: string[];
}

interface ClientRepresentation {
    id: string;
    clientId: string;
    secret?: string;
    publicClient?: boolean;
    serviceAccountsEnabled?: boolean;
    [key: string]: unknown;
}

interface RoleRepresentation {
    id: string;
    name: string;
    [key: string]: unknown;
}

interface Call {
    step: string;
    method?: 'GET' | 'POST' | 'PUT';
    body?: unknown;
    /** Statuses that are answers rather than failures (e.g. 404 for "no such role"). */
    accept?: number[];
}

/** A minimal client of Keycloak's admin REST API: just what the root client bootstrap needs. */
export class KeycloakAdmin {
    /** Base of the token endpoint and the admin API, on the address this service reaches Keycloak at. */
    readonly realmUrl: string;
    readonly adminUrl: string;
    private readonly fetchTimeoutMs: number;

    constructor(private readonly options: KeycloakAdminOptions) {
        const match = /^(.*)\/realms\/([^/]+)\/*$/.exec(new URL(options.internalIssuer ?? options.issuer).pathname);
        if (!match) {
            throw new Error(`Keycloak admin: the issuer ${options.internalIssuer ?? options.issuer} does not end in /realms/<realm>`);
        }
        const [, basePath, realm] = match;
        const origin = new URL(options.internalIssuer ?? options.issuer).origin;
        this.realmUrl = `${origin}${basePath}/realms/${realm}`;
        this.adminUrl = `${origin}${basePath}/admin/realms/${realm}`;
        this.fetchTimeoutMs = options.fetchTimeoutMs ?? 10000;
    }

    /** An admin access token by the client credentials grant. */
    async token(): Promise<string> {
        const body = new URLSearchParams({ grant_type: 'client_credentials', client_id: this.options.clientId, client_secret: this.options.clientSecret });
        const response = await this.send('admin token request', `${this.realmUrl}/protocol/openid-connect/token`, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
            body
        });
        if (response.status !== 200) {
            throw await this.failure('admin token request', response);
        }
        const json = await response.json().catch(() => undefined) as { access_token?: unknown } | undefined;
        if (typeof json?.access_token !== 'string') {
            throw new Error('Keycloak admin: admin token request failed: the response holds no access_token');
        }
        return json.access_token;
    }

    /**
     * Makes the provider hold a confidential service-account client with this secret and these realm roles.
     * Idempotent: when everything already matches, only reads are made.
     */
    async ensureRootClient(root: RootClient): Promise<RootClientChanges> {
        const changes: RootClientChanges = { created: false, secretUpdated: false, rolesCreated: [], rolesMapped: [] };
        const api = this.api(await this.token(), [root.secret]);
        const q = encodeURIComponent;

        const found = await api<ClientRepresentation[]>(`/clients?clientId=${q(root.clientId)}`, { step: 'find client' });
        let client = found.body?.find((c) => c.clientId === root.clientId);
        if (!client) {
            const created = await api(`/clients`, {
                step: 'create client',
                method: 'POST',
                body: {
                    clientId: root.clientId,
                    secret: root.secret,
                    serviceAccountsEnabled: true,
                    publicClient: false,
                    standardFlowEnabled: false,
                    directAccessGrantsEnabled: false,
                    protocol: 'openid-connect'
                },
                // 409: created meanwhile by another instance starting with the same configuration.
                accept: [409]
            });
            const id = created.status === 409 ? undefined : created.location?.split('/').pop();
            client = id
                ? (await api<ClientRepresentation>(`/clients/${q(id)}`, { step: 'read created client' })).body
                : (await api<ClientRepresentation[]>(`/clients?clientId=${q(root.clientId)}`, { step: 'find created client' })).body?.find((c) => c.clientId === root.clientId);
            if (!client?.id) {
                throw new Error('Keycloak admin: create client failed: the created client cannot be found');
            }
            changes.created = created.status !== 409;
        }
        else {
            const current = await api<{ value?: string }>(`/clients/${q(client.id)}/client-secret`, { step: 'read client secret' });
            if (current.body?.value !== root.secret || client.serviceAccountsEnabled !== true || client.publicClient === true) {
                await api(`/clients/${q(client.id)}`, {
                    step: 'update client',
                    method: 'PUT',
                    body: { ...client, secret: root.secret, serviceAccountsEnabled: true, publicClient: false }
                });
                changes.secretUpdated = current.body?.value !== root.secret;
            }
        }

        const roles: RoleRepresentation[] = [];
        for (const name of root.roles ?? ['tenant:manage']) {
            let role = await api<RoleRepresentation>(`/roles/${q(name)}`, { step: `read role ${name}`, accept: [404] });
            if (role.status === 404) {
                // 409: created meanwhile by another instance starting at the same time.
                const created = await api(`/roles`, { step: `create role ${name}`, method: 'POST', body: { name }, accept: [409] });
                role = await api<RoleRepresentation>(`/roles/${q(name)}`, { step: `read role ${name}` });
                if (created.status !== 409) {
                    changes.rolesCreated.push(name);
                }
            }
            roles.push({ id: role.body!.id, name: role.body!.name });
        }

        const user = await api<{ id: string }>(`/clients/${q(client.id)}/service-account-user`, { step: 'read service account user' });
        const userId = user.body!.id;
        const mapped = await api<RoleRepresentation[]>(`/users/${q(userId)}/role-mappings/realm`, { step: 'read role mappings' });
        const held = new Set((mapped.body ?? []).map((r) => r.name));
        const missing = roles.filter((r) => !held.has(r.name));
        if (missing.length) {
            await api(`/users/${q(userId)}/role-mappings/realm`, { step: 'map roles', method: 'POST', body: missing });
            changes.rolesMapped = missing.map((r) => r.name);
        }

        this.options.log.info({ clientId: root.clientId, ...changes }, 'Root client ensured in Keycloak');
        return changes;
    }

    private api(token: string, secrets: string[]) {
        return async <T = unknown>(path: string, call: Call): Promise<{ status: number; body?: T; location?: string }> => {
            const response = await this.send(call.step, this.adminUrl + path, {
                method: call.method ?? 'GET',
                headers: {
                    authorization: `Bearer ${token}`,
                    accept: 'application/json',
                    ...(call.body === undefined ? {} : { 'content-type': 'application/json' })
                },
                body: call.body === undefined ? undefined : JSON.stringify(call.body)
            });
            if (!response.ok && !call.accept?.includes(response.status)) {
                throw await this.failure(call.step, response, secrets);
            }
            const text = await response.text();
            let body: T | undefined;
            if (response.ok && text) {
                try {
                    body = JSON.parse(text) as T;
                }
                catch {
                    throw new Error(`Keycloak admin: ${call.step} failed: the response is not JSON`);
                }
            }
            return { status: response.status, body, location: response.headers.get('location') ?? undefined };
        };
    }

    private async send(step: string, url: string, init: RequestInit): Promise<Response> {
        try {
            return await fetch(url, { ...init, signal: AbortSignal.timeout(this.fetchTimeoutMs) });
        }
        catch (err) {
            const cause = (err as { cause?: { code?: string } }).cause?.code;
            const reason = (err as Error).name === 'TimeoutError' ? 'timed out' : `${(err as Error).message}${cause ? ` (${cause})` : ''}`;
            throw new Error(`Keycloak admin: ${step} failed: ${reason} at ${new URL(url).origin}`);
        }
    }

    /** Names the step and status, with Keycloak's error text when it gives one; never a secret. */
    private async failure(step: string, response: Response, secrets: string[] = []): Promise<Error> {
        let detail = '';
        try {
            const json = await response.json() as { error?: unknown; error_description?: unknown; errorMessage?: unknown };
            detail = [json.error, json.error_description ?? json.errorMessage].filter((v) => typeof v === 'string').join(': ');
        }
        catch {
            // No JSON body: the status says enough.
        }
        const message = `Keycloak admin: ${step} failed: HTTP ${response.status}${detail ? ` (${detail.slice(0, 200)})` : ''}`;
        return new Error([this.options.clientSecret, ...secrets].filter((s) => s.length > 0).reduce((t, s) => t.split(s).join('[redacted]'), message));
    }
}
