import Crypto from 'node:crypto';
import { cborEncode, COSEKey, parseIssuerSigned } from '@animo-id/mdoc';
import { clientAuthenticationAnonymous, HashAlgorithm, type CallbackContext, type Jwk, type JwtSigner, type RequestDpopOptions } from '@openid4vc/oauth2';
import { Openid4vciClient, setGlobalConfig, type CredentialOfferObject, type IssuerMetadataResult, type NotificationEvent } from '@openid4vc/openid4vci';
import { SDJwtVcInstance } from '@sd-jwt/sd-jwt-vc';
import * as Jose from 'jose';
import { newHolderKey as newBaseHolderKey, type HolderKey as BaseHolderKey } from './holder';

/**
 * A small OpenID4VCI wallet for end-to-end tests, built on @openid4vc/openid4vci (the library real wallets use), with
 * jose and node:crypto behind its callbacks. It holds its own keys and records every HTTP exchange, so tests can look
 * at what went over the wire. The verifiers below check issued credentials without any code of the service.
 */

// The service under test runs on http://127.0.0.1: the library accepts http URLs only when told so.
setGlobalConfig({ allowInsecureUrls: true });

/** One key type for the issuing wallet and the presenting holder, so a received credential can be presented. */
export interface HolderKey extends BaseHolderKey {
    thumbprint: string;
}

export const newHolderKey = async (): Promise<HolderKey> => {
    const key = await newBaseHolderKey();
    return { ...key, thumbprint: await Jose.calculateJwkThumbprint(key.publicJwk) };
};

export interface RecordedExchange {
    method: string;
    url: string;
    requestHeaders: Record<string, string>;
    requestBody?: string;
    status: number;
    responseHeaders: Record<string, string>;
    responseBody: string;
}

export interface ReceiveOptions {
    configurationId: string;
    txCode?: string;
    /** A DPoP-bound access token, with a fresh DPoP key. */
    dpop?: boolean;
    /** Number of proofs (each with its own holder key); default 1. */
    batch?: number;
}

export interface Received {
    offer: CredentialOfferObject;
    issuerMetadata: IssuerMetadataResult;
    accessToken: string;
    tokenType: string;
    credentials: string[];
    notificationId: string;
    /** The holder keys whose proofs went with the credential request, in order. */
    holderKeys: HolderKey[];
    /** The DPoP key and the options the library uses for later resource requests. */
    dpop?: { key: HolderKey; options: RequestDpopOptions };
}

const sha = (data: Uint8Array, alg: HashAlgorithm): Uint8Array =>
    new Uint8Array(Crypto.createHash(alg.replace('-', '')).update(data).digest());

export class Wallet {
    readonly client: Openid4vciClient;
    readonly exchanges: RecordedExchange[] = [];
    private readonly keys = new Map<string, HolderKey>();

    /** `clientAuthentication`: how the wallet authenticates at PAR and token (default anonymous, as for pre-authorized codes). */
    constructor(clientAuthentication: CallbackContext['clientAuthentication'] = clientAuthenticationAnonymous()) {
        const callbacks: Omit<CallbackContext, 'verifyJwt' | 'decryptJwe' | 'encryptJwe'> = {
            fetch: (input, init) => this.fetch(input as string | URL, init),
            hash: sha,
            generateRandom: (length) => new Uint8Array(Crypto.randomBytes(length)),
            signJwt: (signer, jwt) => this.signJwt(signer, jwt),
            clientAuthentication
        };
        this.client = new Openid4vciClient({ callbacks });
    }

    /** A new key the wallet can sign with (proofs, DPoP). */
    async key(): Promise<HolderKey> {
        const key = await newHolderKey();
        this.keys.set(key.thumbprint, key);
        return key;
    }

