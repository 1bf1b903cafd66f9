import Crypto from 'node:crypto';
import * as X509 from '@peculiar/x509';
import * as Jose from 'jose';
import type { SignedXml } from 'xml-crypto';
import { VerificationFailure } from '../../../lib/verify/failures';
import { verifyCertificateChain, type TrustAnchor } from '../../../lib/verify/trust';
import { derBase64ToPem, serviceTypeOf, statusInForce } from './service-types';

/**
 * The two formats a TrustList `url` may serve (contract "Resource bodies" → Trust list), each checked against the
 * list's `signerCertificates` before a single entry counts:
 * - ETSI TS 119 612 trusted lists: XML with an enveloped XMLDSig (XAdES) signature, verified by xml-crypto. Entries
 *   are read from the XML that the signature covers (xml-crypto's signed references), never from the document as
 *   received, so content wrapped around the signed part (signature wrapping) is ignored.
 * - ETSI TS 119 602 lists of trusted entities (LoTE) in their JWT binding: a compact JWS whose payload is
 *   `{"LoTE": {"ListAndSchemeInformation": {…, "NextUpdate"}, "TrustedEntitiesList": [...]}}`, verified by jose.
 * Any problem throws TrustListError; the caller turns it into trust_list_unavailable.
 */

export class TrustListError extends Error {
    override name = 'TrustListError';
}

export interface ParsedTrustList {
    format: 'etsi-tl-xml' | 'lote-jwt';
    anchors: TrustAnchor[];
    /** NextUpdate: the list must not be used after it (fail closed). */
    nextUpdate: Date;
    issued?: Date;
    sequence?: number;
}

const TSL_NAMESPACE = 'http://uri.etsi.org/02231/v2#';
const DSIG_NAMESPACE = 'http://www.w3.org/2000/09/xmldsig#';

/** Signature algorithms of trusted lists that xml-crypto does not ship: ECDSA (RFC 6931), values as r || s. */
const ecdsa = (hash: string, uri: string) => class {
    getAlgorithmName = () => uri;
    getSignature = (signedInfo: Crypto.BinaryLike, privateKey: Crypto.KeyLike): string =>
        Crypto.sign(hash, Buffer.from(signedInfo as string), { key: privateKey as Crypto.KeyObject, dsaEncoding: 'ieee-p1363' }).toString('base64');
    verifySignature = (material: string, key: Crypto.KeyLike, signatureValue: string): boolean => {
        try {
            return Crypto.verify(hash, Buffer.from(material), { key: key as Crypto.KeyObject, dsaEncoding: 'ieee-p1363' }, Buffer.from(signatureValue, 'base64'));
        }
        catch {
            return false;
        }
    };
};

export const ECDSA_ALGORITHMS = {
    'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256': ecdsa('sha256', 'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha256'),
    'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384': ecdsa('sha384', 'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384'),
    'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha512': ecdsa('sha512', 'http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha512')
} as const;

/** A SignedXml that knows the ECDSA algorithms too (for verifying and, in tests, for signing). */
export const signedXml = (options: ConstructorParameters<typeof SignedXml>[0]): SignedXml => {
    // xml-crypto (with xmldom) is loaded with the first XML trusted list, not at start-up.
    const { SignedXml: Signed } = require('xml-crypto') as typeof import('xml-crypto');
    const sig = new Signed(options);
    Object.assign(sig.SignatureAlgorithms, ECDSA_ALGORITHMS);
    return sig;
};

/**
 * The little of the DOM this module reads. @xmldom/xmldom is loaded without its type declarations: they pull the
 * whole DOM library (`lib: dom`) into the project's types, which changes globals such as Headers and Crypto for
 * every other file.
 */
interface XmlNode {
    nodeType: number;
    localName?: string | null;
    namespaceURI?: string | null;
    textContent?: string | null;
    childNodes: ArrayLike<XmlNode>;
}

interface XmlDocument extends XmlNode {
    documentElement: XmlNode | null;
}

interface XmlParser {
    parseFromString(source: string, mimeType: string): XmlDocument | undefined;
}

const ELEMENT_NODE = 1;

const parseXml = (xml: string): XmlNode => {
    // No DTDs: xmldom does not fetch external entities, but a DOCTYPE has no business in a trusted list and is how
    // entity expansion attacks start.
    if (/<!DOCTYPE/i.test(xml)) {
        throw new TrustListError('the XML has a DOCTYPE');
    }
    const problems: string[] = [];
    const { DOMParser } = require('@xmldom/xmldom') as { DOMParser: new (options: object) => XmlParser };
    const doc = new DOMParser({
        errorHandler: {
            warning: () => undefined,
            error: (message: string) => problems.push(message),
            fatalError: (message: string) => problems.push(message)
        }
    }).parseFromString(xml, 'text/xml');
    if (problems.length || !doc?.documentElement) {
        throw new TrustListError(`the XML does not parse: ${problems[0] ?? 'no document element'}`);
    }
    return doc.documentElement;
};

