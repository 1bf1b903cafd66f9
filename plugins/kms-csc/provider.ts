import Crypto from 'node:crypto';
import Joi from 'joi';
import { NotFoundError, ValidationError } from '../../lib/errors';
import { ecdsaDerToRaw, ecP256JwkFromSpki } from '../../lib/kms/jwk';
import { TokenSource } from '../../lib/kms/oauth2-token';
import { httpUrlSchema, serviceUrlSchema } from '../../lib/kms/schemas';
import { invalidAnswer, jsonBody, jsonObjectAnswer, keptAliveEndpoint, kmsExchange, OPERATOR_POLICY, parseJsonObject, type Endpoint, type HttpKmsTransport } from '../../lib/kms/transport';
import { KmsUnavailableError, type KeyAlgorithm, type KeyStore, type KmsOpenContext, type KmsProviderType, type PublicJwk } from '../../lib/kms/types';
import type { OutboundResponse } from '../../lib/outbound';

/*
 * A remote signing service speaking the Cloud Signature Consortium API v2 (e.g. a qualified trust service provider):
 * OAuth2 client credentials at tokenUrl, one credential (configured, or the first of credentials/list), its
 * certificate and key from credentials/info, an optional credentials/authorize for the SAD, and signatures/signHash
 * over the SHA-256 digest. The service never creates keys there: key chains reference the credential
 * (keySource external-reference with the credential's certificate chain).
 */

export const SHA256_OID = '2.16.840.1.101.3.4.2.1';
export const ECDSA_SHA256_OID = '1.2.840.10045.4.3.2';
/** id-ecPublicKey: some services take the key algorithm as signAlgo, with the hash named by hashAlgorithmOID. */
const EC_PUBLIC_KEY_OID = '1.2.840.10045.2.1';

export interface CscAuthData {
    id: string;
    value: string;
}

/** The fields of a `csc` provider entry (spec 2.5); the schema fills apiPath, the OIDs and useAuthorizeEndpoint. */
export interface CscKmsOptions {
    baseUrl: string;
    tokenUrl: string;
    clientId: string;
    clientSecret: string;
    scope?: string;
    credentialId?: string;
    userId?: string;
    apiPath?: string;
    hashAlgorithmOid?: string;
    signAlgorithmOid?: string;
    sad?: string;
    useAuthorizeEndpoint?: boolean;
    authorizeAuthData?: CscAuthData[];
}

