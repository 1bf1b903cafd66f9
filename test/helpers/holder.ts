import Crypto from 'node:crypto';
import { cborEncode, DataItem, DeviceResponse, MDoc, parseIssuerSigned, type PresentationDefinition } from '@animo-id/mdoc';
import { HashAlgorithm, type CallbackContext, type JweEncryptor, type Jwk, type JwtSigner } from '@openid4vc/oauth2';
import { Openid4vpClient, parseOpenid4vpAuthorizationRequest, type ResolvedOpenid4vpAuthorizationRequest } from '@openid4vc/openid4vp';
import { setGlobalConfig } from '@openid4vc/utils';
import { SDJwtVcInstance } from '@sd-jwt/sd-jwt-vc';
import * as Jose from 'jose';
import { mdocContext } from '../../lib/mdoc/context';

/**
 * A small OpenID4VP holder wallet for end-to-end tests, built on @openid4vc/openid4vp (the library real wallets use)
 * with jose and node:crypto behind its callbacks:
 *
 * - `resolve()` takes the `openid4vp://` link, fetches the request object (GET, or POST for request_uri_method=post)
 *   and lets the library validate it; our `verifyJwt` callback checks the JAR signature with the x5c leaf and that
 *   client_id is `x509_hash:` + base64url SHA-256 of the leaf DER;
 * - `sdJwt()` / `mdoc()` build presentations for the DCQL query of a request (SD-JWT: disclose the requested claims,
 *   KB-JWT with nonce, aud, iat, sd_hash and transaction_data_hashes; mdoc: a DeviceResponse over the OpenID4VP 1.0
 *   SessionTranscript), each with knobs to break exactly one thing;
 * - `respond()` encrypts with ECDH-ES to the client_metadata key (A128GCM or A256GCM) and POSTs `response=<jwe>`
 *   (direct_post.jwt) through the library; `encrypt()` / `post()` do the same by hand; `decline()` sends an OAuth
 *   error response as a form or inside a JWE.
 *
 * Nothing here uses the service's verification code; only the mdoc crypto callbacks (lib/mdoc/context) are shared,
 * and they hold no logic beyond node:crypto calls.
 */

// The service under test runs on http://127.0.0.1: the library accepts http URLs only when told so.
setGlobalConfig({ allowInsecureUrls: true });

const sha256 = (data: string | Uint8Array): Buffer => Crypto.createHash('sha256').update(data).digest();
const b64url = (data: string | Uint8Array): string => Buffer.from(data).toString('base64url');

export type ClaimPath = Array<string | number | null>;

export interface HolderKey {
    privateKey: Jose.CryptoKey;
    publicJwk: Jose.JWK;
    privateJwk: Jose.JWK;
}

export const newHolderKey = async (): Promise<HolderKey> => {
    const { privateKey, publicKey } = await Jose.generateKeyPair('ES256', { extractable: true });
    const { kty, crv, x, y } = await Jose.exportJWK(publicKey);
    return { privateKey, publicJwk: { kty: kty!, crv: crv!, x: x!, y: y! }, privateJwk: await Jose.exportJWK(privateKey) };
};

/** A resolved and verified request, with the parts tests look at. */
export interface HolderRequest {
    link: string;
    requestUri: string;
    /** The signed request object as the wallet received it. */
    jar: string;
    header: Record<string, unknown>;
    payload: Record<string, any>;
    clientId: string;
    responseUri: string;
    nonce: string;
    state: string;
    /** The verifier's response encryption key from client_metadata. */
    encryptionJwk: Jose.JWK;
    resolved: ResolvedOpenid4vpAuthorizationRequest;
}

export interface WalletAnswer {
    status: number;
    body: any;
    headers: Record<string, string>;
}

export interface SdJwtOptions {
    /** Claim paths to disclose; default: the claim paths of the credential query. */
    disclose?: ClaimPath[];
    /** Leave the KB-JWT out. */
    noKeyBinding?: boolean;
    nonce?: string;
    aud?: string;
    /** Seconds since the epoch. */
    iat?: number;
    sdHash?: string;
    /** Default: SHA-256 of every transaction_data entry of the request that names the query. */
    transactionDataHashes?: string[];
    /** Sign the KB-JWT with this key instead of the holder key. */
    kbKey?: Jose.CryptoKey;
}

