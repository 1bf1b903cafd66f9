/**
 * The one way Hallmark calls out to URLs that tenants configure (webhooks, attribute providers, trust and status
 * lists). Such URLs are attacker-controlled input: the guard refuses schemes, hosts and addresses the policy does not
 * allow (spec 1, OUTBOUND_URL_*; 6.3 item 5) and pins the connection to the address it checked, so a DNS answer that
 * changes between check and connect (rebinding) cannot redirect the request into the private network.
 *
 * Messages of both error classes name at most the scheme, host and port: paths and query strings of webhook URLs
 * often carry tokens, and header values carry credentials.
 */
import * as Dns from 'node:dns';
import * as Http from 'node:http';
import * as Https from 'node:https';
import * as Net from 'node:net';
import * as Url from 'node:url';
import { classifyAddress } from './addresses';

export { classifyAddress, isPublicAddress, type AddressClass } from './addresses';

export interface OutboundPolicy {
    allowHttp: boolean;
    allowPrivateNetwork: boolean;
    allowedHosts: string[];
}

/** The URL is refused by the outbound policy; nothing was sent. */
export class OutboundBlockedError extends Error {
    /** Why, without the scheme, host and port the message starts with: for answers that name the field instead. */
    readonly reason: string;

    constructor(where: string | undefined, reason: string) {
        super(where ? `${where}: ${reason}` : reason);
        this.name = 'OutboundBlockedError';
        this.reason = reason;
    }
}

/**
 * What went wrong, for callers that answer differently to each (the http KMS provider reports an unreachable or slow
 * KMS as unavailable, and an oversized answer or a redirect as an invalid answer).
 */
export type OutboundFailure = 'unreachable' | 'timeout' | 'too-large' | 'redirect' | 'invalid';

/** Resolution or connection failure, timeout, oversized body, redirect or an unreadable response. */
export class OutboundRequestError extends Error {
    readonly failure: OutboundFailure;

    constructor(message: string, options?: { cause?: unknown; failure?: OutboundFailure }) {
        super(message, options);
        this.name = 'OutboundRequestError';
        this.failure = options?.failure ?? 'invalid';
    }
}

export interface OutboundResponse {
    status: number;
    headers: Record<string, string | string[] | undefined>;
    body: Buffer;
    json<T = unknown>(): T;
    text(): string;
}

export interface OutboundRequest {
    /** Defaults to POST when there is a body, GET otherwise. */
    method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
    /** Host and Content-Length are always derived from the URL and the body; given values are dropped. */
    headers?: Record<string, string>;
    /** An object (not a Buffer) is sent as JSON with content-type application/json unless a content-type is given. */
    body?: string | Buffer | object;
    /** Whole request: DNS resolution, connect, TLS, and reading the full response. */
    timeoutMs?: number;
    maxResponseBytes?: number;
    /**
     * A caller's agent made by guardAgent for this URL's origin, for connections kept alive between requests or
     * presenting a client certificate. The guard checks the URL at each new connection, so the request is not
     * checked again; a kept-alive connection that the server closed while idle is retried once on a fresh one.
     */
    agent?: Http.Agent;
}

export type Resolver = (hostname: string) => Promise<Array<{ address: string; family: 4 | 6 }>>;

export interface CheckedUrl {
    url: URL;
    /** The address the request must connect to. */
    address: string;
    family: 4 | 6;
}

export const DEFAULT_TIMEOUT_MS = 10_000;
export const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024;
export const MAX_REQUEST_BYTES = 1024 * 1024;

export const defaultResolver: Resolver = async (hostname) => {
    const answers = await Dns.promises.lookup(hostname, { all: true, verbatim: true });
    return answers.map(({ address, family }) => ({ address, family: family === 6 ? 6 : 4 }));
};

const SAVE_CHECK_CACHE_MS = 60_000;
const SAVE_CHECK_CACHE_HOSTS = 1000;

/**
 * The resolver of save-time checks: answers (and failures) are kept for a minute per host. A save check is advisory
 * (every use resolves and checks again, and connects to the address it approved), so a kept answer cannot let a
 * request through; it keeps a bundle of a thousand webhooks on one host from resolving that host a thousand times
 * inside the import's transaction.
 */