    private async fetch(input: string | URL, init?: RequestInit): Promise<Response> {
        const response = await fetch(input, init);
        const headersOf = (h: ConstructorParameters<typeof Headers>[0]): Record<string, string> => Object.fromEntries(new Headers(h ?? {}).entries());
        this.exchanges.push({
            method: (init?.method ?? 'GET').toUpperCase(),
            url: String(input),
            requestHeaders: headersOf(init?.headers),
            ...(typeof init?.body === 'string' ? { requestBody: init.body } : init?.body instanceof URLSearchParams ? { requestBody: init.body.toString() } : {}),
            status: response.status,
            responseHeaders: headersOf(response.headers),
            responseBody: await response.clone().text()
        });
        return response;
    }

    private async signJwt(signer: JwtSigner, jwt: { header: Record<string, unknown>; payload: Record<string, unknown> }): Promise<{ jwt: string; signerJwk: Jwk }> {
        if (signer.method !== 'jwk') {
            throw new Error(`The test wallet signs with jwk signers only, not ${signer.method}`);
        }
        const key = this.keys.get(await Jose.calculateJwkThumbprint(signer.publicJwk as Jose.JWK));
        if (!key) {
            throw new Error('The test wallet does not hold this key');
        }
        const compact = await new Jose.SignJWT(jwt.payload).setProtectedHeader(jwt.header as Jose.JWTHeaderParameters).sign(key.privateKey);
        return { jwt: compact, signerJwk: key.publicJwk as Jwk };
    }

    jwkSigner(key: HolderKey): { method: 'jwk'; alg: 'ES256'; publicJwk: Jwk } {
        return { method: 'jwk', alg: 'ES256', publicJwk: key.publicJwk as Jwk };
    }

    /** Proof JWTs for a credential request, one per key, all with the one nonce. */
    async proofs(issuerMetadata: IssuerMetadataResult, configurationId: string, nonce: string, keys: HolderKey[]): Promise<string[]> {
        return Promise.all(keys.map(async (key) => (await this.client.createCredentialRequestJwtProof({
            issuerMetadata, credentialConfigurationId: configurationId, nonce, signer: this.jwkSigner(key)
        })).jwt));
    }

    /** The whole pre-authorized code flow: offer, metadata, token, nonce, credential request. */
    async receive(offerUri: string, options: ReceiveOptions): Promise<Received> {
        const offer = await this.client.resolveCredentialOffer(offerUri);
        const issuerMetadata = await this.client.resolveIssuerMetadata(offer.credential_issuer);
        const dpopKey = options.dpop ? await this.key() : undefined;
        const token = await this.client.retrievePreAuthorizedCodeAccessTokenFromOffer({
            credentialOffer: offer,
            issuerMetadata,
            ...(options.txCode ? { txCode: options.txCode } : {}),
            ...(dpopKey ? { dpop: { signer: this.jwkSigner(dpopKey) } } : {})
        });
        const accessToken = token.accessTokenResponse.access_token;
        const { c_nonce: nonce } = await this.client.requestNonce({ issuerMetadata });
        const holderKeys = await Promise.all(Array.from({ length: options.batch ?? 1 }, () => this.key()));
        const jwts = await this.proofs(issuerMetadata, options.configurationId, nonce, holderKeys);
        const dpop = dpopKey ? { key: dpopKey, options: token.dpop ?? { signer: this.jwkSigner(dpopKey) } } : undefined;
        const { credentialResponse } = await this.client.retrieveCredentials({
            issuerMetadata,
            credentialConfigurationId: options.configurationId,
            accessToken,
            proofs: { jwt: jwts },
            ...(dpop ? { dpop: dpop.options } : {})
        });
        const credentials = (credentialResponse.credentials ?? []).map((c) => {
            const value = typeof c === 'object' && c !== null && 'credential' in c ? (c as { credential: unknown }).credential : c;
            if (typeof value !== 'string') {
                throw new Error('The test wallet expects string credentials');
            }
            return value;
        });
        if (!credentialResponse.notification_id) {
            throw new Error('The credential response has no notification_id');
        }
        return {
            offer,
            issuerMetadata,
            accessToken,
            tokenType: token.accessTokenResponse.token_type,
            credentials,
            notificationId: credentialResponse.notification_id,
            holderKeys,
            ...(dpop ? { dpop } : {})
        };
    }