export interface MdocOptions {
    /** [namespace, element] pairs; default: the claim paths of the credential query. */
    elements?: Array<[string, string]>;
    clientId?: string;
    nonce?: string;
    responseUri?: string;
    /** Raw SHA-256 JWK thumbprint of the encryption key; default: the request's key. null: unencrypted handover. */
    jwkThumbprint?: Uint8Array | null;
}

/** What the holder holds for a credential query: an SD-JWT VC and its key, or an mdoc IssuerSigned and its device key. */
export type HeldCredential =
    | { format: 'dc+sd-jwt'; credential: string; key: HolderKey; options?: SdJwtOptions }
    | { format: 'mso_mdoc'; issuerSigned: string; key: HolderKey; options?: MdocOptions };

const ENC_VALUES = ['A128GCM', 'A256GCM'] as const;
export type ContentEncryption = (typeof ENC_VALUES)[number];

/**
 * The CBOR SessionTranscript of OpenID4VP 1.0 (B.2.6.1, redirects), written out here independently of the service:
 * [null, null, ["OpenID4VPHandover", SHA-256(cbor([client_id, nonce, jwkThumbprint / null, response_uri]))]].
 */
export const openid4vpTranscript = (clientId: string, nonce: string, jwkThumbprint: Uint8Array | null, responseUri: string): Uint8Array => {
    const info = cborEncode([clientId, nonce, jwkThumbprint ? new Uint8Array(jwkThumbprint) : null, responseUri]);
    return cborEncode([null, null, ['OpenID4VPHandover', new Uint8Array(sha256(info))]]);
};

const frameOf = (paths: ClaimPath[]): Record<string, unknown> => {
    const frame: Record<string, unknown> = {};
    for (const path of paths) {
        let node = frame;
        path.forEach((segment, index) => {
            const key = String(segment);
            if (index === path.length - 1) {
                node[key] = true;
            }
            else {
                node[key] = typeof node[key] === 'object' ? node[key] : {};
                node = node[key] as Record<string, unknown>;
            }
        });
    }
    return frame;
};

const sanNames = (certificate: string): { sanDnsNames: string[]; sanUriNames: string[] } => {
    const san = new Crypto.X509Certificate(Buffer.from(certificate, 'base64')).subjectAltName ?? '';
    const names = san.split(',').map((s) => s.trim());
    return {
        sanDnsNames: names.filter((n) => n.startsWith('DNS:')).map((n) => n.slice(4)),
        sanUriNames: names.filter((n) => n.startsWith('URI:')).map((n) => n.slice(4))
    };
};

export class Holder {
    readonly client: Openid4vpClient;
    /** Every HTTP exchange of the library, with the answer's status and headers. */
    readonly exchanges: Array<{ method: string; url: string; status: number; headers: Record<string, string> }> = [];
    /** Compact request objects whose signature our callback verified, by nonce. */
    private readonly verifiedJars = new Map<string, string>();
    private readonly mdocCrypto = mdocContext(async (data, jwk) =>
        new Uint8Array(Crypto.sign('sha256', data, { key: Crypto.createPrivateKey({ key: jwk as Crypto.JsonWebKey, format: 'jwk' }), dsaEncoding: 'ieee-p1363' })));

    constructor() {
        const callbacks: Omit<CallbackContext, 'generateRandom' | 'clientAuthentication'> = {
            fetch: (input, init) => this.fetch(input as string | URL, init),
            hash: (data, alg) => new Uint8Array(Crypto.createHash(alg === HashAlgorithm.Sha384 ? 'sha384' : alg === HashAlgorithm.Sha512 ? 'sha512' : 'sha256').update(data).digest()),
            verifyJwt: (signer, jwt) => this.verifyJwt(signer, jwt),
            encryptJwe: (encryptor, data) => this.encryptJwe(encryptor, data),
            signJwt: () => {
                throw new Error('The test holder does not sign JWTs through the library');
            },
            decryptJwe: () => {
                throw new Error('The test holder does not decrypt JWEs');
            },
            getX509CertificateMetadata: sanNames
        };
        this.client = new Openid4vpClient({ callbacks });
    }

