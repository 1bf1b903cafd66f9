import Crypto from 'node:crypto';
import type { MdocContext } from '@animo-id/mdoc';
import * as X509 from '@peculiar/x509';
import { p256FromScalar } from '../crypto/p256';
import type { JWK } from 'jose';
import { jwkPublicKey } from '../crypto/public-keys';
import { verifyOffLoop } from '../crypto/thread-pool';

/**
 * The crypto callbacks @animo-id/mdoc needs, on node:crypto and @peculiar/x509. `sign1` signs with a key the
 * caller supplies (the signing service for issuance, a device key in tests); nothing here holds key material.
 */

const DIGESTS: Record<string, string> = { 'SHA-256': 'sha256', 'SHA-384': 'sha384', 'SHA-512': 'sha512' };


const certificate = (der: Uint8Array) => new X509.X509Certificate(der);

const spkiJwk = (cert: X509.X509Certificate): JWK => {
    const { kty, crv, x, y } = Crypto.createPublicKey({ key: Buffer.from(cert.publicKey.rawData), format: 'der', type: 'spki' }).export({ format: 'jwk' });
    return { kty, crv, x, y };
};

/** ISO 18013-5 9.1.3.5: EMacKey = HKDF-SHA-256(ECDH(priv, pub), salt = SHA-256(SessionTranscriptBytes), "EMacKey"). */
const ephemeralMacKey = (privateKey: Uint8Array, publicKey: Uint8Array, sessionTranscriptBytes: Uint8Array): JWK => {
    const shared = p256FromScalar(Buffer.from(privateKey)).computeSecret(Buffer.from(publicKey));
    const salt = Crypto.createHash('sha256').update(sessionTranscriptBytes).digest();
    const key = Buffer.from(Crypto.hkdfSync('sha256', shared, salt, Buffer.from('EMacKey'), 32));
    return { kty: 'oct', k: key.toString('base64url') };
};

export const mdocContext = (sign: (data: Uint8Array, jwk: JWK) => Promise<Uint8Array>): Pick<MdocContext, 'crypto' | 'cose' | 'x509'> => ({
    crypto: {
        random: (length) => new Uint8Array(Crypto.randomBytes(length)),
        digest: ({ digestAlgorithm, bytes }) => new Uint8Array(Crypto.createHash(DIGESTS[digestAlgorithm] ?? 'sha256').update(bytes).digest()),
        calculateEphemeralMacKeyJwk: ({ privateKey, publicKey, sessionTranscriptBytes }) => ephemeralMacKey(privateKey, publicKey, sessionTranscriptBytes)
    },
    cose: {
        sign1: {
            sign: async ({ sign1, jwk }) => sign(sign1.getRawSigningData().data, jwk),
            verify: ({ sign1, jwk, options }) => {
                const { data, signature } = sign1.getRawVerificationData(options);
                return verifyOffLoop('sha256', data, { key: jwkPublicKey(jwk), dsaEncoding: 'ieee-p1363' }, signature);
            }
        },
        mac0: {
            sign: ({ mac0, jwk }) => new Uint8Array(Crypto.createHmac('sha256', Buffer.from(jwk.k!, 'base64url')).update(mac0.getRawSigningData().data).digest()),
            verify: ({ mac0, jwk, options }) => {
                const { data, tag } = mac0.getRawVerificationData(options) as unknown as { data: Uint8Array; tag: Uint8Array };
                const expected = Crypto.createHmac('sha256', Buffer.from(jwk.k!, 'base64url')).update(data).digest();
                return expected.length === tag.length && Crypto.timingSafeEqual(expected, Buffer.from(tag));
            }
        }
    },
    x509: {
        getIssuerNameField: ({ certificate: der, field }) => certificate(der).issuerName.getField(field),
        getPublicKey: async ({ certificate: der }) => spkiJwk(certificate(der)),
        validateCertificateChain: async ({ trustedCertificates, x5chain }) => {
            const chain = x5chain.map(certificate);
            const anchors = trustedCertificates.map(certificate);
            const now = new Date();
            for (let i = 0; i < chain.length; i++) {
                const cert = chain[i]!;
                if (cert.notBefore > now || cert.notAfter < now) {
                    throw new Error('certificate_expired');
                }
                const issuer = chain[i + 1] ?? anchors.find((a) => a.subject === cert.issuer);
                if (!issuer || !(await cert.verify({ publicKey: issuer.publicKey, signatureOnly: true }))) {
                    throw new Error('no_trust_chain_to_root');
                }
            }
        },
        getCertificateData: async ({ certificate: der }) => {
            const cert = certificate(der);
            return {
                issuerName: cert.issuer,
                subjectName: cert.subject,
                serialNumber: cert.serialNumber,
                thumbprint: Buffer.from(await cert.getThumbprint('SHA-256')).toString('hex'),
                notBefore: cert.notBefore,
                notAfter: cert.notAfter,
                pem: cert.toString('pem')
            };
        }
    }
});
