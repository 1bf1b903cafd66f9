import { cborEncode, Document } from '@animo-id/mdoc';
import type { JWK } from 'jose';
import { mdocContext } from '../../../lib/mdoc/context';
import type { SigningService } from '../../kms/services/signing';

export interface MdocIssue {
    tenantId: string;
    keyChainId: string;
    docType: string;
    /** `{namespace: {element: value}}` */
    namespaces: Record<string, Record<string, unknown>>;
    deviceJwk: JWK;
    lifetimeSeconds?: number;
}

const DEFAULT_VALIDITY_SECONDS = 365 * 86_400;

/**
 * An ISO 18013-5 IssuerSigned structure (base64url CBOR, as OpenID4VCI returns mso_mdoc): value digests with
 * SHA-256, validity info, the device key from the proof, and the MSO signed through the signing service with the
 * key chain's certificate in x5chain.
 */
export const issueMdoc = async (signing: SigningService, input: MdocIssue): Promise<string> => {
    const material = await signing.material(input.tenantId, input.keyChainId);
    const ctx = mdocContext((data) => signing.sign(input.tenantId, input.keyChainId, data));
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
        .sign({ issuerPrivateKey: material.publicJwk, issuerCertificate: material.certificateChain[0]!, alg: 'ES256' }, { crypto: ctx.crypto, cose: ctx.cose });
    return Buffer.from(cborEncode(issued.prepare().get('issuerSigned'))).toString('base64url');
};
