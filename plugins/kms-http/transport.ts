import Http from 'node:http';
import Https from 'node:https';
import { guardAgent, OutboundBlockedError, OutboundRequestError, type OutboundPolicy, type Resolver } from '../../lib/outbound';

/*
 * How the http KMS provider talks HTTP: kept-alive connections (with the mTLS client certificate) that each go
 * through the outbound guard, one deadline per exchange, a capped answer, and network failures named without secrets.
 */

/** A KMS answer is a few hundred bytes; a cap keeps a misbehaving server from filling memory. */
const MAX_RESPONSE_BYTES = 64 * 1024;

export interface RawResponse {
    status: number;
    body: Buffer;
}

interface RequestBody {
    contentType: string;
    data: Buffer;
}

export interface Endpoint {
    url: URL;
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
    ({ url, agent: guardAgent(agent, policy, url.href, resolver) });

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

/** The KMS could not be reached or did not answer in time; `reason` is safe to show. */
export class TransportError extends Error {}

/** The KMS answered something we will not read (too large); not an availability problem. */
class OversizedResponseError extends Error {}

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
 * One HTTP exchange with one deadline covering connect, TLS, request and the whole answer. node:http rather than
 * fetch: Node's bundled fetch cannot present a client certificate without a separately installed undici, and one
 * transport for every auth type keeps the error mapping in one place.
 */
export const exchange = (endpoint: Endpoint, method: string, path: string, headers: Record<string, string>,
    body: RequestBody | undefined, timeoutMs: number): Promise<RawResponse> => {

    const attempt = (mayRetry: boolean): Promise<RawResponse> => new Promise((resolve, reject) => {
        const { url, agent } = endpoint;
        const signal = AbortSignal.timeout(timeoutMs);
        let settled = false;
        let answered = false;
        const settle = () => {
            settled = true;
            signal.removeEventListener('abort', onAbort);
        };
        const fail = (err: Error) => {
            if (!settled) {
                settle();
                req.destroy();
                reject(err);
            }
        };
        const onAbort = () => fail(new TransportError(`no answer within ${timeoutMs} ms`));
        const req = (url.protocol === 'https:' ? Https : Http).request({
            protocol: url.protocol,
            // URL keeps IPv6 literals in brackets; the socket layer wants them bare.
            hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'),
            port: url.port || undefined,
            method,
            path,
            agent,
            headers: body ? { ...headers, 'content-type': body.contentType, 'content-length': String(body.data.length) } : headers
        });
        signal.addEventListener('abort', onAbort);
        req.on('error', (err: NodeJS.ErrnoException) => {
            // A kept-alive socket that the server closed while idle fails before any answer; Node's documented
            // remedy is one retry on a fresh socket.
            if (mayRetry && !settled && !answered && req.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE')) {
                settle();
                attempt(false).then(resolve, reject);
                return;
            }
            // The guard's resolution failures carry the resolver's error as their cause.
            fail(err instanceof OutboundBlockedError ? err : new TransportError(describeNetworkError(err instanceof OutboundRequestError ? err.cause : err)));
        });
        req.on('response', (res) => {
            answered = true;
            const chunks: Buffer[] = [];
            let size = 0;
            res.on('data', (chunk: Buffer) => {
                size += chunk.length;
                if (size > MAX_RESPONSE_BYTES) {
                    fail(new OversizedResponseError(`answer larger than ${MAX_RESPONSE_BYTES} bytes`));
                } else {
                    chunks.push(chunk);
                }
            });
            res.on('end', () => {
                if (!settled) {
                    settle();
                    resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) });
                }
            });
            res.on('aborted', () => fail(new TransportError('connection closed during the answer')));
            res.on('error', (err) => fail(new TransportError(describeNetworkError(err))));
        });
        req.end(body?.data);
    });

    return attempt(true);
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
