import Crypto from 'node:crypto';
import { cborDecode, cborEncode, DataItem } from '@animo-id/mdoc';
import { VerificationFailure } from './failures';
import { statusReferenceOf, type StatusReference } from './status-list';
import { verifyCertificateChain, type TrustAnchor } from './trust';
import { ecPublicKey } from '../crypto/public-keys';
import { verifyOffLoop } from '../crypto/thread-pool';

/**
 * Verifier side of ISO 18013-5 mdoc presentations in OpenID4VP 1.0 (vp_token entries of format mso_mdoc: a
 * base64url DeviceResponse). Parsing uses the CBOR codec of @animo-id/mdoc (tag 24 → DataItem, tdate → Date); every
 * check is done here.
 *
 * Failure codes (spec 7.2) chosen here:
 * - not base64url / not CBOR / not a DeviceResponse / status ≠ 0 / no documents / malformed document, COSE or MSO /
 *   issuerAuth alg other than ES256 (HAIP) / MSO version ≠ 1.0 / unsupported digest algorithm → verification_error;
 * - x5chain header absent → x5c_missing; chain problems → the codes of `verifyCertificateChain`;
 * - issuerAuth signature does not verify with the x5chain leaf → signature_invalid;
 * - MSO docType ≠ document docType → verification_error;
 * - MSO validity (validFrom / validUntil, with `skewSeconds`) does not cover now → verification_error;
 * - an MSO `status.status_list` without an integer idx and an http(s) uri → verification_error (a well-formed one is
 *   returned for the caller to check, lib/verify/status-list);
 * - a presented IssuerSignedItem whose digest differs from (or is absent in) the MSO valueDigests → signature_invalid
 *   (the item is not covered by the issuer signature: a tampered value is a bad credential signature);
 *   a digestID or element identifier presented twice in a namespace → verification_error;
 * - deviceSigned absent → verification_error; deviceMac → verification_error (not supported: OpenID4VP responses
 *   have no reader key agreement); deviceSignature alg other than ES256 or an unusable MSO deviceKey →
 *   verification_error; deviceSignature not verifying over DeviceAuthentication with our SessionTranscript (wrong
 *   client_id, nonce, encryption-key thumbprint, response_uri or docType, or another key) → signature_invalid.
 *
 * Claims are returned JSON-ready: CBOR maps become objects, byte strings base64url, tdate an ISO date-time without
 * fractions (as ISO 18013-5 encodes it), full-date (tag 1004) "YYYY-MM-DD". Device-signed elements are self-asserted
 * by the wallet and are not returned.
 */

export interface OpenId4VpHandoverInput {
    /** The client_id request parameter, with its prefix (e.g. "x509_hash:..."). */
    clientId: string;
    /** The nonce request parameter. */
    nonce: string;
    /** RFC 7638 SHA-256 thumbprint of the verifier's response encryption key (direct_post.jwt), else null. */
    jwkThumbprint: Uint8Array | null;
    /** The response_uri (or redirect_uri) request parameter. */
    responseUri: string;
}

/**
 * The CBOR encoded SessionTranscript of an OpenID4VP redirect flow, OpenID4VP 1.0 (final), Appendix B.2.6.1
 * "Invocation via Redirects" (ISO 18013-5 9.1.5.1 SessionTranscript with DeviceEngagementBytes and EReaderKeyBytes
 * null, and Handover = OpenID4VPHandover):
 *
 *     SessionTranscript = [null, null, OpenID4VPHandover]
 *     OpenID4VPHandover = ["OpenID4VPHandover", OpenID4VPHandoverInfoHash]
 *     OpenID4VPHandoverInfoHash = bstr  ; SHA-256 of OpenID4VPHandoverInfoBytes
 *     OpenID4VPHandoverInfoBytes = bstr .cbor OpenID4VPHandoverInfo
 *     OpenID4VPHandoverInfo = [clientId: tstr, nonce: tstr, jwkThumbprint: bstr / null, responseUri: tstr]
 *
 * The result is the plain SessionTranscript (not tag-24 wrapped); it is embedded as is in DeviceAuthentication.
 * The spec's worked example (client_id x509_san_dns:example.com) is reproduced byte for byte in the tests.
 */
