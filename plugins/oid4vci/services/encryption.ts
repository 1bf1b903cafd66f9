import Crypto from 'node:crypto';
import * as Jose from 'jose';
import { p256FromScalar, p256PublicJwk } from '../../../lib/crypto/p256';
import { OAuthError } from '../../../lib/errors';

/**
 * OpenID4VCI 1.0 credential response encryption (sections 8.2, 8.3, 9.2 and 10): the wallet sends
 * `credential_response_encryption {jwk, enc, zip?}` and gets the response as a compact JWE (`application/jwt`) to
 * that key, its plaintext the JSON response. ECDH-ES in direct key agreement on P-256, as HAIP asks, with A128GCM
 * or A256GCM.
 */

export const RESPONSE_ENCRYPTION_ALGS = ['ECDH-ES'] as const;
export const RESPONSE_ENCRYPTION_ENCS = ['A128GCM', 'A256GCM'] as const;

/** The issuer metadata's `credential_response_encryption`. No issuance setting requires encryption (the spec names none). */
export const responseEncryptionMetadata = () => ({
    alg_values_supported: [...RESPONSE_ENCRYPTION_ALGS],
    enc_values_supported: [...RESPONSE_ENCRYPTION_ENCS],
    encryption_required: false
});

export interface ResponseEncryption {
    publicKey: Crypto.KeyObject;
    enc: (typeof RESPONSE_ENCRYPTION_ENCS)[number];
    kid?: string;
}

const P256_ORDER = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;

const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k', 'oth'];

const refused = (description: string) => new OAuthError(400, 'invalid_encryption_parameters', description);

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);

/**
 * The request's `credential_response_encryption`, checked; undefined when the wallet asked for none. 1.0 takes the
 * JWE `alg` from the JWK's `alg`; wallets of earlier drafts send it beside the JWK, which is accepted when the two
 * do not disagree. Anything unsupported, or a key that is not a public P-256 point, answers
 * `invalid_encryption_parameters`.
 */
export const responseEncryptionOf = (request: { credential_response_encryption?: unknown }): ResponseEncryption | undefined => {
    const parameters = request.credential_response_encryption;
    if (parameters === undefined) {
        return undefined;
    }
    if (!isObject(parameters)) {
        throw refused('credential_response_encryption must be an object with jwk and enc');
    }
    const { jwk, enc, alg: draftAlg, zip } = parameters;
    if (!isObject(jwk)) {
        throw refused('credential_response_encryption.jwk must be a JWK');
    }
    if (zip !== undefined) {
        throw refused('Compressed credential responses are not supported (no zip)');
    }
    const alg = jwk.alg ?? draftAlg;
    if (alg === undefined || (jwk.alg !== undefined && draftAlg !== undefined && jwk.alg !== draftAlg)) {
        throw refused('credential_response_encryption.jwk must carry the JWE alg (ECDH-ES) as its alg');
    }
    if (!RESPONSE_ENCRYPTION_ALGS.includes(alg as never)) {
        throw refused(`Unsupported alg ${JSON.stringify(alg)}: supported are ${RESPONSE_ENCRYPTION_ALGS.join(', ')}`);
    }
    if (!RESPONSE_ENCRYPTION_ENCS.includes(enc as never)) {
        throw refused(`Unsupported enc ${JSON.stringify(enc)}: supported are ${RESPONSE_ENCRYPTION_ENCS.join(', ')}`);
    }
    if (jwk.kty !== 'EC' || jwk.crv !== 'P-256' || typeof jwk.x !== 'string' || typeof jwk.y !== 'string' || PRIVATE_MEMBERS.some((m) => m in jwk)) {
        throw refused('credential_response_encryption.jwk must be a public EC P-256 key');
    }
    if (jwk.use !== undefined && jwk.use !== 'enc') {
        throw refused('credential_response_encryption.jwk is not an encryption key (use)');
    }
    if (jwk.kid !== undefined && (typeof jwk.kid !== 'string' || jwk.kid.length > 1024)) {
        throw refused('credential_response_encryption.jwk kid must be a string');
    }
    let publicKey: Crypto.KeyObject;
    try {
        // Refuses coordinates that are not a point of the curve.
        publicKey = Crypto.createPublicKey({ key: { kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y }, format: 'jwk' });
    }
    catch {
        throw refused('credential_response_encryption.jwk is not a valid P-256 public key');
    }
    return { publicKey, enc: enc as ResponseEncryption['enc'], ...(typeof jwk.kid === 'string' ? { kid: jwk.kid } : {}) };
};

export interface EncodedCredentialResponse {
    payload: string | object;
    type: 'application/jwt' | 'application/json';
}

/**
 * A credential or deferred credential response as the wallet asked for it in `request`: a compact JWE of the JSON
 * body (`application/jwt`) when it sent `credential_response_encryption`, else the body as JSON. The deferred
 * endpoint calls it with the deferred request, whose parameters may differ from the first request's (9.1).
 */
export const encryptCredentialResponse = async (request: { credential_response_encryption?: unknown }, body: object): Promise<EncodedCredentialResponse> => {
    const encryption = responseEncryptionOf(request);
    if (!encryption) {
        return { payload: body, type: 'application/json' };
    }
    const jwe = await new Jose.CompactEncrypt(new TextEncoder().encode(JSON.stringify(body)))
        .setProtectedHeader({ alg: 'ECDH-ES', enc: encryption.enc, ...(encryption.kid ? { kid: encryption.kid } : {}) })
        .encrypt(encryption.publicKey);
    return { payload: jwe, type: 'application/jwt' };
};