    private async fetch(input: string | URL, init?: RequestInit): Promise<Response> {
        const response = await fetch(input, init);
        this.exchanges.push({ method: (init?.method ?? 'GET').toUpperCase(), url: String(input), status: response.status, headers: Object.fromEntries(response.headers.entries()) });
        return response;
    }

    /** The JAR: signed by the x5c leaf, and client_id is x509_hash: + base64url SHA-256 of that leaf's DER. */
    private async verifyJwt(signer: JwtSigner, jwt: { header: Record<string, unknown>; payload: Record<string, unknown>; compact: string }): Promise<{ verified: true; signerJwk: Jwk } | { verified: false }> {
        if (signer.method !== 'x5c' || !signer.x5c.length) {
            return { verified: false };
        }
        const leaf = signer.x5c[0]!;
        const expectedClientId = `x509_hash:${b64url(sha256(Buffer.from(leaf, 'base64')))}`;
        if (jwt.payload.client_id !== expectedClientId) {
            return { verified: false };
        }
        try {
            const key = await Jose.importX509(`-----BEGIN CERTIFICATE-----\n${leaf}\n-----END CERTIFICATE-----`, signer.alg);
            await Jose.compactVerify(jwt.compact, key, { algorithms: ['ES256'] });
            this.verifiedJars.set(String(jwt.payload.nonce), jwt.compact);
            return { verified: true, signerJwk: await Jose.exportJWK(key) as Jwk };
        }
        catch {
            return { verified: false };
        }
    }

    private async encryptJwe(encryptor: JweEncryptor, data: string): Promise<{ encryptionJwk: Jwk; jwe: string }> {
        const jwk = encryptor.publicJwk as Jose.JWK;
        const builder = new Jose.CompactEncrypt(new TextEncoder().encode(data))
            .setProtectedHeader({ alg: encryptor.alg, enc: encryptor.enc, ...(jwk.kid ? { kid: jwk.kid } : {}) });
        if (encryptor.apu || encryptor.apv) {
            builder.setKeyManagementParameters({
                ...(encryptor.apu ? { apu: Buffer.from(encryptor.apu, 'base64url') } : {}),
                ...(encryptor.apv ? { apv: Buffer.from(encryptor.apv, 'base64url') } : {})
            });
        }
        return { encryptionJwk: encryptor.publicJwk, jwe: await builder.encrypt(await Jose.importJWK(jwk, encryptor.alg)) };
    }

    /** Resolves an `openid4vp://` link; request_uri_method=post in the link (or `method: 'post'`) fetches by POST. */
    async resolve(link: string, options: { method?: 'get' | 'post' } = {}): Promise<HolderRequest> {
        const parsed = parseOpenid4vpAuthorizationRequest({ authorizationRequest: link });
        const params: Record<string, unknown> = { ...(parsed.params as Record<string, unknown>), ...(options.method ? { request_uri_method: options.method } : {}) };
        const resolved = await this.client.resolveOpenId4vpAuthorizationRequest({ authorizationRequestPayload: params as never });
        if (!resolved.jar) {
            throw new Error('The request was not a signed request object');
        }
        const payload = resolved.authorizationRequestPayload as Record<string, any>;
        const jar = this.verifiedJars.get(String(payload.nonce));
        if (!jar) {
            throw new Error('The request object signature was not verified');
        }
        const jwks = payload.client_metadata?.jwks?.keys as Jose.JWK[] | undefined;
        if (!jwks?.length) {
            throw new Error('client_metadata has no encryption key');
        }
        return {
            link,
            requestUri: String(params.request_uri),
            jar,
            header: Jose.decodeProtectedHeader(jar) as Record<string, unknown>,
            payload,
            clientId: String(payload.client_id),
            responseUri: String(payload.response_uri),
            nonce: String(payload.nonce),
            state: String(payload.state),
            encryptionJwk: jwks[0]!,
            resolved
        };
    }

    private query(request: HolderRequest, queryId: string): { format: string; claims?: Array<{ path: ClaimPath }>; meta: Record<string, any> } {
        const query = (request.payload.dcql_query?.credentials as Array<{ id: string }> | undefined)?.find((c) => c.id === queryId);
        if (!query) {
            throw new Error(`The request has no credential query ${queryId}`);
        }
        return query as never;
    }