export const openid4vpSessionTranscript = (input: OpenId4VpHandoverInput): Uint8Array => {
    const info = cborEncode([input.clientId, input.nonce, input.jwkThumbprint ? new Uint8Array(input.jwkThumbprint) : null, input.responseUri]);
    const infoHash = new Uint8Array(Crypto.createHash('sha256').update(info).digest());
    return cborEncode([null, null, ['OpenID4VPHandover', infoHash]]);
};

/**
 * The SessionTranscript of OpenID4VP 1.0 over the Digital Credentials API, Appendix B.2.6.2:
 *
 *     SessionTranscript = [null, null, ["OpenID4VPDCAPIHandover", SHA-256(cbor(OpenID4VPDCAPIHandoverInfo))]]
 *     OpenID4VPDCAPIHandoverInfo = [origin: tstr, nonce: tstr, jwkThumbprint: bstr / null]
 *
 * `origin` is the web origin the browser reported, without the `origin:` prefix of client identifiers.
 */
export const openid4vpDcApiSessionTranscript = (input: { origin: string; nonce: string; jwkThumbprint: Uint8Array | null }): Uint8Array => {
    const info = cborEncode([input.origin, input.nonce, input.jwkThumbprint ? new Uint8Array(input.jwkThumbprint) : null]);
    const infoHash = new Uint8Array(Crypto.createHash('sha256').update(info).digest());
    return cborEncode([null, null, ['OpenID4VPDCAPIHandover', infoHash]]);
};

/**
 * The SessionTranscript of ISO/IEC TS 18013-7 Annex C (the "org-iso-mdoc" exchange over the Digital Credentials API):
 *
 *     SessionTranscript = [null, null, ["dcapi", SHA-256(cbor([Base64EncryptionInfo: tstr, SerializedOrigin: tstr]))]]
 *
 * where Base64EncryptionInfo is the base64url EncryptionInfo exactly as the request carried it. The CBOR encoding of
 * this array is also the HPKE `info` of the sealed response.
 */
export const annexCSessionTranscript = (input: { encryptionInfo: string; origin: string }): Uint8Array => {
    const info = cborEncode([input.encryptionInfo, input.origin]);
    const infoHash = new Uint8Array(Crypto.createHash('sha256').update(info).digest());
    return cborEncode([null, null, ['dcapi', infoHash]]);
};

export interface MdocPresentationInput extends OpenId4VpHandoverInput {
    /** base64url DeviceResponse, as the vp_token carries it. */
    deviceResponse: string;
    /**
     * The CBOR SessionTranscript the device signatures must cover; default the OpenID4VP redirect transcript of the
     * handover fields (DC API and ISO 18013-7 Annex C flows pass theirs).
     */
    sessionTranscript?: Uint8Array;
    /** Verify only the documents of this docType (ISO 18013-7: one DeviceResponse answers several queries). */
    docType?: string;
    now: Date;
    skewSeconds: number;
    anchors: TrustAnchor[];
}

export interface VerifiedMdocDocument {
    docType: string;
    /** `{namespace: {elementIdentifier: value}}` of the presented issuer-signed items. */
    claims: Record<string, Record<string, unknown>>;
    /** The trust anchor the x5chain ended at (a status list token must end at the same one). */
    issuerAnchor: TrustAnchor;
    /** The MSO's `status.status_list`. */
    statusReference?: StatusReference;
    /** The issuerAuth x5chain (base64 DER, leaf first), for the trust outcome. */
    x5chain: string[];
}

const COSE_ES256 = -7;
const COSE_HEADER_ALG = 1;
const COSE_HEADER_X5CHAIN = 33;
const DIGESTS: Record<string, string> = { 'SHA-256': 'sha256', 'SHA-384': 'sha384', 'SHA-512': 'sha512' };
const BASE64URL = /^[A-Za-z0-9_-]+={0,2}$/;