const saveCheckResolver = (() => {
    const answers = new Map<string, { at: number; answer: ReturnType<Resolver> }>();
    return (hostname: string): ReturnType<Resolver> => {
        const kept = answers.get(hostname);
        if (kept && Date.now() - kept.at < SAVE_CHECK_CACHE_MS) {
            return kept.answer;
        }
        if (answers.size >= SAVE_CHECK_CACHE_HOSTS) {
            answers.clear();
        }
        const answer = defaultResolver(hostname);
        // A failure is kept too (an unresolvable name is not refused at save time either), without an unhandled rejection.
        answer.catch(() => undefined);
        answers.set(hostname, { at: Date.now(), answer });
        return answer;
    };
})();

/** Scheme, host and port only: safe for logs and error messages. */
const describe = (url: URL): string => `${url.protocol}//${url.host}`;

const bareHost = (hostname: string): string => {
    let host = hostname.trim().toLowerCase();
    if (host.startsWith('[') && host.endsWith(']')) {
        host = host.slice(1, -1);
    }

    // "example.com." is the same host as "example.com"; the allowlist must not be sidestepped by the root label.
    if (host.endsWith('.')) {
        host = host.slice(0, -1);
    }

    return host;
};

const normaliseAllowedHost = (entry: string): string => {
    const host = bareHost(entry);
    if (host === '' || Net.isIP(host) !== 0) {
        return host;
    }

    // URL hostnames arrive in punycode, so an allowlist written in Unicode must be compared in punycode too.
    return Url.domainToASCII(host) || host;
};

const hostAllowed = (hostname: string, allowedHosts: string[]): boolean => {
    if (allowedHosts.length === 0) {
        return true;
    }

    const host = bareHost(hostname);
    return allowedHosts.some((entry) => {
        const allowed = normaliseAllowedHost(entry);
        if (allowed === '') {
            return false;
        }

        // Subdomain matching needs the dot so that badexample.com does not pass for example.com; IP literals have
        // no subdomains.
        return host === allowed || (Net.isIP(host) === 0 && host.endsWith(`.${allowed}`));
    });
};

const errorCode = (err: unknown): string => {
    const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
    return typeof code === 'string' ? code : typeof message === 'string' ? message : 'unknown error';
};

const parseUrl = (url: string): URL => {
    try {
        return new URL(url);
    }
    catch {
        throw new OutboundBlockedError(undefined, 'invalid URL');
    }
};

/**
 * Applies the policy to a URL and resolves its host once. The returned address is the one to connect to: resolving
 * again later could give another answer.
 */