/** The child elements of `node` with the local name `name` (any namespace prefix; the root's namespace is checked). */
const children = (node: XmlNode, name: string): XmlNode[] => {
    const found: XmlNode[] = [];
    for (let i = 0; i < node.childNodes.length; i++) {
        const child = node.childNodes[i]!;
        if (child.nodeType === ELEMENT_NODE && child.localName === name) {
            found.push(child);
        }
    }
    return found;
};

/** The elements at a path of local names below `node`. */
const path = (node: XmlNode, ...names: string[]): XmlNode[] =>
    names.reduce<XmlNode[]>((nodes, name) => nodes.flatMap((n) => children(n, name)), [node]);

const text = (node: XmlNode | undefined): string | undefined => {
    const value = node?.textContent?.trim();
    return value ? value : undefined;
};

const parseDate = (value: string | undefined, what: string): Date => {
    const date = value ? new Date(value) : undefined;
    if (!date || Number.isNaN(date.getTime())) {
        throw new TrustListError(`${what} is missing or not a date`);
    }
    return date;
};

const usableSigners = (signers: X509.X509Certificate[], now: Date): X509.X509Certificate[] => {
    if (!signers.length) {
        throw new TrustListError('the trust list has no signerCertificates, so its signature cannot be checked');
    }
    const valid = signers.filter((c) => c.notBefore.getTime() <= now.getTime() && now.getTime() <= c.notAfter.getTime());
    if (!valid.length) {
        throw new TrustListError('every signer certificate is expired or not yet valid');
    }
    return valid;
};

/** ETSI TS 119 612: checks the enveloped signature against the signer certificates and reads the services. */
export const parseEtsiTrustedList = (xml: string, signers: X509.X509Certificate[], now: Date): ParsedTrustList => {
    const candidates = usableSigners(signers, now);
    const root = parseXml(xml);
    if (root.localName !== 'TrustServiceStatusList' || root.namespaceURI !== TSL_NAMESPACE) {
        throw new TrustListError('the XML is not an ETSI TS 119 612 TrustServiceStatusList');
    }
    const signatures = children(root, 'Signature').filter((node) => node.namespaceURI === DSIG_NAMESPACE);
    if (signatures.length !== 1) {
        throw new TrustListError(`the trusted list has ${signatures.length} enveloped signatures (exactly one expected)`);
    }
    let signedRoot: XmlNode | undefined;
    for (const signer of candidates) {
        const sig = signedXml({ publicCert: signer.toString('pem'), getCertFromKeyInfo: () => null });
        try {
            sig.loadSignature(signatures[0] as never);
            if (!sig.checkSignature(xml)) {
                continue;
            }
        }
        catch {
            // a digest that does not match, an unknown algorithm, another key: this signer did not sign it
            continue;
        }
        // The whole list must be covered: one signed reference is the TrustServiceStatusList itself.
        for (const reference of sig.getSignedReferences()) {
            try {
                const element = parseXml(reference);
                if (element.localName === 'TrustServiceStatusList' && element.namespaceURI === TSL_NAMESPACE) {
                    signedRoot = element;
                }
            }
            catch {
                // a reference to something else (XAdES SignedProperties)
            }
        }
        if (signedRoot) {
            break;
        }
    }
    if (!signedRoot) {
        throw new TrustListError('the signature of the trusted list does not verify with any signer certificate, or does not cover the list');
    }

    const scheme = children(signedRoot, 'SchemeInformation')[0];
    if (!scheme) {
        throw new TrustListError('the trusted list has no SchemeInformation');
    }
    const nextUpdate = parseDate(text(path(scheme, 'NextUpdate', 'dateTime')[0]), 'NextUpdate');
    const issuedText = text(children(scheme, 'ListIssueDateTime')[0]);
    const sequence = Number(text(children(scheme, 'TSLSequenceNumber')[0]));

    const anchors: TrustAnchor[] = [];
    for (const service of path(signedRoot, 'TrustServiceProviderList', 'TrustServiceProvider', 'TSPServices', 'TSPService', 'ServiceInformation')) {
        if (!statusInForce(text(children(service, 'ServiceStatus')[0]) ?? '')) {
            continue;
        }
        const serviceType = serviceTypeOf(text(children(service, 'ServiceTypeIdentifier')[0]));
        for (const cert of path(service, 'ServiceDigitalIdentity', 'DigitalId', 'X509Certificate')) {
            const pem = derBase64ToPem(text(cert) ?? '');
            if (pem) {
                anchors.push({ certificate: pem, serviceType });
            }
        }
    }
    return { format: 'etsi-tl-xml', anchors, nextUpdate, ...(issuedText ? { issued: parseDate(issuedText, 'ListIssueDateTime') } : {}), ...(Number.isInteger(sequence) ? { sequence } : {}) };
};