const error = (detail: string) => VerificationFailure.coded('verification_error', detail);

const isBytes = (value: unknown): value is Uint8Array => value instanceof Uint8Array;

/** A CBOR map member (decoded maps are Maps; tolerate plain objects). */
const member = (container: unknown, key: string | number): unknown => {
    if (container instanceof Map) {
        return container.get(key);
    }
    if (container && typeof container === 'object' && !Array.isArray(container) && !isBytes(container)) {
        return (container as Record<string, unknown>)[String(key)];
    }
    return undefined;
};

const isMap = (value: unknown): boolean => value instanceof Map || (!!value && typeof value === 'object' && !Array.isArray(value) && !isBytes(value) && !(value instanceof DataItem));

const entries = (value: unknown): Array<[unknown, unknown]> =>
    value instanceof Map ? [...value.entries()] : Object.entries(value as Record<string, unknown>);

/** The inner value of a tag-24 DataItem (or the value itself when not wrapped). */
const unwrap = (value: unknown): unknown => (value instanceof DataItem ? value.data : value);

interface CoseSign1 {
    protectedBytes: Uint8Array;
    protectedHeaders: Map<unknown, unknown>;
    unprotectedHeaders: unknown;
    payload: Uint8Array | null;
    signature: Uint8Array;
}

/** COSE_Sign1 = [protected: bstr, unprotected: map, payload: bstr / nil, signature: bstr], tagged (18) or not. */
const coseSign1 = (value: unknown, what: string): CoseSign1 => {
    const raw = value && typeof (value as { getContentForEncoding?: unknown }).getContentForEncoding === 'function'
        ? (value as { getContentForEncoding: () => unknown[] }).getContentForEncoding()
        : value;
    if (!Array.isArray(raw) || raw.length !== 4) {
        throw error(`${what} is not a COSE_Sign1`);
    }
    const [protectedBytes, unprotectedHeaders, payload, signature] = raw as unknown[];
    if (!isBytes(protectedBytes) || !isBytes(signature) || (payload !== null && payload !== undefined && !isBytes(payload))) {
        throw error(`${what} is not a COSE_Sign1`);
    }
    let protectedHeaders: unknown = new Map();
    if (protectedBytes.length) {
        try {
            protectedHeaders = cborDecode(protectedBytes);
        }
        catch {
            throw error(`${what} has malformed protected headers`);
        }
    }
    if (!(protectedHeaders instanceof Map) || (unprotectedHeaders !== undefined && !isMap(unprotectedHeaders))) {
        throw error(`${what} has malformed headers`);
    }
    return { protectedBytes, protectedHeaders, unprotectedHeaders: unprotectedHeaders ?? new Map(), payload: payload ?? null, signature };
};

/** Sig_structure of RFC 9052 4.4 for COSE_Sign1, without external AAD. */
const toBeSigned = (sign1: CoseSign1, payload: Uint8Array): Uint8Array =>
    cborEncode(['Signature1', sign1.protectedBytes, new Uint8Array(0), payload]);

const verifyEs256 = async (data: Uint8Array, signature: Uint8Array, key: Crypto.KeyObject): Promise<boolean> => {
    try {
        return await verifyOffLoop('sha256', data, { key, dsaEncoding: 'ieee-p1363' }, signature);
    }
    catch {
        return false;
    }
};

const requireEs256 = (sign1: CoseSign1, what: string) => {
    if (sign1.protectedHeaders.get(COSE_HEADER_ALG) !== COSE_ES256) {
        throw error(`${what} alg ${String(sign1.protectedHeaders.get(COSE_HEADER_ALG))} is not ES256`);
    }
};

const isP256 = (key: Crypto.KeyObject) => key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1';

