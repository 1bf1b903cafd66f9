import Fs from 'node:fs/promises';
import Path from 'node:path';
import Tls from 'node:tls';
import Joi from 'joi';
import type { JWK } from 'jose';
import type { OutboundResponse } from '../../lib/outbound';
import {
    KmsUnavailableError,
    type KeyAlgorithm,
    type KeyStore,
    type KmsOpenContext,
    type KmsProviderType,
    type PublicJwk
} from '../../lib/kms/types';
import { httpUrlSchema, serviceUrlSchema } from '../../lib/kms/schemas';
import { privateEcP256Jwk, toEcP256PublicJwk } from '../../lib/kms/jwk';
import { TokenSource } from '../../lib/kms/oauth2-token';
import { jsonBody, keptAliveEndpoint, kmsExchange, OPERATOR_POLICY, parseJsonObject, type Endpoint, type HttpKmsTransport, type TlsMaterial } from '../../lib/kms/transport';

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

const absolutePath = () => Joi.string()
    .custom((value: string, helpers) => Path.isAbsolute(value) ? value : helpers.error('path.absolute'))
    .messages({ 'path.absolute': '{{#label}} must be an absolute path' });

const authSchema = Joi.alternatives().conditional('.type', {
    switch: [
        {
            is: 'oauth2-client-credentials',
            then: Joi.object<HttpKmsOAuth2Auth, true>({
                type: Joi.string().valid('oauth2-client-credentials').required(),
                tokenUrl: httpUrlSchema().required(),
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
    baseUrl: serviceUrlSchema().required(),
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
        const policy = ctx.outbound ?? OPERATOR_POLICY;
        this.endpoint = keptAliveEndpoint(url, policy, { tls, resolver });
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
    private async call(op: string, method: 'GET' | 'POST' | 'DELETE', path: string, payload?: unknown): Promise<OutboundResponse> {
        const body = payload === undefined ? undefined : jsonBody(payload);
        for (let attempt = 0; ; attempt++) {
            const headers: Record<string, string> = { accept: 'application/json', ...this.staticHeaders };
            const token = this.tokens ? await this.tokens.get() : undefined;
            if (token) {
                headers.authorization = `Bearer ${token}`;
            }
            const res = await kmsExchange(this.endpoint, this.label, op, method, `${this.basePath}${path}`, headers, body, this.timeoutMs);
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

    private expectStatus(op: string, res: OutboundResponse, ok: number[]): void {
        if (ok.includes(res.status)) {
            return;
        }
        if (res.status >= 400 && res.status < 500) {
            const hint = res.status === 401 || res.status === 403 ? ', check the provider auth' : '';
            throw new Error(`${this.label} refused ${op} (HTTP ${res.status}${hint})`);
        }
        throw this.invalid(op, `unexpected HTTP ${res.status}`);
    }

    private expectOk(op: string, res: OutboundResponse, ok: number[]): Record<string, unknown> {
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