/**
 * OpenID4VCI 1.0 credential request encryption: the issuer metadata's `credential_request_encryption` publishes a
 * P-256 key per tenant, and the wallet may send its (deferred) credential request as a compact JWE
 * (`application/jwt`) to it, the plaintext the JSON request. The keys are derived from the service secret (HKDF per
 * tenant), so every replica holds the same ones without storing them; they change only with that secret.
 */
export class CredentialRequestDecryption {
    private readonly keys = new Map<string, { privateKey: Crypto.KeyObject; publicJwk: Jose.JWK }>();

    /** `secret`: key material for this purpose only (derived from the service secret). */
    constructor(private readonly secret: Buffer) {}

    private key(tenantId: string): { privateKey: Crypto.KeyObject; publicJwk: Jose.JWK } {
        let key = this.keys.get(tenantId);
        if (!key) {
            // 48 bytes reduced modulo n - 1, plus 1: a scalar in [1, n - 1] without noticeable bias (FIPS 186-5 A.2.1).
            const seed = BigInt(`0x${Buffer.from(Crypto.hkdfSync('sha256', this.secret, 'hallmark', `credential-request-encryption/v1/${tenantId}`, 48)).toString('hex')}`);
            const scalar = (seed % (P256_ORDER - 1n)) + 1n;
            const d = Buffer.from(scalar.toString(16).padStart(64, '0'), 'hex');
            const jwk = p256PublicJwk(p256FromScalar(d).getPublicKey());
            const privateKey = Crypto.createPrivateKey({ key: { ...jwk, d: d.toString('base64url') }, format: 'jwk' });
            const kid = Crypto.createHash('sha256').update(JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y })).digest('base64url');
            key = { privateKey, publicJwk: { ...jwk, kid, use: 'enc', alg: 'ECDH-ES' } };
            this.keys.set(tenantId, key);
        }
        return key;
    }

    /** The issuer metadata's `credential_request_encryption`. No issuance setting requires encryption (the spec names none). */
    metadata(tenantId: string) {
        return { jwks: { keys: [this.key(tenantId).publicJwk] }, enc_values_supported: [...RESPONSE_ENCRYPTION_ENCS], encryption_required: false };
    }

    /**
     * The JSON credential request of a body: as sent (`application/json`) or decrypted (`application/jwt`). A JWE to
     * another key or with another alg or enc answers `invalid_encryption_parameters`; one that does not decrypt, or
     * whose plaintext is not a JSON object, `invalid_credential_request`.
     */
    async read(tenantId: string, contentType: string | undefined, payload: Buffer | string | null | undefined): Promise<Record<string, unknown>> {
        const text = Buffer.isBuffer(payload) ? payload.toString('utf8') : payload ?? '';
        const encrypted = (contentType ?? '').split(';')[0]!.trim().toLowerCase() === 'application/jwt';
        let json = text;
        if (encrypted) {
            json = await this.decrypt(tenantId, text.trim());
        }
        let request: unknown;
        try {
            // As hapi's own parser does: a __proto__ member is refused, never carried into later object spreads.
            request = JSON.parse(json, (key, value: unknown) => {
                if (key === '__proto__') {
                    throw new Error('__proto__');
                }
                return value;
            });
        }
        catch {
            throw new OAuthError(400, 'invalid_credential_request', encrypted ? 'The decrypted credential request is not JSON' : 'The credential request is not JSON (or has a __proto__ member)');
        }
        if (!isObject(request)) {
            throw new OAuthError(400, 'invalid_credential_request', 'The credential request must be a JSON object');
        }
        return request;
    }

    private async decrypt(tenantId: string, jwe: string): Promise<string> {
        let header: Jose.ProtectedHeaderParameters;
        try {
            header = Jose.decodeProtectedHeader(jwe);
        }
        catch {
            throw new OAuthError(400, 'invalid_credential_request', 'An application/jwt credential request must be a compact JWE');
        }
        const key = this.key(tenantId);
        if (jwe.split('.').length !== 5) {
            throw new OAuthError(400, 'invalid_credential_request', 'An application/jwt credential request must be a compact JWE');
        }
        if (header.alg !== 'ECDH-ES' || !RESPONSE_ENCRYPTION_ENCS.includes(header.enc as never) || header.zip !== undefined) {
            throw refused(`Credential requests are encrypted with ECDH-ES and ${RESPONSE_ENCRYPTION_ENCS.join(' or ')}, without zip`);
        }
        if (header.kid !== undefined && header.kid !== key.publicJwk.kid) {
            throw refused('The credential request is encrypted to a key this issuer does not publish');
        }
        try {
            const { plaintext } = await Jose.compactDecrypt(jwe, key.privateKey, { keyManagementAlgorithms: ['ECDH-ES'], contentEncryptionAlgorithms: [...RESPONSE_ENCRYPTION_ENCS] });
            return new TextDecoder('utf-8', { fatal: true }).decode(plaintext);
        }
        catch {
            throw new OAuthError(400, 'invalid_credential_request', 'The credential request JWE does not decrypt');
        }
    }
}