/** x5chain (label 33): one bstr or an array of bstr, leaf first; ISO 18013-5 puts it in the unprotected headers. */
const x5chainOf = (sign1: CoseSign1): string[] => {
    const value = member(sign1.unprotectedHeaders, COSE_HEADER_X5CHAIN) ?? sign1.protectedHeaders.get(COSE_HEADER_X5CHAIN);
    if (value === undefined || value === null || (Array.isArray(value) && !value.length)) {
        throw VerificationFailure.coded('x5c_missing', 'issuerAuth has no x5chain');
    }
    const certificates = Array.isArray(value) ? value : [value];
    if (!certificates.every(isBytes)) {
        throw error('x5chain is not a list of byte strings');
    }
    return certificates.map((der) => Buffer.from(der).toString('base64'));
};

/** COSE_Key (EC2, P-256) → node public key. */
const deviceKeyOf = (coseKey: unknown): Crypto.KeyObject => {
    const kty = member(coseKey, 1);
    const crv = member(coseKey, -1);
    const x = member(coseKey, -2);
    const y = member(coseKey, -3);
    if (kty !== 2 || crv !== 1 || !isBytes(x) || !isBytes(y) || x.length !== 32 || y.length !== 32) {
        throw error('the MSO deviceKey is not an EC2 P-256 COSE_Key');
    }
    try {
        return ecPublicKey({ crv: 'P-256', x: Buffer.from(x).toString('base64url'), y: Buffer.from(y).toString('base64url') });
    }
    catch {
        throw error('the MSO deviceKey is not a valid P-256 point');
    }
};

const toDate = (value: unknown, what: string): Date => {
    if (!(value instanceof Date) || Number.isNaN(value.getTime())) {
        throw error(`MSO validityInfo.${what} is not a date`);
    }
    return value;
};

/** JSON-ready element values. */
export const mdocValueToJson = (value: unknown, depth = 0): unknown => {
    if (depth > 32) {
        throw error('element value nested too deeply');
    }
    if (value instanceof DataItem) {
        return mdocValueToJson(value.data, depth + 1);
    }
    if (value instanceof Date) {
        return `${value.toISOString().split('.')[0]}Z`;
    }
    if (isBytes(value)) {
        return Buffer.from(value).toString('base64url');
    }
    if (typeof value === 'bigint') {
        return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
    }
    if (Array.isArray(value)) {
        return value.map((v) => mdocValueToJson(v, depth + 1));
    }
    if (value instanceof Map) {
        return Object.fromEntries([...value.entries()].map(([k, v]) => [String(k), mdocValueToJson(v, depth + 1)]));
    }
    if (value && typeof value === 'object') {
        // DateOnly (tag 1004) and other classes with a JSON form.
        if (typeof (value as { toJSON?: unknown }).toJSON === 'function') {
            return (value as { toJSON: () => unknown }).toJSON();
        }
        // Unknown tags decode to {tag, value}.
        if ('tag' in value && 'value' in value) {
            return mdocValueToJson((value as { value: unknown }).value, depth + 1);
        }
        return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, mdocValueToJson(v, depth + 1)]));
    }
    return value;
};

const decodeDeviceResponse = (encoded: string): unknown => {
    if (typeof encoded !== 'string' || !BASE64URL.test(encoded)) {
        throw error('the DeviceResponse is not base64url');
    }
    try {
        return cborDecode(Buffer.from(encoded, 'base64url'));
    }
    catch {
        throw error('the DeviceResponse is not CBOR');
    }
};