export const checkUrl = async (policy: OutboundPolicy, url: string, resolver: Resolver = defaultResolver): Promise<CheckedUrl> => {
    const parsed = parseUrl(url);

    if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') {
        throw new OutboundBlockedError(undefined, `scheme ${parsed.protocol} is not allowed (only https, or http when OUTBOUND_URL_ALLOW_HTTP is set)`);
    }

    if (parsed.protocol === 'http:' && !policy.allowHttp) {
        throw new OutboundBlockedError(describe(parsed), 'http URLs are not allowed by the outbound policy (OUTBOUND_URL_ALLOW_HTTP is off)');
    }

    if (parsed.username !== '' || parsed.password !== '') {
        // parsed.host never contains the userinfo, so the message stays free of it.
        throw new OutboundBlockedError(describe(parsed), 'credentials in the URL are not allowed');
    }

    const host = bareHost(parsed.hostname);
    if (host === '') {
        throw new OutboundBlockedError(undefined, 'URL has no host');
    }

    if (!hostAllowed(host, policy.allowedHosts)) {
        throw new OutboundBlockedError(describe(parsed), `host ${host} is not on OUTBOUND_URL_ALLOWED_HOSTS`);
    }

    let answers: Array<{ address: string; family: 4 | 6 }>;
    const literal = Net.isIP(host);
    if (literal !== 0) {
        answers = [{ address: host, family: literal === 6 ? 6 : 4 }];
    }
    else {
        try {
            answers = await resolver(host);
        }
        catch (err) {
            throw new OutboundRequestError(`${describe(parsed)}: could not resolve ${host} (${errorCode(err)})`, { cause: err, failure: 'unreachable' });
        }

        if (!Array.isArray(answers) || answers.length === 0) {
            throw new OutboundRequestError(`${describe(parsed)}: ${host} resolved to no address`, { failure: 'unreachable' });
        }
    }

    // Every answer must pass, not just the first: the client side might otherwise be steered to a different record.
    for (const { address } of answers) {
        const klass = classifyAddress(address);
        if (klass === 'invalid') {
            throw new OutboundBlockedError(describe(parsed), `${host} resolved to something that is not an IP address`);
        }

        if (klass !== 'public' && !policy.allowPrivateNetwork) {
            const what = `${klass} address ${address}`;
            throw new OutboundBlockedError(describe(parsed), `${literal !== 0 ? what : `${host} resolves to ${what}, which`} is not allowed by the outbound policy (OUTBOUND_URL_ALLOW_PRIVATE_NETWORK is off)`);
        }
    }

    const chosen = answers[0]!;
    // The family comes from the address itself rather than from the resolver, whose label could be wrong.
    return { url: parsed, address: chosen.address, family: Net.isIP(chosen.address) === 6 ? 6 : 4 };
};

const encodeBody = (request: OutboundRequest): { body?: Buffer; json: boolean } => {
    const { body } = request;
    if (body === undefined) {
        return { json: false };
    }

    let encoded: Buffer;
    let json = false;
    if (typeof body === 'string') {
        encoded = Buffer.from(body, 'utf8');
    }
    else if (body instanceof Uint8Array) {
        encoded = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    }
    else {
        let text: string | undefined;
        try {
            text = JSON.stringify(body);
        }
        catch (err) {
            throw new OutboundRequestError('request body cannot be serialised as JSON', { cause: err });
        }

        encoded = Buffer.from(text ?? 'null', 'utf8');
        json = true;
    }

    if (encoded.length > MAX_REQUEST_BYTES) {
        throw new OutboundRequestError(`request body exceeds ${MAX_REQUEST_BYTES} bytes`);
    }

    return { body: encoded, json };
};

const buildHeaders = (request: OutboundRequest, body: Buffer | undefined, json: boolean): Record<string, string> => {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(request.headers ?? {})) {
        const lower = name.toLowerCase();
        // Host must match the checked URL (and the TLS name); Content-Length must match what is actually sent.
        if (lower !== 'host' && lower !== 'content-length') {
            headers[lower] = value;
        }
    }

    if (body !== undefined) {
        headers['content-length'] = String(body.length);
        if (json && headers['content-type'] === undefined) {
            headers['content-type'] = 'application/json';
        }
    }

    return headers;
};

const makeResponse = (status: number, headers: Record<string, string | string[] | undefined>, body: Buffer, where: string): OutboundResponse => ({
    status,
    headers,
    body,
    text: () => body.toString('utf8'),
    json: <T>() => {
        try {
            return JSON.parse(body.toString('utf8')) as T;
        }
        catch {
            // The SyntaxError message quotes the body, which may hold anything the receiver chose to send.
            throw new OutboundRequestError(`${where}: response body is not valid JSON`);
        }
    }
});

/** Answers every lookup with the address checkUrl approved, whatever DNS would say now. */
const pinnedLookup = (address: string, family: 4 | 6): Net.LookupFunction => (_hostname, options, callback) => {
    // net calls this with all: true when it races IPv4 and IPv6 (autoSelectFamily), and expects a list then.
    process.nextTick(() => (options.all ? callback(null, [{ address, family }]) : callback(null, address, family)));
};

/**
 * Makes a client that keeps its own connections (keep-alive agents, client certificates), such as the http KMS
 * provider, go through the guard: every new connection of `agent` runs checkUrl on `url` and connects to the address
 * it approved, so the policy holds at every connection and a second DNS answer never decides where a connection
 * goes. A refused URL fails the request with the OutboundBlockedError. The agent must only serve `url`'s origin.
 */
