import Crypto from 'node:crypto';
import * as X509 from '@peculiar/x509';
import type { PublicJwk } from './types';

/**
 * X.509 certificates for key chains, made with @peculiar/x509. The issuer's private key never leaves its KMS:
 * certificate signing goes through a WebCrypto facade whose `sign` calls the key store, and @peculiar/x509 turns
 * the raw r||s signature into DER.
 */

export type RawSigner = (data: Uint8Array) => Promise<Uint8Array>;

export interface SubjectFields {
    commonName: string;
    organization?: string;
    country?: string;
}

const EC_P256 = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGNING = { name: 'ECDSA', hash: 'SHA-256' } as const;

type WebCrypto = Crypto.webcrypto.Crypto;

const webcrypto: WebCrypto = Crypto.webcrypto;

/** A WebCrypto object whose ECDSA signing is done by a KMS signer; everything else is node's WebCrypto. */
const signingCrypto = (signer: RawSigner): WebCrypto => {
    const subtle = Object.create(webcrypto.subtle) as Crypto.webcrypto.SubtleCrypto;
    subtle.sign = async (_algorithm: unknown, _key: unknown, data: Crypto.webcrypto.BufferSource) => {
        const bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
        const signature = await signer(bytes);
        return signature.buffer.slice(signature.byteOffset, signature.byteOffset + signature.byteLength) as ArrayBuffer;
    };
    return { subtle, getRandomValues: webcrypto.getRandomValues.bind(webcrypto), randomUUID: webcrypto.randomUUID.bind(webcrypto) } as WebCrypto;
};

/** Placeholder key object: @peculiar/x509 reads only `algorithm` from the signing key it passes to `sign`. */
const kmsKey = { algorithm: EC_P256, type: 'private', extractable: false, usages: ['sign'] } as unknown as Crypto.webcrypto.CryptoKey;

export const spkiOf = (jwk: PublicJwk): ArrayBuffer => {
    const der = Crypto.createPublicKey({ key: jwk as Crypto.JsonWebKey, format: 'jwk' }).export({ format: 'der', type: 'spki' });
    return der.buffer.slice(der.byteOffset, der.byteOffset + der.byteLength) as ArrayBuffer;
};

const nameOf = (subject: SubjectFields): X509.JsonName => [
    ...(subject.country ? [{ C: [subject.country] }] : []),
    ...(subject.organization ? [{ O: [subject.organization] }] : []),
    { CN: [subject.commonName] }
];

const serialNumber = () => {
    const bytes = Crypto.randomBytes(16);
    bytes[0] = bytes[0]! & 0x7f; // positive INTEGER
    return bytes.toString('hex');
};

const validity = (days: number) => {
    const notBefore = new Date(Date.now() - 60_000);
    return { notBefore, notAfter: new Date(notBefore.getTime() + days * 86_400_000) };
};

export const issueRootCertificate = async (options: { subject: SubjectFields; publicJwk: PublicJwk; signer: RawSigner; validityDays: number }): Promise<X509.X509Certificate> => {
    const spki = spkiOf(options.publicJwk);
    const name = nameOf(options.subject);
    return X509.X509CertificateGenerator.create({
        serialNumber: serialNumber(),
        subject: name,
        issuer: name,
        ...validity(options.validityDays),
        publicKey: spki,
        signingKey: kmsKey,
        signingAlgorithm: SIGNING,
        extensions: [
            new X509.BasicConstraintsExtension(true, 0, true),
            new X509.KeyUsagesExtension(X509.KeyUsageFlags.keyCertSign | X509.KeyUsageFlags.cRLSign, true),
            await X509.SubjectKeyIdentifierExtension.create(await publicKeyOf(spki), false, webcrypto)
        ]
    }, signingCrypto(options.signer));
};

const publicKeyOf = (spki: ArrayBuffer) => webcrypto.subtle.importKey('spki', spki, EC_P256, true, ['verify']);

/**
 * A leaf for signing (credentials, request objects): digitalSignature, not a CA, a DNS SAN when given. Signed by the
 * issuer CA, or by its own key when `issuer` is absent (a standalone, self-signed chain).
 */
export const issueLeafCertificate = async (options: {
    subject: SubjectFields;
    sanDns: string[];
    publicJwk: PublicJwk;
    validityDays: number;
    issuer?: { certificate: X509.X509Certificate; signer: RawSigner };
    selfSigner?: RawSigner;
}): Promise<X509.X509Certificate> => {
    const spki = spkiOf(options.publicJwk);
    const signer = options.issuer?.signer ?? options.selfSigner;
    if (!signer) {
        throw new Error('A leaf certificate needs an issuer or a self signer');
    }
    const extensions: X509.Extension[] = [
        new X509.BasicConstraintsExtension(false, undefined, true),
        new X509.KeyUsagesExtension(X509.KeyUsageFlags.digitalSignature, true),
        await X509.SubjectKeyIdentifierExtension.create(await publicKeyOf(spki), false, webcrypto)
    ];
    if (options.sanDns.length) {
        extensions.push(new X509.SubjectAlternativeNameExtension(options.sanDns.map((value) => ({ type: 'dns' as const, value })), false));
    }
    if (options.issuer) {
        extensions.push(await X509.AuthorityKeyIdentifierExtension.create(options.issuer.certificate, false, webcrypto));
    }
    return X509.X509CertificateGenerator.create({
        serialNumber: serialNumber(),
        subject: nameOf(options.subject),
        issuer: options.issuer ? options.issuer.certificate.subject : nameOf(options.subject),
        ...validity(options.validityDays),
        publicKey: spki,
        signingKey: kmsKey,
        signingAlgorithm: SIGNING,
        extensions
    }, signingCrypto(signer));
};

export const toPem = (certificate: X509.X509Certificate): string => certificate.toString('pem');

export const parsePem = (pem: string): X509.X509Certificate => new X509.X509Certificate(pem);

/** base64 DER, as `x5c` and `x5chain` carry certificates. */
export const pemToX5c = (pem: string): string => Buffer.from(parsePem(pem).rawData).toString('base64');

/** The certificate's public key as a JWK, to compare with a key store's key. */
export const certificatePublicJwk = async (pem: string): Promise<PublicJwk> => {
    const key = Crypto.createPublicKey({ key: Buffer.from(parsePem(pem).publicKey.rawData), format: 'der', type: 'spki' });
    const { kty, crv, x, y } = key.export({ format: 'jwk' });
    return { kty, crv, x, y };
};