    /** The SHA-256 hashes (base64url) of the request's transaction_data entries that name `queryId`. */
    transactionDataHashes(request: HolderRequest, queryId: string): string[] {
        return ((request.payload.transaction_data ?? []) as string[])
            .filter((encoded) => (JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8')).credential_ids as string[]).includes(queryId))
            .map((encoded) => b64url(sha256(encoded)));
    }

    /** An SD-JWT VC presentation for credential query `queryId`: `<jwt>~<disclosures>~<KB-JWT>`. */
    async sdJwt(request: HolderRequest, queryId: string, credential: string, key: HolderKey, options: SdJwtOptions = {}): Promise<string> {
        const paths = options.disclose ?? (this.query(request, queryId).claims ?? []).map((c) => c.path);
        const sdjwt = new SDJwtVcInstance({ hasher: (data: string | ArrayBuffer) => new Uint8Array(sha256(typeof data === 'string' ? data : new Uint8Array(data))), hashAlg: 'sha-256' });
        const withoutKb = await sdjwt.present(credential, frameOf(paths) as never);
        if (options.noKeyBinding) {
            return withoutKb;
        }
        const hashes = options.transactionDataHashes ?? this.transactionDataHashes(request, queryId);
        const kb = await new Jose.SignJWT({
            iat: options.iat ?? Math.floor(Date.now() / 1000),
            aud: options.aud ?? request.clientId,
            nonce: options.nonce ?? request.nonce,
            sd_hash: options.sdHash ?? b64url(sha256(withoutKb)),
            ...(hashes.length ? { transaction_data_hashes: hashes, transaction_data_hashes_alg: 'sha-256' } : {})
        }).setProtectedHeader({ typ: 'kb+jwt', alg: 'ES256' }).sign(options.kbKey ?? key.privateKey);
        return `${withoutKb}${kb}`;
    }

    /** The raw RFC 7638 SHA-256 thumbprint of the request's encryption key (what the mdoc handover binds). */
    async thumbprint(request: HolderRequest): Promise<Uint8Array> {
        return new Uint8Array(Buffer.from(await Jose.calculateJwkThumbprint(request.encryptionJwk, 'sha256'), 'base64url'));
    }

    /** A base64url DeviceResponse for mso_mdoc credential query `queryId`, device-signed over the OpenID4VP transcript. */
    async mdoc(request: HolderRequest, queryId: string, issuerSigned: string, deviceKey: HolderKey, options: MdocOptions = {}): Promise<string> {
        const query = this.query(request, queryId);
        const docType = String(query.meta.doctype_value);
        const elements = options.elements ?? (query.claims ?? []).map((c) => [String(c.path[0]), String(c.path[1])] as [string, string]);
        const document = parseIssuerSigned(new Uint8Array(Buffer.from(issuerSigned, 'base64url')), docType);
        const definition: PresentationDefinition = {
            id: request.nonce,
            input_descriptors: [{
                id: docType,
                format: { mso_mdoc: { alg: ['ES256'] } },
                constraints: { limit_disclosure: 'required', fields: elements.map(([ns, element]) => ({ path: [`$['${ns}']['${element}']`], intent_to_retain: false })) }
            }]
        };
        const thumbprint = options.jwkThumbprint === undefined ? await this.thumbprint(request) : options.jwkThumbprint;
        const transcript = openid4vpTranscript(options.clientId ?? request.clientId, options.nonce ?? request.nonce, thumbprint, options.responseUri ?? request.responseUri);
        const response = await DeviceResponse.from(new MDoc([document]))
            .usingPresentationDefinition(definition)
            .usingSessionTranscriptBytes(cborEncode(new DataItem({ buffer: transcript })))
            .authenticateWithSignature(deviceKey.privateJwk as never, 'ES256')
            .sign({ crypto: this.mdocCrypto.crypto, cose: this.mdocCrypto.cose } as never);
        return b64url(response.encode());
    }

    /** The vp_token for the request's DCQL query from the credentials held for (some of) its query ids. */
    async vpToken(request: HolderRequest, held: Record<string, HeldCredential | HeldCredential[]>): Promise<Record<string, string[]>> {
        const token: Record<string, string[]> = {};
        for (const [queryId, value] of Object.entries(held)) {
            token[queryId] = await Promise.all((Array.isArray(value) ? value : [value]).map((c) => c.format === 'dc+sd-jwt'
                ? this.sdJwt(request, queryId, c.credential, c.key, c.options)
                : this.mdoc(request, queryId, c.issuerSigned, c.key, c.options)));
        }
        return token;
    }

    /**
     * The whole response through the library: an encrypted direct_post.jwt authorization response (ECDH-ES to the
     * client_metadata key, `enc` as asked), POSTed to response_uri.
     */
    async respond(request: HolderRequest, vpToken: Record<string, string[]>, options: { enc?: ContentEncryption } = {}): Promise<WalletAnswer & { jwe: string }> {
        const enc = options.enc ?? 'A256GCM';
        const created = await this.client.createOpenid4vpAuthorizationResponse({
            authorizationRequestPayload: request.resolved.authorizationRequestPayload,
            authorizationResponsePayload: { vp_token: vpToken as never },
            jarm: {
                encryption: { nonce: b64url(Crypto.randomBytes(16)) },
                serverMetadata: { authorization_signing_alg_values_supported: [], authorization_encryption_alg_values_supported: ['ECDH-ES'], authorization_encryption_enc_values_supported: [enc] }
            }
        });
        if (!created.jarm) {
            throw new Error('The library did not encrypt the response');
        }
        const { response } = await this.client.submitOpenid4vpAuthorizationResponse({
            authorizationRequestPayload: request.resolved.authorizationRequestPayload as never,
            authorizationResponsePayload: created.authorizationResponsePayload,
            jarm: { responseJwt: created.jarm.responseJwt }
        });
        return { ...await answerOf(response), jwe: created.jarm.responseJwt };
    }

    /** A JWE (ECDH-ES, `enc`) of `payload` to the request's encryption key, by hand. */
    async encrypt(request: HolderRequest, payload: Record<string, unknown>, options: { enc?: ContentEncryption; jwk?: Jose.JWK } = {}): Promise<string> {
        const jwk = options.jwk ?? request.encryptionJwk;
        return new Jose.CompactEncrypt(new TextEncoder().encode(JSON.stringify(payload)))
            .setProtectedHeader({ alg: 'ECDH-ES', enc: options.enc ?? 'A128GCM', ...(jwk.kid ? { kid: jwk.kid } : {}) })
            .encrypt(await Jose.importJWK({ ...jwk, alg: 'ECDH-ES' }, 'ECDH-ES'));
    }

    /** A form POST to the request's response_uri (or `url`). */
    async post(request: HolderRequest | { responseUri: string }, form: Record<string, string>): Promise<WalletAnswer> {
        const response = await this.fetch(request.responseUri, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: new URLSearchParams(form).toString()
        });
        return answerOf(response);
    }

    /** `response=<jwe>` of an encrypted vp_token response (with the request's state). */
    async postEncrypted(request: HolderRequest, vpToken: Record<string, unknown>, options: { enc?: ContentEncryption } = {}): Promise<WalletAnswer & { jwe: string }> {
        const jwe = await this.encrypt(request, { vp_token: vpToken, state: request.state }, options);
        return { ...await this.post(request, { response: jwe }), jwe };
    }

    /** The wallet declines: an OAuth error response, as form fields or inside a JWE (direct_post.jwt). */
    async decline(request: HolderRequest, error: string, description: string, options: { encrypted?: boolean } = {}): Promise<WalletAnswer> {
        const fields = { error, error_description: description, state: request.state };
        return options.encrypted ? this.post(request, { response: await this.encrypt(request, fields) }) : this.post(request, fields);
    }
}

const answerOf = async (response: Response): Promise<WalletAnswer> => {
    const text = await response.text();
    let body: unknown = text;
    try {
        body = text ? JSON.parse(text) : undefined;
    }
    catch {
        // kept as text
    }
    return { status: response.status, body, headers: Object.fromEntries(response.headers.entries()) };
};

/** base64url SHA-256 of the DER of a base64 certificate: the x509_hash client identifier value. */
export const x509Hash = (certificate: string): string => b64url(sha256(Buffer.from(certificate, 'base64')));

export { ENC_VALUES };