const verifyDocument = async (document: unknown, index: number, transcript: Uint8Array, input: MdocPresentationInput): Promise<VerifiedMdocDocument> => {
    const what = `document ${index}`;
    const docType = member(document, 'docType');
    const issuerSigned = member(document, 'issuerSigned');
    if (typeof docType !== 'string' || !isMap(issuerSigned)) {
        throw error(`${what} has no docType or issuerSigned`);
    }

    // Issuer authentication: trust chain, then the COSE_Sign1 signature over the MSO.
    const issuerAuth = coseSign1(member(issuerSigned, 'issuerAuth'), `${what} issuerAuth`);
    requireEs256(issuerAuth, 'issuerAuth');
    const x5chain = x5chainOf(issuerAuth);
    const { leafPublicKey, anchor } = await verifyCertificateChain(x5chain, input.anchors, input.now);
    if (!isP256(leafPublicKey)) {
        throw error('the issuer certificate key is not P-256');
    }
    if (!issuerAuth.payload) {
        throw error('issuerAuth has a detached payload');
    }
    if (!await verifyEs256(toBeSigned(issuerAuth, issuerAuth.payload), issuerAuth.signature, leafPublicKey)) {
        throw VerificationFailure.coded('signature_invalid', 'issuerAuth signature does not verify');
    }

    // The MSO (MobileSecurityObjectBytes = #6.24(bstr .cbor MobileSecurityObject)).
    let mso: unknown;
    try {
        mso = unwrap(cborDecode(issuerAuth.payload));
    }
    catch {
        throw error('the MSO is not CBOR');
    }
    if (!isMap(mso)) {
        throw error('the MSO is not a map');
    }
    if (member(mso, 'version') !== '1.0') {
        throw error(`MSO version ${String(member(mso, 'version'))}`);
    }
    if (member(mso, 'docType') !== docType) {
        throw error(`the MSO docType ${String(member(mso, 'docType'))} differs from the document docType ${docType}`);
    }
    const digestAlgorithm = DIGESTS[String(member(mso, 'digestAlgorithm'))];
    if (!digestAlgorithm) {
        throw error(`unsupported digestAlgorithm ${String(member(mso, 'digestAlgorithm'))}`);
    }
    const validityInfo = member(mso, 'validityInfo');
    const validFrom = toDate(member(validityInfo, 'validFrom'), 'validFrom');
    const validUntil = toDate(member(validityInfo, 'validUntil'), 'validUntil');
    const skew = input.skewSeconds * 1000;
    if (input.now.getTime() < validFrom.getTime() - skew) {
        throw error('the mdoc is not yet valid (MSO validFrom)');
    }
    if (input.now.getTime() > validUntil.getTime() + skew) {
        throw error('the mdoc has expired (MSO validUntil)');
    }
    const valueDigests = member(mso, 'valueDigests');
    if (!isMap(valueDigests)) {
        throw error('the MSO has no valueDigests');
    }
    const statusReference = statusReferenceOf(member(mso, 'status'));

    // Issuer-signed items: each digest over IssuerSignedItemBytes (#6.24(bstr .cbor IssuerSignedItem)).
    const claims: Record<string, Record<string, unknown>> = {};
    const nameSpaces = member(issuerSigned, 'nameSpaces');
    if (nameSpaces !== undefined && !isMap(nameSpaces)) {
        throw error('issuerSigned nameSpaces is not a map');
    }
    for (const [nameSpace, items] of nameSpaces === undefined ? [] : entries(nameSpaces)) {
        if (typeof nameSpace !== 'string' || !Array.isArray(items)) {
            throw error('malformed issuerSigned nameSpaces');
        }
        const digests = member(valueDigests, nameSpace);
        const values: Record<string, unknown> = {};
        const digestIds = new Set<number>();
        for (const item of items) {
            if (!(item instanceof DataItem)) {
                throw error('an IssuerSignedItem is not tag-24 encoded');
            }
            const data = item.data as unknown;
            const digestId = member(data, 'digestID');
            const elementIdentifier = member(data, 'elementIdentifier');
            if (typeof digestId !== 'number' || !Number.isInteger(digestId) || typeof elementIdentifier !== 'string' || !isBytes(member(data, 'random'))) {
                throw error('malformed IssuerSignedItem');
            }
            if (digestIds.has(digestId) || Object.prototype.hasOwnProperty.call(values, elementIdentifier)) {
                throw error(`${nameSpace}/${elementIdentifier} is presented twice`);
            }
            digestIds.add(digestId);
            const expected = member(digests, digestId);
            const actual = Crypto.createHash(digestAlgorithm).update(cborEncode(item)).digest();
            if (!isBytes(expected) || !actual.equals(Buffer.from(expected))) {
                throw VerificationFailure.coded('signature_invalid', `the digest of ${nameSpace}/${elementIdentifier} does not match the MSO`);
            }
            values[elementIdentifier] = mdocValueToJson(member(data, 'elementValue'));
        }
        claims[nameSpace] = values;
    }

    // Device authentication over DeviceAuthenticationBytes =
    // #6.24(bstr .cbor ["DeviceAuthentication", SessionTranscript, DocType, DeviceNameSpacesBytes]).
    const deviceSigned = member(document, 'deviceSigned');
    if (!isMap(deviceSigned)) {
        throw error(`${what} has no deviceSigned`);
    }
    const deviceNameSpaces = member(deviceSigned, 'nameSpaces');
    const deviceAuth = member(deviceSigned, 'deviceAuth');
    if (!(deviceNameSpaces instanceof DataItem) || !isMap(deviceAuth)) {
        throw error('malformed deviceSigned');
    }
    if (member(deviceAuth, 'deviceSignature') === undefined) {
        throw error(member(deviceAuth, 'deviceMac') !== undefined ? 'deviceMac is not supported' : 'deviceAuth has no deviceSignature');
    }
    const deviceSignature = coseSign1(member(deviceAuth, 'deviceSignature'), 'deviceSignature');
    requireEs256(deviceSignature, 'deviceSignature');
    const deviceKey = deviceKeyOf(member(member(mso, 'deviceKeyInfo'), 'deviceKey'));
    const deviceAuthentication = Buffer.concat([
        Buffer.from([0x84]),
        cborEncode('DeviceAuthentication'),
        transcript,
        cborEncode(docType),
        cborEncode(deviceNameSpaces)
    ]);
    const deviceAuthenticationBytes = cborEncode(new DataItem({ buffer: deviceAuthentication }));
    if (deviceSignature.payload && !Buffer.from(deviceSignature.payload).equals(Buffer.from(deviceAuthenticationBytes))) {
        throw VerificationFailure.coded('signature_invalid', 'the attached deviceSignature payload is not our DeviceAuthentication');
    }
    if (!await verifyEs256(toBeSigned(deviceSignature, deviceAuthenticationBytes), deviceSignature.signature, deviceKey)) {
        throw VerificationFailure.coded('signature_invalid', 'deviceSignature does not verify over DeviceAuthentication with this SessionTranscript');
    }
    return { docType, claims, issuerAnchor: anchor, x5chain, ...(statusReference ? { statusReference } : {}) };
};

