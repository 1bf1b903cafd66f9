import Crypto from 'node:crypto';
import Fs from 'node:fs/promises';
import Http from 'node:http';
import Https from 'node:https';
import Path from 'node:path';
import Tls from 'node:tls';
import Joi from 'joi';
import type { JWK } from 'jose';
import type { Logger } from '../../lib/logging';
import { guardAgent, OutboundBlockedError, OutboundRequestError, type OutboundPolicy, type Resolver } from '../../lib/outbound';
import {
    KmsUnavailableError,
    type KeyAlgorithm,
    type KeyStore,
    type KmsOpenContext,
    type KmsProviderType,
    type PublicJwk
} from '../../lib/kms/types';

export interface HttpKmsOAuth2Auth {
    type: 'oauth2-client-credentials';
    tokenUrl: string;
    clientId: string;
    clientSecret: string;
    scope?: string;
}

export interface HttpKmsMtlsAuth {
    type: 'mtls';
    /** Absolute path of the PEM client certificate (chain). */
    certFile: string;
    /** Absolute path of the PEM private key of the client certificate. */
    keyFile: string;
    /** Absolute path of the PEM CA bundle that signs the KMS server certificate; the system store when absent. */
    caFile?: string;
}

export interface HttpKmsBearerAuth {
    type: 'bearer';
    token: string;
}

export interface HttpKmsNoAuth {
    type: 'none';
}

export type HttpKmsAuth = HttpKmsOAuth2Auth | HttpKmsMtlsAuth | HttpKmsBearerAuth | HttpKmsNoAuth;

/** The fields of an `http` provider entry (spec 2.5). The schema fills keysPath, healthPath and canImport. */
export interface HttpKmsOptions {
    /** http(s) URL without trailing slash, query or fragment. */
    baseUrl: string;
    auth?: HttpKmsAuth;
    keysPath?: string;
    healthPath?: string;
    canImport?: boolean;
}

const AUTH_TYPES = ['oauth2-client-credentials', 'mtls', 'bearer', 'none'] as const;
const DEFAULT_KEYS_PATH = '/keys';
const DEFAULT_HEALTH_PATH = '/health';
/** A KMS answer is a few hundred bytes; a cap keeps a misbehaving server from filling memory. */
const MAX_RESPONSE_BYTES = 64 * 1024;
/** Used when a token response has no expires_in: short enough that a silently revoked token does not linger. */
const DEFAULT_TOKEN_LIFETIME_S = 300;
const TOKEN_REFRESH_MARGIN_MAX_S = 30;

const absolutePath = () => Joi.string()
    .custom((value: string, helpers) => Path.isAbsolute(value) ? value : helpers.error('path.absolute'))
    .messages({ 'path.absolute': '{{#label}} must be an absolute path' });

const httpUrl = () => Joi.string().uri({ scheme: ['http', 'https'] });

const baseUrlSchema = httpUrl()
    .custom((value: string, helpers) => {
        if (value.endsWith('/')) {
            return helpers.error('baseUrl.trailingSlash');
        }
        const url = new URL(value);
        if (url.search || url.hash || value.includes('?') || value.includes('#')) {
            return helpers.error('baseUrl.query');
        }
        // Credentials in the URL would escape secretPaths redaction and end up in answers and exports.
        if (url.username || url.password) {
            return helpers.error('baseUrl.credentials');
        }
        return value;
    })
    .messages({
        'baseUrl.trailingSlash': '{{#label}} must not end with a slash (paths are appended to it)',
        'baseUrl.query': '{{#label}} must not have a query or fragment',
        'baseUrl.credentials': '{{#label}} must not contain credentials; use auth'
    });

const authSchema = Joi.alternatives().conditional('.type', {
    switch: [
        {
            is: 'oauth2-client-credentials',
            then: Joi.object<HttpKmsOAuth2Auth, true>({
                type: Joi.string().valid('oauth2-client-credentials').required(),
                tokenUrl: httpUrl().required(),
                clientId: Joi.string().required(),
                clientSecret: Joi.string().required(),
                scope: Joi.string()
            })
        },
        {
            is: 'mtls',
            then: Joi.object<HttpKmsMtlsAuth, true>({
                type: Joi.string().valid('mtls').required(),
                certFile: absolutePath().required(),
                keyFile: absolutePath().required(),
                caFile: absolutePath()
            })
        },
        {
            is: 'bearer',
            then: Joi.object<HttpKmsBearerAuth, true>({
                type: Joi.string().valid('bearer').required(),
                token: Joi.string().required()
            })
        },
        {
            is: 'none',
            then: Joi.object<HttpKmsNoAuth, true>({ type: Joi.string().valid('none').required() })
        }
    ],
    // Reached for a missing or unknown type: report the type, not the other fields.
    otherwise: Joi.object({ type: Joi.string().valid(...AUTH_TYPES).required() }).unknown(true)
});