export const cscKmsOptionsSchema = Joi.object<CscKmsOptions, true>({
    baseUrl: serviceUrlSchema().required(),
    tokenUrl: httpUrlSchema().required(),
    clientId: Joi.string().required(),
    clientSecret: Joi.string().required(),
    scope: Joi.string(),
    credentialId: Joi.string().max(255),
    userId: Joi.string().max(255),
    apiPath: Joi.string().pattern(/^(\/[^/?#\s]+)+$/).default('/csc/v2')
        .messages({ 'string.pattern.base': '{{#label}} must start with a slash and have no trailing slash, query or fragment' }),
    // ES256 is the only signature the key stores make: SHA-256, ECDSA.
    hashAlgorithmOid: Joi.string().valid(SHA256_OID).default(SHA256_OID)
        .messages({ 'any.only': `{{#label}} must be the SHA-256 OID ${SHA256_OID}: the service signs ES256 only` }),
    signAlgorithmOid: Joi.string().valid(ECDSA_SHA256_OID, EC_PUBLIC_KEY_OID).default(ECDSA_SHA256_OID)
        .messages({ 'any.only': `{{#label}} must be ecdsa-with-SHA256 (${ECDSA_SHA256_OID}) or id-ecPublicKey (${EC_PUBLIC_KEY_OID}): the service signs ES256 only` }),
    sad: Joi.string(),
    useAuthorizeEndpoint: Joi.boolean().default(false),
    authorizeAuthData: Joi.array().items(Joi.object<CscAuthData, true>({ id: Joi.string().required(), value: Joi.string().required() })).min(1)
}).custom((value: CscKmsOptions, helpers) =>
    // Stored without effect otherwise: the auth data only goes with credentials/authorize.
    value.authorizeAuthData && (!value.useAuthorizeEndpoint || value.sad) ? helpers.error('csc.authData') : value)
    .messages({ 'csc.authData': '"authorizeAuthData" is sent only by credentials/authorize: it needs useAuthorizeEndpoint true and no sad' });


interface CredentialInfo {
    publicJwk: PublicJwk;
    /** base64 DER, leaf first, as credentials/info answers them. */
    certificates: string[];
}

/** The service's own error code and description, when they are short fixed texts; anything else is left out. */
const cscError = (res: OutboundResponse): string => {
    const body = parseJsonObject(res.body);
    const parts = [body?.error, body?.error_description].filter((p): p is string => typeof p === 'string' && /^[\w .,:;'"()/-]{1,200}$/.test(p));
    return parts.join(': ');
};

export class CscKeyStore implements KeyStore {
    private readonly endpoint: Endpoint;
    private readonly basePath: string;
    private readonly tokens: TokenSource;
    private readonly label: string;
    private readonly timeoutMs: number;
    private credentialId: Promise<string> | undefined;
    private readonly infos = new Map<string, Promise<CredentialInfo>>();

    constructor(private readonly options: CscKmsOptions, private readonly ctx: KmsOpenContext, transport: HttpKmsTransport = {}) {
        const url = new URL(options.baseUrl);
        this.label = `KMS provider "${ctx.providerId}"`;
        this.timeoutMs = ctx.timeoutMs > 0 ? ctx.timeoutMs : 10_000;
        this.basePath = `${url.pathname.replace(/\/$/, '')}${options.apiPath ?? '/csc/v2'}`;
        const policy = ctx.outbound ?? OPERATOR_POLICY;
        this.endpoint = keptAliveEndpoint(url, policy, transport);
        this.tokens = new TokenSource({ tokenUrl: options.tokenUrl, clientId: options.clientId, clientSecret: options.clientSecret, ...(options.scope ? { scope: options.scope } : {}) },
            this.label, this.timeoutMs, ctx.log, policy, transport.resolver);
    }

    async create(_kid: string, _alg: KeyAlgorithm): Promise<PublicJwk> {
        throw new ValidationError(`KMS provider ${this.ctx.providerId} (csc) never creates keys: reference its credential with keySource {type: external-reference, provider, externalKeyId: the credential ID, publicJwk, certificateChain: the credential's certificates}`,
            [{ path: 'keySource', message: 'must be an external-reference to the credential of a csc provider' }]);
    }

    async sign(kid: string, data: Uint8Array, alg: KeyAlgorithm): Promise<Uint8Array> {
        if (alg !== 'ES256') {
            throw new ValidationError(`Algorithm ${String(alg)} is not supported by the csc provider ${this.ctx.providerId}`);
        }
        const credentialID = await this.own(kid);
        const op = `sign with credential "${kid}"`;
        const hash = Crypto.createHash('sha256').update(data).digest('base64');
        const sad = this.options.sad ?? (this.options.useAuthorizeEndpoint ? await this.authorize(credentialID, hash) : undefined);
        const body = await this.post(op, '/signatures/signHash', {
            credentialID,
            ...(sad ? { SAD: sad } : {}),
            hashes: [hash],
            hashAlgorithmOID: this.options.hashAlgorithmOid ?? SHA256_OID,
            signAlgo: this.options.signAlgorithmOid ?? ECDSA_SHA256_OID
        }, kid);
        const signature = Array.isArray(body.signatures) ? body.signatures[0] : undefined;
        if (typeof signature !== 'string' || !/^[A-Za-z0-9+/]+={0,2}$/.test(signature)) {
            throw invalidAnswer(this.label, op, 'no base64 signature');
        }
        const bytes = Buffer.from(signature, 'base64');
        // CSC leaves the encoding to the signature algorithm: X.509's DER for ECDSA, though some services answer r || s.
        if (bytes.length === 64) {
            return Uint8Array.from(bytes);
        }
        try {
            return ecdsaDerToRaw(bytes);
        } catch (err) {
            throw invalidAnswer(this.label, op, (err as Error).message);
        }
    }

    async publicJwk(kid: string): Promise<PublicJwk> {
        return { ...(await this.info(await this.own(kid))).publicJwk };
    }

    /** The credential's certificates (base64 DER, leaf first), as a key chain referencing it carries them. */
    async certificates(kid: string): Promise<string[]> {
        return [...(await this.info(await this.own(kid))).certificates];
    }

    /** The credential belongs to the trust service: a key chain that referenced it leaves it there. */
    async delete(_kid: string): Promise<void> {
        return undefined;
    }

    /** The token endpoint accepts the client, and the service answers the credential's info with an enabled key. */
    async health(): Promise<void> {
        const credentialID = await this.credential();
        this.infos.delete(credentialID);
        await this.info(credentialID);
    }

    async close(): Promise<void> {
        this.endpoint.agent.destroy();
        this.tokens.close();
    }

    /** The credential this provider signs with: credentialId, or the first credentials/list answers. */
    private credential(): Promise<string> {
        if (this.options.credentialId) {
            return Promise.resolve(this.options.credentialId);
        }
        this.credentialId ??= this.post('list of credentials', '/credentials/list', { ...(this.options.userId ? { userID: this.options.userId } : {}), maxResults: 1 }).then((body) => {
            const first = Array.isArray(body.credentialIDs) ? body.credentialIDs[0] : undefined;
            if (typeof first !== 'string' || !first) {
                throw new KmsUnavailableError(`${this.label} is unavailable: the signing service lists no credential${this.options.userId ? ' for the userId' : ''}`);
            }
            return first;
        });
        this.credentialId.catch(() => {
            this.credentialId = undefined;
        });
        return this.credentialId;
    }

    private async own(kid: string): Promise<string> {
        const credentialID = await this.credential();
        if (kid !== credentialID) {
            throw new NotFoundError(`Key ${kid} not found in KMS provider ${this.ctx.providerId}: it signs with the credential ${credentialID} only`);
        }
        return credentialID;
    }

    private info(credentialID: string): Promise<CredentialInfo> {
        let info = this.infos.get(credentialID);
        if (!info) {
            info = this.readInfo(credentialID);
            info.catch(() => this.infos.delete(credentialID));
            this.infos.set(credentialID, info);
        }
        return info;
    }

    private async readInfo(credentialID: string): Promise<CredentialInfo> {
        const op = `info of credential "${credentialID}"`;
        const body = await this.post(op, '/credentials/info', { credentialID, certificates: 'chain', certInfo: false, authInfo: false }, credentialID);
        const key = body.key as { status?: unknown } | undefined;
        if (key?.status !== undefined && key.status !== 'enabled') {
            throw new KmsUnavailableError(`${this.label} is unavailable: the key of credential "${credentialID}" is ${String(key.status)}`);
        }
        const certificates = (body.cert as { certificates?: unknown } | undefined)?.certificates;
        if (!Array.isArray(certificates) || !certificates.length || !certificates.every((c) => typeof c === 'string' && /^[A-Za-z0-9+/]+={0,2}$/.test(c))) {
            throw invalidAnswer(this.label, op, 'no certificates');
        }
        let publicJwk: PublicJwk;
        try {
            publicJwk = ecP256JwkFromSpki(new Crypto.X509Certificate(Buffer.from(certificates[0] as string, 'base64')).publicKey.export({ format: 'der', type: 'spki' }));
        } catch (err) {
            throw new ValidationError(`Credential ${credentialID} of KMS provider ${this.ctx.providerId} cannot sign ES256: ${(err as Error).message}`);
        }
        return { publicJwk, certificates: certificates as string[] };
    }

    /** credentials/authorize: the SAD for one signature over `hash`. */
    private async authorize(credentialID: string, hash: string): Promise<string> {
        const body = await this.post(`authorization of credential "${credentialID}"`, '/credentials/authorize', {
            credentialID,
            numSignatures: 1,
            hashes: [hash],
            hashAlgorithmOID: this.options.hashAlgorithmOid ?? SHA256_OID,
            ...(this.options.authorizeAuthData ? { authData: this.options.authorizeAuthData } : {})
        }, undefined, true);
        if (typeof body.SAD !== 'string' || !body.SAD) {
            throw invalidAnswer(this.label, 'authorization', 'no SAD');
        }
        return body.SAD;
    }

    /**
     * One CSC call with the access token: a refused token is fetched again once; refused client credentials, a refused
     * token, a refused authorization, unreachable or failing service become KmsUnavailableError (503 naming the provider).
     */
    private async post(op: string, path: string, payload: Record<string, unknown>, kid?: string, authorizing = false): Promise<Record<string, unknown>> {
        for (let attempt = 0; ; attempt++) {
            let token: string;
            try {
                token = await this.tokens.get();
            } catch (err) {
                throw err instanceof KmsUnavailableError ? err : new KmsUnavailableError((err as Error).message);
            }
            const res = await kmsExchange(this.endpoint, this.label, op, 'POST', `${this.basePath}${path}`,
                { accept: 'application/json', authorization: `Bearer ${token}` }, jsonBody(payload), this.timeoutMs);
            if (res.status === 401 && attempt === 0) {
                this.tokens.invalidate(token);
                continue;
            }
            const detail = cscError(res);
            if (res.status === 401 || res.status === 403) {
                throw new KmsUnavailableError(`${this.label} is unavailable: the signing service refused the access token for ${op} (HTTP ${res.status}${detail ? `, ${detail}` : ''})`);
            }
            if (res.status >= 500 || res.status === 408 || res.status === 429) {
                throw new KmsUnavailableError(`${this.label} is unavailable: ${op} failed (HTTP ${res.status})`);
            }
            if (res.status !== 200) {
                if (kid !== undefined && /credentialID/i.test(detail)) {
                    throw new NotFoundError(`Credential ${kid} not found at KMS provider ${this.ctx.providerId}`);
                }
                // A refused SAD or authorization data: the provider's configuration no longer authorizes signatures.
                if (authorizing || /SAD|authData/i.test(detail)) {
                    throw new KmsUnavailableError(`${this.label} is unavailable: the signing service refused the authorization for ${op} (HTTP ${res.status}${detail ? `, ${detail}` : ''}); check sad or authorizeAuthData`);
                }
                throw new Error(`${this.label} refused ${op} (HTTP ${res.status}${detail ? `, ${detail}` : ''})`);
            }
            return jsonObjectAnswer(this.label, op, res);
        }
    }
}

export const cscKmsProvider: KmsProviderType<CscKmsOptions> = {
    type: 'csc',
    optionsSchema: cscKmsOptionsSchema,
    secretPaths: ['clientSecret', 'sad', 'authorizeAuthData.*.value'],
    destinationPaths: ['baseUrl', 'tokenUrl'],
    async open(options, ctx) {
        return new CscKeyStore(options, ctx);
    }
};