/** Verifies every document of a DeviceResponse; see the module comment for the checks and their failure codes. */
export const verifyMdocPresentation = async (input: MdocPresentationInput): Promise<VerifiedMdocDocument[]> => {
    try {
        const response = decodeDeviceResponse(input.deviceResponse);
        if (!isMap(response) || typeof member(response, 'version') !== 'string') {
            throw error('not a DeviceResponse');
        }
        const status = member(response, 'status');
        if (status !== 0) {
            throw error(`DeviceResponse status ${String(status)}`);
        }
        const documents = member(response, 'documents');
        if (!Array.isArray(documents) || !documents.length) {
            throw error('the DeviceResponse has no documents');
        }
        const transcript = input.sessionTranscript ?? openid4vpSessionTranscript(input);
        const verified: VerifiedMdocDocument[] = [];
        for (const [index, document] of documents.entries()) {
            if (input.docType === undefined || member(document, 'docType') === input.docType) {
                verified.push(await verifyDocument(document, index, transcript, input));
            }
        }
        if (!verified.length) {
            throw error(`the DeviceResponse has no document of docType ${String(input.docType)}`);
        }
        return verified;
    }
    catch (cause) {
        if (cause instanceof VerificationFailure) {
            throw cause;
        }
        throw error(`unexpected: ${(cause as Error)?.message ?? String(cause)}`);
    }
};