export const guardAgent = <A extends Http.Agent>(agent: A, policy: OutboundPolicy, url: string, resolver: Resolver = defaultResolver): A => {
    type Create = (options: Net.NetConnectOpts, callback: (err: Error | null, socket?: Net.Socket) => void) => Net.Socket | undefined;
    const agentWithCreate = agent as unknown as { createConnection: Create };
    const create = agentWithCreate.createConnection.bind(agent);
    // Node's Agent accepts a socket handed to the callback later, which leaves time for the check.
    agentWithCreate.createConnection = (options, callback) => {
        checkUrl(policy, url, resolver).then(({ address, family }) => {
            // An IP literal is connected to as it is (no lookup), and checkUrl checked exactly that address.
            callback(null, create({ ...options, lookup: pinnedLookup(address, family) } as Net.NetConnectOpts, () => undefined));
        }).catch((err: Error) => callback(err));
        return undefined;
    };
    return agent;
};

/** How long a save waits for DNS before it leaves the URL to the check at use. */
export const SAVE_CHECK_TIMEOUT_MS = 5_000;

/**
 * Why the policy refuses a URL that is being saved (the reason, without scheme, host and port), or undefined when it
 * allows it. A host that cannot be resolved now (or not in time) is not refused: every use checks again.
 */
export const policyRefusal = async (policy: OutboundPolicy, url: string, resolver: Resolver = saveCheckResolver): Promise<string | undefined> => {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), SAVE_CHECK_TIMEOUT_MS);
    });
    try {
        await Promise.race([checkUrl(policy, url, resolver), deadline]);
        return undefined;
    }
    catch (err) {
        if (err instanceof OutboundBlockedError) {
            return err.reason;
        }
        return undefined;
    }
    finally {
        clearTimeout(timer);
    }
};

interface SendOptions {
    method: string;
    headers: Record<string, string>;
    body?: Buffer;
    timeoutMs: number;
    remainingMs: number;
    maxResponseBytes: number;
}

/** Where a request connects: the address checkUrl approved, or a guarded agent that checks each new connection. */
type Connection = { address: string; family: 4 | 6 } | { agent: Http.Agent };

