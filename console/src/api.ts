/**
 * The management API client: one bearer token, kept in this module's memory only (never in storage or cookies),
 * fetched with the client credentials grant and fetched again shortly before it expires. The client secret stays
 * in memory for that, since the grant has no refresh token; closing or reloading the tab forgets both.
 */

export interface ErrorDetail {
    path: string;
    message: string;
}

export class ApiError extends Error {
    constructor(readonly status: number, readonly body: { message?: string; error?: string; error_description?: string; code?: string; details?: ErrorDetail[] }) {
        super(body.message ?? body.error_description ?? body.error ?? `HTTP ${status}`);
    }
}

export interface AuthSettings {
    mode: 'integrated' | 'external';
    tokenEndpoint?: string;
    issuer?: string;
}

export interface Identity {
    clientId: string;
    tenantId?: string;
    roles: string[];
    expiresAt: number;
}

interface Credentials {
    clientId: string;
    secret: string;
    endpoint: string;
}

let credentials: Credentials | undefined;
let accessToken: string | undefined;
let identity: Identity | undefined;
let pending: Promise<void> | undefined;
const listeners = new Set<() => void>();

/** Seconds before expiry at which the token is replaced, so no request goes out with a token about to lapse. */
const MARGIN_MS = 30_000;

const claims = (token: string): Record<string, any> => {
    try {
        const part = token.split('.')[1] ?? '';
        return JSON.parse(atob(part.replace(/-/g, '+').replace(/_/g, '/'))) as Record<string, any>;
    }
    catch {
        // An opaque token of an external provider: the API still decides; the console shows every page.
        return {};
    }
};

const tokenEndpoint = async (settings: AuthSettings): Promise<string> => {
    if (settings.mode === 'integrated') {
        return settings.tokenEndpoint ?? '/api/oauth2/token';
    }
    const res = await fetch(`${settings.issuer!.replace(/\/$/, '')}/.well-known/openid-configuration`);
    if (!res.ok) {
        throw new ApiError(res.status, { message: 'The identity provider\'s discovery document could not be read' });
    }
    return ((await res.json()) as { token_endpoint: string }).token_endpoint;
};

/** RFC 6749 2.3.1: each part form-urlencoded, then base64 (UTF-8 bytes, so any character survives btoa). */
const basic = (id: string, secret: string): string => {
    const encode = (v: string) => encodeURIComponent(v).replace(/%20/g, '+');
    const bytes = new TextEncoder().encode(`${encode(id)}:${encode(secret)}`);
    return `Basic ${btoa(String.fromCharCode(...bytes))}`;
};

/**
 * HTTP Basic client authentication: the method every OAuth 2.0 server must support (RFC 6749 2.3.1) and the default
 * of OpenID providers (client_secret_basic), so the same request works in both modes.
 */
const fetchToken = async (c: Credentials): Promise<void> => {
    const res = await fetch(c.endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(c.clientId, c.secret) },
        body: new URLSearchParams({ grant_type: 'client_credentials' }).toString()
    });
    const body = await res.json().catch(() => ({})) as Record<string, any>;
    if (!res.ok) {
        throw new ApiError(res.status, body);
    }
    accessToken = body.access_token as string;
    const c2 = claims(accessToken);
    const roles = (c2.roles ?? c2.realm_access?.roles ?? []) as string[];
    const expiresIn = Number(body.expires_in ?? 300);
    identity = { clientId: c.clientId, tenantId: c2.tenant_id as string | undefined, roles, expiresAt: Date.now() + expiresIn * 1000 };
};

export const signIn = async (settings: AuthSettings, clientId: string, secret: string): Promise<Identity> => {
    const c = { clientId, secret, endpoint: await tokenEndpoint(settings) };
    await fetchToken(c);
    credentials = c;
    return identity!;
};

export const signOut = (): void => {
    credentials = undefined;
    accessToken = undefined;
    identity = undefined;
    listeners.forEach((l) => l());
};

/** Called when the session ends (sign-out, or the token cannot be renewed). */
export const onSignOut = (listener: () => void): void => void listeners.add(listener);

export const currentIdentity = (): Identity | undefined => identity;

const refresh = async (): Promise<void> => {
    if (!credentials) {
        throw new ApiError(401, { message: 'Not signed in' });
    }
    pending ??= fetchToken(credentials).finally(() => {
        pending = undefined;
    });
    await pending;
};

export const token = async (): Promise<string> => {
    if (!identity || !accessToken) {
        throw new ApiError(401, { message: 'Not signed in' });
    }
    if (Date.now() > identity.expiresAt - MARGIN_MS) {
        await refresh();
    }
    return accessToken!;
};

export interface CallOptions {
    body?: unknown;
    query?: Record<string, string | number | boolean | string[] | undefined>;
    /** A multipart body (file upload). */
    form?: FormData;
    /** Answer the Response itself (downloads). */
    raw?: boolean;
}

export const url = (path: string, query?: CallOptions['query']): string => {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query ?? {})) {
        for (const one of Array.isArray(v) ? v : [v]) {
            if (one !== undefined && one !== '') {
                params.append(k, String(one));
            }
        }
    }
    const qs = params.toString();
    return qs ? `${path}?${qs}` : path;
};

/** One management API call; a 401 renews the token once and retries (the signing key may have rotated). */
export const call = async <T = any>(method: string, path: string, options: CallOptions = {}): Promise<T> => {
    const send = async () => fetch(url(path, options.query), {
        method,
        headers: {
            authorization: `Bearer ${await token()}`,
            ...(options.body !== undefined ? { 'content-type': 'application/json' } : {})
        },
        body: options.form ?? (options.body !== undefined ? JSON.stringify(options.body) : undefined)
    });
    let res = await send();
    if (res.status === 401 && credentials) {
        try {
            await refresh();
        }
        catch {
            signOut();
            throw new ApiError(401, { message: 'The session ended: sign in again' });
        }
        res = await send();
    }
    if (options.raw && res.ok) {
        return res as T;
    }
    if (res.status === 204) {
        return undefined as T;
    }
    const text = await res.text();
    let body: any = text;
    try {
        body = text ? JSON.parse(text) : undefined;
    }
    catch {
        // Not JSON: keep the text.
    }
    if (!res.ok) {
        throw new ApiError(res.status, typeof body === 'object' && body ? body : { message: String(body || res.statusText) });
    }
    return body as T;
};

/**
 * The session event stream (text/event-stream) read with fetch, so the token goes in the Authorization header
 * rather than the URL. Calls onEvent for each `status` event until the stream ends or `signal` aborts.
 */
export const events = async (path: string, onEvent: (data: any) => void, signal: AbortSignal): Promise<void> => {
    const res = await fetch(path, { headers: { authorization: `Bearer ${await token()}`, accept: 'text/event-stream' }, signal });
    if (!res.ok || !res.body) {
        throw new ApiError(res.status, { message: 'The event stream could not be opened' });
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
        const { value, done } = await reader.read();
        if (done) {
            return;
        }
        buffer += value;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
            if (data) {
                onEvent(JSON.parse(data));
            }
        }
    }
};