    /** The notification endpoint, with the DPoP key of the token when it is bound. */
    async notify(received: Received, event: NotificationEvent, notificationId = received.notificationId): Promise<void> {
        await this.client.sendNotification({
            issuerMetadata: received.issuerMetadata,
            accessToken: received.accessToken,
            notification: { notificationId, event },
            ...(received.dpop ? { dpop: received.dpop.options } : {})
        });
    }

    /** The last recorded exchange with a URL ending in `suffix`. */
    exchange(suffix: string): RecordedExchange | undefined {
        return [...this.exchanges].reverse().find((e) => new URL(e.url).pathname.endsWith(suffix));
    }
}

// ---------------------------------------------------------------------------------------------------------------------
// Independent verifiers

const sha256 = (data: string | ArrayBuffer | Uint8Array): Uint8Array =>
    new Uint8Array(Crypto.createHash('sha256').update(typeof data === 'string' ? data : Buffer.from(data as ArrayBuffer)).digest());

const certificateKey = (der: Uint8Array | string): Crypto.KeyObject =>
    new Crypto.X509Certificate(typeof der === 'string' ? Buffer.from(der, 'base64') : Buffer.from(der)).publicKey;

export const sameKey = (a: Jose.JWK | undefined, b: Jose.JWK | undefined): boolean =>
    !!a && !!b && a.kty === b.kty && a.crv === b.crv && a.x === b.x && a.y === b.y;

export interface VerifiedSdJwtVc {
    header: Record<string, unknown>;
    /** The disclosed payload (all disclosures applied). */
    payload: Record<string, unknown>;
    /** Salts of every disclosure, in order. */
    salts: string[];
    /** The x5c chain of the header (base64 DER, leaf first). */
    x5c: string[];
}

/**
 * Verifies an SD-JWT VC with @sd-jwt/sd-jwt-vc and the public key of the x5c leaf certificate of its header: the
 * signature, every disclosure digest, typ dc+sd-jwt.
 */
export const verifySdJwtVc = async (credential: string): Promise<VerifiedSdJwtVc> => {
    const [jwt, ...rest] = credential.split('~');
    const header = Jose.decodeProtectedHeader(jwt!) as Record<string, unknown>;
    if (header.typ !== 'dc+sd-jwt') {
        throw new Error(`SD-JWT VC typ is ${String(header.typ)}`);
    }
    const x5c = header.x5c as string[] | undefined;
    if (!x5c?.length) {
        throw new Error('SD-JWT VC has no x5c');
    }
    const leaf = await Jose.importX509(`-----BEGIN CERTIFICATE-----\n${x5c[0]}\n-----END CERTIFICATE-----`, String(header.alg));
    const verifier = new SDJwtVcInstance({
        hasher: (data: string | ArrayBuffer) => sha256(data),
        verifier: async (data: string, signature: string) =>
            Crypto.verify('sha256', Buffer.from(data), { key: leaf as unknown as Crypto.KeyObject, dsaEncoding: 'ieee-p1363' }, Buffer.from(signature, 'base64url'))
    });
    const { payload } = await verifier.verify(credential);
    const disclosures = rest.filter(Boolean);
    // Every disclosure must be referenced by a digest of the signed payload or of another disclosure (RFC 9901 7.1).
    const referenced = new Set<string>();
    const collect = (value: unknown): void => {
        if (Array.isArray(value)) {
            value.forEach(collect);
        }
        else if (value && typeof value === 'object') {
            for (const [name, member] of Object.entries(value)) {
                if (name === '_sd' && Array.isArray(member)) {
                    member.forEach((d) => referenced.add(String(d)));
                }
                else if (name === '...') {
                    referenced.add(String(member));
                }
                else {
                    collect(member);
                }
            }
        }
    };
    collect(Jose.decodeJwt(jwt!));
    const decoded = disclosures.map((d) => JSON.parse(Buffer.from(d, 'base64url').toString('utf8')) as [string, ...unknown[]]);
    decoded.forEach((d) => collect(d[d.length - 1]));
    for (const d of disclosures) {
        if (!referenced.has(Buffer.from(sha256(d)).toString('base64url'))) {
            throw new Error('SD-JWT VC carries a disclosure no digest refers to');
        }
    }
    const salts = decoded.map((d) => d[0]);
    return { header, payload: payload as Record<string, unknown>, salts, x5c };
};