const send = (url: URL, connection: Connection, options: SendOptions): Promise<OutboundResponse> => new Promise((resolve, reject) => {
    const where = describe(url);
    const host = bareHost(url.hostname);
    const https = url.protocol === 'https:';

    let settled = false;
    let req: Http.ClientRequest | undefined;
    const finish = (outcome: () => void): void => {
        if (settled) {
            return;
        }

        settled = true;
        clearTimeout(timer);
        outcome();
    };

    const fail = (err: OutboundRequestError | OutboundBlockedError): void => finish(() => {
        req?.destroy();
        reject(err);
    });

    // One timer for the whole exchange: socket timeouts only see idle gaps, so a server trickling bytes would
    // otherwise hold the caller (and the wallet waiting on a webhook) indefinitely.
    const timer = setTimeout(() => fail(new OutboundRequestError(`${where}: timed out after ${options.timeoutMs} ms`, { failure: 'timeout' })), options.remainingMs);

    const requestOptions: Https.RequestOptions = {
        protocol: url.protocol,
        hostname: host,
        port: url.port === '' ? undefined : Number(url.port),
        path: `${url.pathname}${url.search}`,
        method: options.method,
        headers: options.headers,
        ...('agent' in connection ? { agent: connection.agent } : {
            // A fresh agent per request: a pooled socket might be connected to an address checked for another request.
            agent: false,
            lookup: pinnedLookup(connection.address, connection.family),
            // TLS must verify the certificate against the name, not against the pinned address.
            ...(https && Net.isIP(host) === 0 ? { servername: host } : {})
        })
    };

    const start = (mayRetry: boolean): void => {
        let request: Http.ClientRequest;
        try {
            request = req = (https ? Https : Http).request(requestOptions);
        }
        catch (err) {
            // Invalid header names or values throw here; Node's message names the header, never its value.
            fail(new OutboundRequestError(`${where}: invalid request (${errorCode(err)})`, { cause: err }));
            return;
        }

        let answered = false;
        request.on('error', (err: NodeJS.ErrnoException) => {
            // A kept-alive socket that the server closed while idle fails before any answer; Node's documented remedy
            // is one retry on a fresh socket.
            if (mayRetry && !settled && !answered && request.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE')) {
                start(false);
                return;
            }

            // A guarded agent's refusal or failed resolution is already the error to report.
            fail(err instanceof OutboundBlockedError || err instanceof OutboundRequestError ? err
                : new OutboundRequestError(`${where}: request failed (${errorCode(err)})`, { cause: err, failure: 'unreachable' }));
        });
        request.on('response', (res) => {
            answered = true;
            const status = res.statusCode ?? 0;
            // 304 only answers a conditional request the caller made on purpose; it redirects nowhere.
            if (status >= 300 && status < 400 && status !== 304) {
                res.resume();
                fail(new OutboundRequestError(`${where}: redirects are not followed (status ${status})`, { failure: 'redirect' }));
                return;
            }

            const declared = Number(res.headers['content-length']);
            if (Number.isFinite(declared) && declared > options.maxResponseBytes) {
                fail(new OutboundRequestError(`${where}: response exceeds ${options.maxResponseBytes} bytes`, { failure: 'too-large' }));
                return;
            }

            const chunks: Buffer[] = [];
            let size = 0;
            res.on('data', (chunk: Buffer) => {
                size += chunk.length;
                if (size > options.maxResponseBytes) {
                    fail(new OutboundRequestError(`${where}: response exceeds ${options.maxResponseBytes} bytes`, { failure: 'too-large' }));
                    return;
                }

                chunks.push(chunk);
            });
            res.on('error', (err) => fail(new OutboundRequestError(`${where}: response failed (${errorCode(err)})`, { cause: err, failure: 'unreachable' })));
            res.on('close', () => {
                if (!res.complete) {
                    fail(new OutboundRequestError(`${where}: connection closed before the response was complete`, { failure: 'unreachable' }));
                }
            });
            res.on('end', () => finish(() => resolve(makeResponse(status, res.headers, Buffer.concat(chunks, size), where))));
        });

        request.end(options.body);
    };

    start('agent' in connection);
});

/** Sends one request through the outbound policy. Non-2xx statuses are returned; 3xx redirects are errors. */
export const outboundRequest = async (
    policy: OutboundPolicy,
    url: string,
    request: OutboundRequest = {},
    options: { resolver?: Resolver } = {}
): Promise<OutboundResponse> => {
    const timeoutMs = request.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const maxResponseBytes = request.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    if (!(timeoutMs > 0) || !(maxResponseBytes >= 0)) {
        throw new OutboundRequestError('timeoutMs must be positive and maxResponseBytes not negative');
    }

    const { body, json } = encodeBody(request);
    const headers = buildHeaders(request, body, json);
    const started = Date.now();

    // The deadline covers resolution too: a resolver that never answers must not hold the caller.
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => {
            let where = 'outbound request';
            try {
                where = describe(new URL(url));
            }
            catch { /* an invalid URL is reported by checkUrl instead */ }

            reject(new OutboundRequestError(`${where}: timed out after ${timeoutMs} ms`, { failure: 'timeout' }));
        }, timeoutMs);
    });

    let target: { url: URL; connection: Connection };
    try {
        target = request.agent ? { url: parseUrl(url), connection: { agent: request.agent } } : await Promise.race([checkUrl(policy, url, options.resolver), deadline])
            .then(({ url: checked, address, family }) => ({ url: checked, connection: { address, family } }));
    }
    finally {
        clearTimeout(timer);
    }

    return send(target.url, target.connection, {
        method: request.method ?? (body === undefined ? 'GET' : 'POST'),
        headers,
        body,
        timeoutMs,
        remainingMs: Math.max(1, timeoutMs - (Date.now() - started)),
        maxResponseBytes
    });
};