export const httpKmsOptionsSchema = Joi.object<HttpKmsOptions, true>({
    baseUrl: baseUrlSchema.required(),
    auth: authSchema,
    keysPath: Joi.string().pattern(/^(\/[^/?#\s]+)+$/).default(DEFAULT_KEYS_PATH)
        .messages({ 'string.pattern.base': '{{#label}} must start with a slash and have no trailing slash, query or fragment' }),
    healthPath: Joi.string().pattern(/^\/[^?#\s]*$/).default(DEFAULT_HEALTH_PATH)
        .messages({ 'string.pattern.base': '{{#label}} must start with a slash and have no query or fragment' }),
    canImport: Joi.boolean().default(false)
}).custom((value: HttpKmsOptions, helpers) =>
    value.auth?.type === 'mtls' && !value.baseUrl.startsWith('https:') ? helpers.error('mtls.https') : value)
    .messages({ 'mtls.https': 'auth type mtls needs an https baseUrl' });

// ---------------------------------------------------------------------------------------------------------------
// Public JWK helpers

const B64URL = /^[A-Za-z0-9_-]+$/;

const decodeCoordinate = (value: unknown): Buffer | undefined => {
    if (typeof value !== 'string' || !B64URL.test(value)) {
        return undefined;
    }
    const bytes = Buffer.from(value, 'base64url');
    return bytes.length === 32 ? bytes : undefined;
};

/**
 * Checks that `value` is an EC P-256 public JWK (a point on the curve, no private part) and answers it reduced to
 * `{kty, crv, x, y}`. Callers that keep public keys themselves (the key chain) can use it before trusting a key
 * that came back from a KMS. Throws an Error naming the problem.
 */
export const toEcP256PublicJwk = (value: unknown): PublicJwk => {
    if (!value || typeof value !== 'object' || Array.isArray(value)) {
        throw new Error('public key is not a JWK object');
    }
    const jwk = value as Record<string, unknown>;
    if ('d' in jwk) {
        throw new Error('public key contains a private part (d)');
    }
    if (jwk.kty !== 'EC' || jwk.crv !== 'P-256') {
        throw new Error('public key is not an EC P-256 JWK');
    }
    if (!decodeCoordinate(jwk.x) || !decodeCoordinate(jwk.y)) {
        throw new Error('public key has malformed x or y coordinates');
    }
    const canonical = { kty: 'EC', crv: 'P-256', x: jwk.x as string, y: jwk.y as string };
    try {
        // Rejects coordinates that are not a point on the curve.
        Crypto.createPublicKey({ key: canonical, format: 'jwk' });
    } catch {
        throw new Error('public key is not a valid P-256 point');
    }
    return canonical;
};

/**
 * True when `signature` (raw r || s, 64 bytes) is a valid ES256 signature of `data` by `publicJwk`; throws like
 * toEcP256PublicJwk for a key that is not an EC P-256 public key.
 */
export const verifyEs256 = (publicJwk: PublicJwk, data: Uint8Array, signature: Uint8Array): boolean => {
    if (signature.length !== 64) {
        return false;
    }
    const key = Crypto.createPublicKey({ key: toEcP256PublicJwk(publicJwk) as Crypto.JsonWebKey, format: 'jwk' });
    return Crypto.verify('sha256', data, { key, dsaEncoding: 'ieee-p1363' }, signature);
};

// ---------------------------------------------------------------------------------------------------------------
// Transport

interface RawResponse {
    status: number;
    body: Buffer;
}

interface RequestBody {
    contentType: string;
    data: Buffer;
}

interface Endpoint {
    url: URL;
    /** Every new connection resolves the host once through the outbound guard and connects to that address. */
    agent: Http.Agent;
}

/**
 * The policy of a provider the operator configured (kms.json files): any scheme and network the URL names. Its
 * connections still go through the guard, so each one goes to the address resolved once for it.
 */
const OPERATOR_POLICY: OutboundPolicy = { allowHttp: true, allowPrivateNetwork: true, allowedHosts: [] };

/** How the store reaches the KMS: its mTLS client material, and DNS (tests answer with chosen addresses). */
export interface HttpKmsTransport {
    tls?: TlsMaterial;
    resolver?: Resolver;
}

const endpoint = (url: URL, agent: Http.Agent, policy: OutboundPolicy, resolver?: Resolver): Endpoint =>
    ({ url, agent: guardAgent(agent, policy, url.href, resolver) });

/** The KMS could not be reached or did not answer in time; `reason` is safe to show. */
class TransportError extends Error {}

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
const exchange = (endpoint: Endpoint, method: string, path: string, headers: Record<string, string>,
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

const pathOf = (url: URL): string => `${url.pathname}${url.search}`;

const parseJsonObject = (body: Buffer): Record<string, unknown> | undefined => {
    try {
        const value: unknown = JSON.parse(body.toString('utf8'));
        return value && typeof value === 'object' && !Array.isArray(value) ? value as Record<string, unknown> : undefined;
    } catch {
        return undefined;
    }
};

const formEncode = (value: string): string => encodeURIComponent(value).replace(/%20/g, '+');

// ---------------------------------------------------------------------------------------------------------------
// OAuth2 client credentials

/** Caches one access token, shares one fetch between concurrent callers, and forgets a token the KMS refused. */
class TokenSource {
    private token: { value: string; refreshAt: number } | undefined;
    private pending: Promise<string> | undefined;
    private readonly endpoint: Endpoint;

    constructor(private readonly auth: HttpKmsOAuth2Auth, private readonly label: string, private readonly timeoutMs: number,
        private readonly log: Logger, policy: OutboundPolicy, resolver?: Resolver) {
        const url = new URL(auth.tokenUrl);
        this.endpoint = endpoint(url, new (url.protocol === 'https:' ? Https : Http).Agent({ keepAlive: false }), policy, resolver);
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
        let res: RawResponse;
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

// ---------------------------------------------------------------------------------------------------------------
// Key store

const SIGNATURE_B64URL = /^[A-Za-z0-9_-]+={0,2}$/;

const checkAlg = (alg: KeyAlgorithm): void => {
    if (alg !== 'ES256') {
        throw new Error(`unsupported key algorithm ${String(alg)}; the http KMS provider supports ES256`);
    }
};

const keySegment = (kid: string): string => {
    // '.' and '..' (also percent-encoded) are dot segments that servers and proxies collapse into another path.
    if (typeof kid !== 'string' || !kid || kid === '.' || kid === '..') {
        throw new Error('invalid kid: a non-empty name other than . and .. is required');
    }
    return encodeURIComponent(kid);
};

const privateEcP256Jwk = (jwk: JWK): { privateJwk: JWK; publicJwk: PublicJwk } => {
    if (jwk?.kty !== 'EC' || jwk.crv !== 'P-256' || typeof jwk.d !== 'string') {
        throw new Error('import needs an EC P-256 private JWK');
    }
    let key: Crypto.KeyObject;
    try {
        key = Crypto.createPrivateKey({ key: { kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y, d: jwk.d } as Crypto.JsonWebKey, format: 'jwk' });
    } catch {
        throw new Error('import needs a valid EC P-256 private JWK');
    }
    const full = key.export({ format: 'jwk' });
    return {
        privateJwk: { kty: 'EC', crv: 'P-256', x: full.x, y: full.y, d: full.d },
        publicJwk: { kty: 'EC', crv: 'P-256', x: full.x!, y: full.y! }
    };
};

export interface TlsMaterial {
    cert: Buffer;
    key: Buffer;
    ca?: Buffer;
}

/**
 * A KeyStore over the spec 2.5 HTTP protocol. Beyond KeyStore it offers `rememberPublicJwk`: the protocol has no
 * way to read a public key back, so `publicJwk(kid)` only knows keys created or imported through this instance or
 * handed to it.
 */
export class HttpKeyStore implements KeyStore {
    // `declare` keeps the property absent (not undefined) when canImport is false, so `'import' in store` is false.
    declare import?: (kid: string, privateJwk: JWK, alg: KeyAlgorithm) => Promise<PublicJwk>;

    private readonly publicKeys = new Map<string, PublicJwk>();
    private readonly endpoint: Endpoint;
    private readonly basePath: string;
    private readonly keysPath: string;
    private readonly healthPath: string;
    private readonly staticHeaders: Record<string, string> = {};
    private readonly tokens: TokenSource | undefined;
    private readonly label: string;
    private readonly timeoutMs: number;

    constructor(options: HttpKmsOptions, ctx: KmsOpenContext, { tls, resolver }: HttpKmsTransport = {}) {
        const url = new URL(options.baseUrl);
        this.label = `KMS provider "${ctx.providerId}"`;
        this.timeoutMs = ctx.timeoutMs > 0 ? ctx.timeoutMs : 10_000;
        this.basePath = url.pathname.replace(/\/$/, '');
        this.keysPath = options.keysPath ?? DEFAULT_KEYS_PATH;
        this.healthPath = options.healthPath ?? DEFAULT_HEALTH_PATH;
        const agent = url.protocol === 'https:'
            ? new Https.Agent({ keepAlive: true, ...(tls ? { cert: tls.cert, key: tls.key, ...(tls.ca ? { ca: tls.ca } : {}) } : {}) })
            : new Http.Agent({ keepAlive: true });
        const policy = ctx.outbound ?? OPERATOR_POLICY;
        this.endpoint = endpoint(url, agent, policy, resolver);
        const auth = options.auth;
        if (auth?.type === 'bearer') {
            this.staticHeaders.authorization = `Bearer ${auth.token}`;
        }
        if (auth?.type === 'oauth2-client-credentials') {
            this.tokens = new TokenSource(auth, this.label, this.timeoutMs, ctx.log, policy, resolver);
        }
        if (options.canImport) {
            this.import = (kid, privateJwk, alg) => this.importKey(kid, privateJwk, alg);
        }
    }

    async create(kid: string, alg: KeyAlgorithm): Promise<PublicJwk> {
        checkAlg(alg);
        const op = `create of key "${kid}"`;
        keySegment(kid); // the kid travels in the body here, but later paths must be able to carry it
        const res = await this.call(op, 'POST', this.keysPath, { kid, alg });
        const publicJwk = this.readPublicJwk(op, this.expectOk(op, res, [200, 201]));
        this.publicKeys.set(kid, publicJwk);
        return { ...publicJwk };
    }

    async sign(kid: string, data: Uint8Array, alg: KeyAlgorithm): Promise<Uint8Array> {
        checkAlg(alg);
        const op = `sign with key "${kid}"`;
        const res = await this.call(op, 'POST', `${this.keysPath}/${keySegment(kid)}/sign`,
            { data: Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64'), alg });
        const signature = this.expectOk(op, res, [200]).signature;
        if (typeof signature !== 'string' || !SIGNATURE_B64URL.test(signature)) {
            throw this.invalid(op, 'signature is not a base64url string');
        }
        const bytes = Buffer.from(signature, 'base64url');
        if (bytes.length !== 64) {
            throw this.invalid(op, `signature has ${bytes.length} bytes, expected 64 (raw r || s)`);
        }
        return Uint8Array.from(bytes);
    }

    async publicJwk(kid: string): Promise<PublicJwk> {
        const known = this.publicKeys.get(kid);
        if (!known) {
            throw new Error(`${this.label}: the http KMS protocol cannot read back the public key of "${kid}"; ` +
                'use the public key stored when it was created or imported');
        }
        return { ...known };
    }

    /** Makes `publicJwk(kid)` answer a public key kept elsewhere (e.g. by the key chain). */
    rememberPublicJwk(kid: string, publicJwk: PublicJwk): void {
        this.publicKeys.set(kid, toEcP256PublicJwk(publicJwk));
    }

    async delete(kid: string): Promise<void> {
        const op = `delete of key "${kid}"`;
        const res = await this.call(op, 'DELETE', `${this.keysPath}/${keySegment(kid)}`);
        // 404: already gone, which is what delete wants.
        if (res.status !== 404) {
            this.expectStatus(op, res, [200, 204]);
        }
        this.publicKeys.delete(kid);
    }

    async health(): Promise<void> {
        const res = await this.call('health check', 'GET', this.healthPath);
        this.expectStatus('health check', res, [200, 204]);
    }

    async close(): Promise<void> {
        this.endpoint.agent.destroy();
        this.tokens?.close();
    }

    private async importKey(kid: string, jwk: JWK, alg: KeyAlgorithm): Promise<PublicJwk> {
        checkAlg(alg);
        const op = `import of key "${kid}"`;
        const { privateJwk, publicJwk: expected } = privateEcP256Jwk(jwk);
        const res = await this.call(op, 'POST', `${this.keysPath}/${keySegment(kid)}/import`, { privateJwk, alg });
        const publicJwk = this.readPublicJwk(op, this.expectOk(op, res, [200, 201]));
        if (publicJwk.x !== expected.x || publicJwk.y !== expected.y) {
            throw this.invalid(op, 'the public key answered does not belong to the imported private key');
        }
        this.publicKeys.set(kid, publicJwk);
        return { ...publicJwk };
    }

    /** Sends one request with auth; availability failures become KmsUnavailableError, a refused token one refetch. */
    private async call(op: string, method: string, path: string, payload?: unknown): Promise<RawResponse> {
        const body = payload === undefined ? undefined : { contentType: 'application/json', data: Buffer.from(JSON.stringify(payload)) };
        for (let attempt = 0; ; attempt++) {
            const headers: Record<string, string> = { accept: 'application/json', ...this.staticHeaders };
            const token = this.tokens ? await this.tokens.get() : undefined;
            if (token) {
                headers.authorization = `Bearer ${token}`;
            }
            let res: RawResponse;
            try {
                res = await exchange(this.endpoint, method, `${this.basePath}${path}`, headers, body, this.timeoutMs);
            } catch (err) {
                if (err instanceof TransportError) {
                    throw new KmsUnavailableError(`${this.label} is unavailable: ${op} failed (${err.message})`);
                }
                // Unusable while the policy forbids the address it resolves to (it may resolve elsewhere later).
                if (err instanceof OutboundBlockedError) {
                    throw new KmsUnavailableError(`${this.label} is unavailable: ${op} refused by the outbound policy (${err.message})`);
                }
                throw this.invalid(op, (err as Error).message);
            }
            if (res.status === 401 && token && attempt === 0) {
                this.tokens!.invalidate(token);
                continue;
            }
            // 408 and 429 are transient like 5xx: the caller should retry later, not fix its request.
            if (res.status >= 500 || res.status === 408 || res.status === 429) {
                throw new KmsUnavailableError(`${this.label} is unavailable: ${op} failed (HTTP ${res.status})`);
            }
            return res;
        }
    }

    private expectStatus(op: string, res: RawResponse, ok: number[]): void {
        if (ok.includes(res.status)) {
            return;
        }
        if (res.status >= 400 && res.status < 500) {
            const hint = res.status === 401 || res.status === 403 ? ', check the provider auth' : '';
            throw new Error(`${this.label} refused ${op} (HTTP ${res.status}${hint})`);
        }
        throw this.invalid(op, `unexpected HTTP ${res.status}`);
    }

    private expectOk(op: string, res: RawResponse, ok: number[]): Record<string, unknown> {
        this.expectStatus(op, res, ok);
        const body = parseJsonObject(res.body);
        if (!body) {
            throw this.invalid(op, 'the body is not a JSON object');
        }
        return body;
    }

    private readPublicJwk(op: string, body: Record<string, unknown>): PublicJwk {
        try {
            return toEcP256PublicJwk(body.publicJwk);
        } catch (err) {
            throw this.invalid(op, (err as Error).message);
        }
    }

    private invalid(op: string, reason: string): Error {
        return new Error(`${this.label} gave an invalid answer to ${op}: ${reason}`);
    }
}

const readPem = async (providerId: string, field: string, file: string): Promise<Buffer> => {
    try {
        return await Fs.readFile(file);
    } catch (err) {
        throw new Error(`KMS provider "${providerId}": cannot read ${field} ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
};

export const httpKmsProvider: KmsProviderType<HttpKmsOptions> = {
    type: 'http',
    optionsSchema: httpKmsOptionsSchema,
    secretPaths: ['auth.clientSecret', 'auth.token'],
    destinationPaths: ['baseUrl', 'auth.tokenUrl'],
    async open(options, ctx) {
        const auth = options.auth;
        if (auth?.type !== 'mtls') {
            return new HttpKeyStore(options, ctx);
        }
        const tls: TlsMaterial = {
            cert: await readPem(ctx.providerId, 'auth.certFile', auth.certFile),
            key: await readPem(ctx.providerId, 'auth.keyFile', auth.keyFile),
            ...(auth.caFile ? { ca: await readPem(ctx.providerId, 'auth.caFile', auth.caFile) } : {})
        };
        try {
            // Fails now on an unparsable PEM or a key that does not match the certificate, not on the first sign.
            Tls.createSecureContext(tls);
        } catch (err) {
            const reason = (err as NodeJS.ErrnoException).code ?? 'unusable PEM';
            throw new Error(`KMS provider "${ctx.providerId}": the mtls certificate, key or CA cannot be used (${reason})`);
        }
        return new HttpKeyStore(options, ctx, { tls });
    }
};
