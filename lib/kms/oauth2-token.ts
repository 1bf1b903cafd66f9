import type { Logger } from '../logging';
import { KmsUnavailableError } from './types';
import { OutboundBlockedError, type OutboundPolicy, type OutboundResponse, type Resolver } from '../outbound';

import { exchange, parseJsonObject, pathOf, singleUseEndpoint, TransportError, type Endpoint } from './transport';

/* The access token of a KMS provider that authenticates with OAuth2 client credentials (RFC 6749 4.4): the http
 * provider's oauth2-client-credentials auth and the csc provider. */

/** Where and how a provider gets its access token. */
export interface ClientCredentials {
    tokenUrl: string;
    clientId: string;
    clientSecret: string;
    scope?: string;
}

/** Used when a token response has no expires_in: short enough that a silently revoked token does not linger. */
const DEFAULT_TOKEN_LIFETIME_S = 300;
const TOKEN_REFRESH_MARGIN_MAX_S = 30;

const formEncode = (value: string): string => encodeURIComponent(value).replace(/%20/g, '+');

/** Caches one access token, shares one fetch between concurrent callers, and forgets a token the KMS refused. */
export class TokenSource {
    private token: { value: string; refreshAt: number } | undefined;
    private pending: Promise<string> | undefined;
    private readonly endpoint: Endpoint;

    constructor(private readonly auth: ClientCredentials, private readonly label: string, private readonly timeoutMs: number,
        private readonly log: Logger, policy: OutboundPolicy, resolver?: Resolver) {
        this.endpoint = singleUseEndpoint(new URL(auth.tokenUrl), policy, resolver);
    }

    get(): Promise<string> {
        if (this.token && Date.now() < this.token.refreshAt) {
            return Promise.resolve(this.token.value);
        }
        this.pending ??= this.fetchToken().finally(() => {
            this.pending = undefined;
        });
        return this.pending;
    }

    /** Only drops the token if it is still the current one, so a burst of 401s costs a single refetch. */
    invalidate(value: string): void {
        if (this.token?.value === value) {
            this.token = undefined;
        }
    }

    close(): void {
        this.endpoint.agent.destroy();
    }

    private async fetchToken(): Promise<string> {
        const form = ['grant_type=client_credentials'];
        if (this.auth.scope) {
            form.push(`scope=${formEncode(this.auth.scope)}`);
        }
        // RFC 6749 2.3.1: id and secret are form-encoded before the Basic encoding.
        const basic = Buffer.from(`${formEncode(this.auth.clientId)}:${formEncode(this.auth.clientSecret)}`).toString('base64');
        let res: OutboundResponse;
        try {
            res = await exchange(this.endpoint, 'POST', pathOf(this.endpoint.url),
                { accept: 'application/json', authorization: `Basic ${basic}` },
                { contentType: 'application/x-www-form-urlencoded', data: Buffer.from(form.join('&')) }, this.timeoutMs);
        } catch (err) {
            if (err instanceof TransportError) {
                throw new KmsUnavailableError(`${this.label} is unavailable: token request failed (${err.message})`);
            }
            if (err instanceof OutboundBlockedError) {
                throw new KmsUnavailableError(`${this.label} is unavailable: token request refused by the outbound policy (${err.message})`);
            }
            throw new Error(`${this.label}: invalid token response (${(err as Error).message})`);
        }
        const body = parseJsonObject(res.body);
        if (res.status >= 500 || res.status === 408 || res.status === 429) {
            throw new KmsUnavailableError(`${this.label} is unavailable: token request failed (HTTP ${res.status})`);
        }
        if (res.status !== 200) {
            // The OAuth error code (e.g. invalid_client) is a fixed vocabulary and helps; the description is not shown.
            const code = typeof body?.error === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(body.error) ? `, ${body.error}` : '';
            throw new Error(`${this.label}: the token endpoint refused the client credentials (HTTP ${res.status}${code})`);
        }
        const accessToken = body?.access_token;
        if (typeof accessToken !== 'string' || !accessToken) {
            throw new Error(`${this.label}: invalid token response (no access_token)`);
        }
        if (body?.token_type !== undefined && String(body.token_type).toLowerCase() !== 'bearer') {
            throw new Error(`${this.label}: invalid token response (token_type is not Bearer)`);
        }
        const expiresIn = Number(body?.expires_in ?? DEFAULT_TOKEN_LIFETIME_S);
        const lifetime = Number.isFinite(expiresIn) && expiresIn > 0 ? expiresIn : DEFAULT_TOKEN_LIFETIME_S;
        // Refresh a little early so a token does not expire between our check and the KMS's.
        const margin = Math.min(TOKEN_REFRESH_MARGIN_MAX_S, lifetime / 10);
        this.token = { value: accessToken, refreshAt: Date.now() + (lifetime - margin) * 1000 };
        this.log.debug({ kmsProvider: this.label, expiresIn: lifetime }, 'KMS access token fetched');
        return accessToken;
    }
}
