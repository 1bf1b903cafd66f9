import Crypto from 'node:crypto';
import * as Jose from 'jose';
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
