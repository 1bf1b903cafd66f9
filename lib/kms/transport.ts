import Http from 'node:http';
import Https from 'node:https';
import { KmsUnavailableError } from './types';
import { guardAgent, OutboundBlockedError, outboundRequest, OutboundRequestError, type OutboundPolicy, type OutboundRequest, type OutboundResponse, type Resolver } from '../outbound';

/*
 * How KMS providers that speak HTTP (http, vault, csc) talk: through the shared outbound client, over kept-alive connections (with the
 * mTLS client certificate) that each go through the outbound guard, with one deadline per exchange, a capped answer,
 * and failures named without secrets.
 */

/**
 * The policy of a provider the operator configured (kms.json files): any scheme and network the URL names. Its
 * connections still go through the guard, so each one goes to the address resolved once for it. A provider a tenant
 * configured through the API gets the service's outbound policy instead (KmsOpenContext.outbound).
 */
export const OPERATOR_POLICY: OutboundPolicy = { allowHttp: true, allowPrivateNetwork: true, allowedHosts: [] };

/** A KMS answer is a few hundred bytes; a cap keeps a misbehaving server from filling memory. */
const MAX_RESPONSE_BYTES = 64 * 1024;

export interface RequestBody {
    contentType: string;
    data: Buffer;
}

export interface Endpoint {
    url: URL;
    /** Applied by the agent's guard at each new connection. */
    policy: OutboundPolicy;
    /** Every new connection resolves the host once through the outbound guard and connects to that address. */
    agent: Http.Agent;
}

/** How the store reaches the KMS: its mTLS client material, and DNS (tests answer with chosen addresses). */
export interface HttpKmsTransport {
    tls?: TlsMaterial;
    resolver?: Resolver;
}

export interface TlsMaterial {
    cert: Buffer;
    key: Buffer;
    ca?: Buffer;
}

const endpoint = (url: URL, agent: Http.Agent, policy: OutboundPolicy, resolver?: Resolver): Endpoint =>
    ({ url, policy, agent: guardAgent(agent, policy, url.href, resolver) });

/** The KMS itself: connections kept alive between operations, presenting the mTLS client certificate if any. */
export const keptAliveEndpoint = (url: URL, policy: OutboundPolicy, { tls, resolver }: HttpKmsTransport): Endpoint => {
    const agent = url.protocol === 'https:'
        ? new Https.Agent({ keepAlive: true, ...(tls ? { cert: tls.cert, key: tls.key, ...(tls.ca ? { ca: tls.ca } : {}) } : {}) })
        : new Http.Agent({ keepAlive: true });
    return endpoint(url, agent, policy, resolver);
};

/** A server called rarely (the token endpoint): a new connection each time. */
export const singleUseEndpoint = (url: URL, policy: OutboundPolicy, resolver?: Resolver): Endpoint =>
    endpoint(url, new (url.protocol === 'https:' ? Https : Http).Agent({ keepAlive: false }), policy, resolver);

/** The KMS could not be reached or did not answer in time; the message is safe to show. */
export class TransportError extends Error {}

const describeNetworkError = (err: unknown): string => {
    const code = (err as NodeJS.ErrnoException | undefined)?.code;
    switch (code) {
        case 'ECONNREFUSED': return 'connection refused';
        case 'ECONNRESET': return 'connection reset';
        case 'ENOTFOUND': return 'host not found';
        case 'EAI_AGAIN': return 'name lookup failed';
        case 'ETIMEDOUT': return 'connection timed out';
        case 'EHOSTUNREACH': return 'host unreachable';
        // Node and OpenSSL codes (ERR_SSL_..., DEPTH_ZERO_SELF_SIGNED_CERT) carry no secrets, unlike some messages.
        default: return code ? `network error ${code}` : 'network error';
    }
};

/**
 * One HTTP exchange through the shared outbound client over the endpoint's guarded agent, with one deadline covering
 * connect, TLS, request and the whole answer. `path` (with its query) is taken on the endpoint's origin. Throws a
 * TransportError when the KMS cannot be reached or does not answer in time, the OutboundBlockedError when the policy
 * refuses the address, and another Error for an answer that will not be read (too large, a redirect).
 */
export const exchange = async (endpoint: Endpoint, method: NonNullable<OutboundRequest['method']>, path: string,
    headers: Record<string, string>, body: RequestBody | undefined, timeoutMs: number): Promise<OutboundResponse> => {

    try {
        return await outboundRequest(endpoint.policy, `${endpoint.url.origin}${path}`, {
            method,
            headers: body ? { ...headers, 'content-type': body.contentType } : headers,
            body: body?.data,
            timeoutMs,
            maxResponseBytes: MAX_RESPONSE_BYTES,
            agent: endpoint.agent
        });
    } catch (err) {
        if (!(err instanceof OutboundRequestError)) {
            throw err;
        }
        switch (err.failure) {
            case 'timeout': throw new TransportError(`no answer within ${timeoutMs} ms`);
            // The guard's resolution failures carry the resolver's error as their cause.
            case 'unreachable': throw new TransportError(describeNetworkError(err.cause));
            case 'too-large': throw new Error(`answer larger than ${MAX_RESPONSE_BYTES} bytes`);
            // A redirect or a request Node refuses: the message names at most the scheme, host and port.
            default: throw err;
        }
    }
};

export const pathOf = (url: URL): string => `${url.pathname}${url.search}`;

export const parseJsonObject = (body: Buffer): Record<string, unknown> | undefined => {
    try {
        const value: unknown = JSON.parse(body.toString('utf8'));
        return value && typeof value === 'object' && !Array.isArray(value) ? value as Record<string, unknown> : undefined;
    } catch {
        return undefined;
    }
};

/** The Error of an answer of the provider `label` to `op` that cannot be used; `reason` must name no secret. */
export const invalidAnswer = (label: string, op: string, reason: string): Error =>
    new Error(`${label} gave an invalid answer to ${op}: ${reason}`);

/** The body of the provider's answer to `op` as a JSON object; any other body is an invalid answer. */
export const jsonObjectAnswer = (label: string, op: string, res: OutboundResponse): Record<string, unknown> => {
    const body = parseJsonObject(res.body);
    if (!body) {
        throw invalidAnswer(label, op, 'the body is not a JSON object');
    }
    return body;
};

/**
 * `exchange` as a KMS operation named `op` of the provider `label`: an unreachable or slow KMS, or an address the
 * outbound policy refuses, becomes the KmsUnavailableError (503 naming the provider); an answer that cannot be read
 * an Error naming the provider. Status codes are left to the caller.
 */
export const kmsExchange = async (endpoint: Endpoint, label: string, op: string, method: NonNullable<OutboundRequest['method']>, path: string,
    headers: Record<string, string>, body: RequestBody | undefined, timeoutMs: number): Promise<OutboundResponse> => {
    try {
        return await exchange(endpoint, method, path, headers, body, timeoutMs);
    } catch (err) {
        if (err instanceof TransportError) {
            throw new KmsUnavailableError(`${label} is unavailable: ${op} failed (${err.message})`);
        }
        // Unusable while the policy forbids the address it resolves to (it may resolve elsewhere later).
        if (err instanceof OutboundBlockedError) {
            throw new KmsUnavailableError(`${label} is unavailable: ${op} refused by the outbound policy (${err.message})`);
        }
        throw invalidAnswer(label, op, (err as Error).message);
    }
};

/** A JSON request body for exchange. */
export const jsonBody = (payload: unknown): RequestBody => ({ contentType: 'application/json', data: Buffer.from(JSON.stringify(payload)) });
