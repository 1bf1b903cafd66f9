import { cborDecode, cborEncode, DataItem, Document, type MdocContext } from '@animo-id/mdoc';
import type { JWK } from 'jose';
import { mdocContext } from '../../../lib/mdoc/context';
import type { SigningService } from '../../kms/services/signing';
import type { CredentialStatus } from '../services/credentials';

export interface MdocIssue {
    tenantId: string;
    keyChainId: string;
    docType: string;
    /** `{namespace: {element: value}}` */
    namespaces: Record<string, Record<string, unknown>>;
    deviceJwk: JWK;
    lifetimeSeconds?: number;
    /** The credential's token status list entry: the MSO's `status` member (draft-ietf-oauth-status-list, CBOR). */
    status?: CredentialStatus;
}

const DEFAULT_VALIDITY_SECONDS = 365 * 86_400;

type Sign1Signer = MdocContext['cose']['sign1']['sign'];

/**
 * The MSO is the payload of the issuerAuth COSE_Sign1, and @animo-id/mdoc builds it without a `status` member. The
 * library hands the unsigned COSE_Sign1 to this callback, the one point between building the MSO and signing it:
 * the payload (tag-24 bytes of the MSO map) is decoded, `status` added, encoded again, and only then signed, so the
 * signature covers the amended MSO and nothing is signed twice. Decoding and encoding with the library's own CBOR
 * settings keeps every other member as it was (maps stay maps, tdate stays tag 0, byte strings stay byte strings).
 */
const withMsoStatus = (sign: Sign1Signer, status: CredentialStatus, amended: { payload?: Uint8Array }): Sign1Signer => (input) => {
    // Typed read-only, but a plain field the signing data is computed from (@animo-id/mdoc 0.5.2, Sign1).
    const sign1 = input.sign1 as { payload: Uint8Array };
    const mso = new Map((cborDecode(sign1.payload) as DataItem<Map<string, unknown>>).data);
    mso.set('status', new Map([['status_list', new Map<string, unknown>([['idx', status.status_list.idx], ['uri', status.status_list.uri]])]]));
    sign1.payload = cborEncode(DataItem.fromData(mso));
    amended.payload = sign1.payload;
    return sign(input);
};

/**
 * An ISO 18013-5 IssuerSigned structure (base64url CBOR, as OpenID4VCI returns mso_mdoc): value digests with
 * SHA-256, validity info, the device key from the proof, the status list entry when there is one, and the MSO signed
 * through the signing service with the key chain's certificate in x5chain.
 */
export const issueMdoc = async (signing: SigningService, input: MdocIssue): Promise<string> => {
    const material = await signing.material(input.tenantId, input.keyChainId);
    const ctx = mdocContext((data) => signing.sign(input.tenantId, input.keyChainId, data));
    const amended: { payload?: Uint8Array } = {};
    const cose = input.status ? { ...ctx.cose, sign1: { ...ctx.cose.sign1, sign: withMsoStatus(ctx.cose.sign1.sign, input.status, amended) } } : ctx.cose;
    // The MSO carries whole seconds: signed rounds down, validUntil up, so the lifetime is never cut short.
    const now = Date.now() / 1000;
    const signed = new Date(Math.floor(now) * 1000);
    const validUntil = new Date(Math.ceil(now + (input.lifetimeSeconds ?? DEFAULT_VALIDITY_SECONDS)) * 1000);
    let document = new Document(input.docType, { crypto: ctx.crypto });
    for (const [namespace, values] of Object.entries(input.namespaces)) {
        document = document.addIssuerNameSpace(namespace, values);
    }
    const issued = await document
        .useDigestAlgorithm('SHA-256')
        .addValidityInfo({ signed, validFrom: signed, validUntil })
        .addDeviceKeyInfo({ deviceKey: input.deviceJwk })
        // The "private key" is only handed back to our sign callback, which signs in the KMS; the public key suffices.
        .sign({ issuerPrivateKey: material.publicJwk, issuerCertificate: material.certificateChain[0]!, alg: 'ES256' }, { crypto: ctx.crypto, cose });
    // Should a library update sign another object than the one it handed over, no credential leaves without its status.
    if (input.status && issued.issuerSigned.issuerAuth.payload !== amended.payload) {
        throw new Error('The signed MSO is not the one the status entry was added to');
    }
    return Buffer.from(cborEncode(issued.prepare().get('issuerSigned'))).toString('base64url');
};