const LOTE_ALGORITHMS = ['ES256', 'ES384', 'ES512', 'PS256', 'PS384', 'PS512', 'RS256', 'RS384', 'RS512', 'EdDSA'];

const isObject = (value: unknown): value is Record<string, any> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * ETSI TS 119 602 JWT binding. The JWS is accepted when its x5c chains to (or is) a signer certificate, or, without
 * x5c, when one signer certificate's key verifies it.
 */
export const parseLoteJwt = async (jwt: string, signers: X509.X509Certificate[], now: Date): Promise<ParsedTrustList> => {
    const candidates = usableSigners(signers, now);
    let header: Jose.ProtectedHeaderParameters;
    try {
        header = Jose.decodeProtectedHeader(jwt);
    }
    catch {
        throw new TrustListError('the list is neither a TS 119 612 XML document nor a JWS');
    }
    if (!header.alg || !LOTE_ALGORITHMS.includes(header.alg)) {
        throw new TrustListError(`the JWS algorithm ${String(header.alg)} is not accepted`);
    }
    const keys: Crypto.KeyObject[] = [];
    if (Array.isArray(header.x5c) && header.x5c.length) {
        try {
            const anchors = candidates.map((c) => ({ certificate: c.toString('pem'), serviceType: 'other' as const }));
            keys.push((await verifyCertificateChain(header.x5c, anchors, now, { serviceTypes: ['other'] })).leafPublicKey);
        }
        catch (err) {
            throw new TrustListError(`the x5c of the list's JWS does not chain to a signer certificate: ${err instanceof VerificationFailure ? err.detail ?? err.code : (err as Error).message}`);
        }
    }
    else {
        keys.push(...candidates.map((c) => Crypto.createPublicKey({ key: Buffer.from(c.publicKey.rawData), format: 'der', type: 'spki' })));
    }
    let payload: Uint8Array | undefined;
    for (const key of keys) {
        try {
            ({ payload } = await Jose.compactVerify(jwt, key, { algorithms: [header.alg] }));
            break;
        }
        catch {
            // next signer
        }
    }
    if (!payload) {
        throw new TrustListError('the signature of the list of trusted entities does not verify with any signer certificate');
    }
    let claims: unknown;
    try {
        claims = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(payload));
    }
    catch {
        throw new TrustListError('the JWS payload is not JSON');
    }
    const lote = isObject(claims) ? claims.LoTE : undefined;
    if (!isObject(lote) || !isObject(lote.ListAndSchemeInformation) || !Array.isArray(lote.TrustedEntitiesList)) {
        throw new TrustListError('the JWS payload is not a list of trusted entities (LoTE with ListAndSchemeInformation and TrustedEntitiesList)');
    }
    const scheme = lote.ListAndSchemeInformation;
    const nextUpdate = parseDate(typeof scheme.NextUpdate === 'string' ? scheme.NextUpdate : undefined, 'NextUpdate');
    const anchors: TrustAnchor[] = [];
    for (const entity of lote.TrustedEntitiesList as unknown[]) {
        const services = isObject(entity) && Array.isArray(entity.TrustedEntityServices) ? entity.TrustedEntityServices as unknown[] : [];
        for (const service of services) {
            const info = isObject(service) && isObject(service.ServiceInformation) ? service.ServiceInformation : undefined;
            if (!info || !statusInForce(typeof info.ServiceStatus === 'string' ? info.ServiceStatus : undefined)) {
                continue;
            }
            const serviceType = serviceTypeOf(typeof info.ServiceTypeIdentifier === 'string' ? info.ServiceTypeIdentifier : undefined);
            const certificates = isObject(info.ServiceDigitalIdentity) && Array.isArray(info.ServiceDigitalIdentity.X509Certificates) ? info.ServiceDigitalIdentity.X509Certificates as unknown[] : [];
            for (const certificate of certificates) {
                const value = isObject(certificate) && typeof certificate.val === 'string' ? certificate.val : undefined;
                const pem = value ? derBase64ToPem(value) : undefined;
                if (pem) {
                    anchors.push({ certificate: pem, serviceType });
                }
            }
        }
    }
    const issued = typeof scheme.ListIssueDateTime === 'string' ? parseDate(scheme.ListIssueDateTime, 'ListIssueDateTime') : undefined;
    const sequence = typeof scheme.LoTESequenceNumber === 'number' ? scheme.LoTESequenceNumber : undefined;
    return { format: 'lote-jwt', anchors, nextUpdate, ...(issued ? { issued } : {}), ...(sequence !== undefined ? { sequence } : {}) };
};

/** Either format, told apart by content: XML starts with `<` (after an optional BOM and whitespace). */
export const parseTrustList = async (body: string, signers: X509.X509Certificate[], now: Date): Promise<ParsedTrustList> => {
    const trimmed = body.replace(/^\uFEFF/, '').trim();
    if (trimmed.startsWith('<')) {
        return parseEtsiTrustedList(trimmed, signers, now);
    }
    return parseLoteJwt(trimmed, signers, now);
};