export interface VerifiedMdoc {
    docType: string;
    /** `{namespace: {element: value}}` */
    namespaces: Record<string, Record<string, unknown>>;
    deviceJwk: Jose.JWK;
    validityInfo: { signed: Date; validFrom: Date; validUntil: Date };
    x5chain: Uint8Array[];
    /** The random salts of every IssuerSignedItem. */
    randoms: string[];
}

const field = <T>(object: unknown, name: string): T => (object instanceof Map ? object.get(name) : (object as Record<string, unknown>)[name]) as T;

/**
 * Verifies an mso_mdoc IssuerSigned (base64url CBOR, as OpenID4VCI returns it): the issuerAuth COSE_Sign1 with the
 * key of the x5chain certificate, the doctype, and each IssuerSignedItem's digest (SHA-256 over its tag-24
 * encoding) against the MSO valueDigests.
 */
export const verifyMdoc = async (credential: string, expectedDocType: string): Promise<VerifiedMdoc> => {
    const doc = parseIssuerSigned(new Uint8Array(Buffer.from(credential, 'base64url')), expectedDocType);
    const { issuerAuth, nameSpaces } = doc.issuerSigned;
    const x5chain = issuerAuth.x5chain;
    if (!x5chain?.length) {
        throw new Error('mdoc issuerAuth has no x5chain');
    }
    if (issuerAuth.alg !== -7) {
        throw new Error(`mdoc issuerAuth alg is ${String(issuerAuth.alg)}, not ES256`);
    }
    const { data, signature } = issuerAuth.getRawVerificationData();
    if (!Crypto.verify('sha256', Buffer.from(data), { key: certificateKey(x5chain[0]), dsaEncoding: 'ieee-p1363' }, Buffer.from(signature))) {
        throw new Error('mdoc issuerAuth signature does not verify with the x5chain certificate');
    }
    const mso = issuerAuth.decodedPayload;
    const docType = field<string>(mso, 'docType');
    if (docType !== expectedDocType || doc.docType !== expectedDocType) {
        throw new Error(`mdoc docType is ${docType}`);
    }
    if (field<string>(mso, 'digestAlgorithm') !== 'SHA-256') {
        throw new Error('mdoc digestAlgorithm is not SHA-256');
    }
    const valueDigests = field<Map<string, Map<number, Uint8Array>>>(mso, 'valueDigests');
    const namespaces: Record<string, Record<string, unknown>> = {};
    const randoms: string[] = [];
    for (const [namespace, items] of nameSpaces) {
        namespaces[namespace] = {};
        for (const item of items) {
            const expected = valueDigests.get(namespace)?.get(item.digestID);
            const actual = sha256(cborEncode(item.dataItem));
            if (!expected || Buffer.compare(Buffer.from(expected), Buffer.from(actual)) !== 0) {
                throw new Error(`mdoc digest of ${namespace}/${item.elementIdentifier} does not match the MSO`);
            }
            namespaces[namespace]![item.elementIdentifier] = item.elementValue;
            randoms.push(Buffer.from(item.random).toString('hex'));
        }
    }
    const deviceKeyInfo = field<unknown>(mso, 'deviceKeyInfo');
    const deviceKey = COSEKey.import(field<Map<number, unknown>>(deviceKeyInfo, 'deviceKey') as Map<number, unknown>).toJWK() as Jose.JWK;
    const validity = field<unknown>(mso, 'validityInfo');
    return {
        docType,
        namespaces,
        deviceJwk: deviceKey,
        validityInfo: { signed: field<Date>(validity, 'signed'), validFrom: field<Date>(validity, 'validFrom'), validUntil: field<Date>(validity, 'validUntil') },
        x5chain,
        randoms
    };
};
