import Crypto from 'node:crypto';
import * as X509 from '@peculiar/x509';
import { projectRoot } from '../../lib/package-info';

type KeyPair = Crypto.webcrypto.CryptoKeyPair;

/** A certificate holder of a test PKI (P-256): a root CA or a leaf, with its key in the forms the tests sign with. */
export interface Party {
    keys: KeyPair;
    cert: X509.X509Certificate;
    privateKey: Crypto.KeyObject;
    privateJwk: Crypto.JsonWebKey;
}

const subtle = Crypto.webcrypto.subtle;
const EC = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGN = { name: 'ECDSA', hash: 'SHA-256' } as const;
export const DAY = 86_400_000;

/**
 * A self-signed root (`issuer` null) or a certificate issued by `issuer`; `ca` makes a certificate signer, otherwise a
 * digital-signature leaf. `from`/`to` are milliseconds from now (default: valid since a day, for a year).
 */
export const party = async (name: string, issuer: Party | null, options: { ca?: boolean; from?: number; to?: number } = {}): Promise<Party> => {
    const keys = await subtle.generateKey(EC, true, ['sign', 'verify']) as KeyPair;
    const now = Date.now();
    const common = {
        serialNumber: Crypto.randomBytes(8).toString('hex').replace(/^[89a-f]/, '1'),
        notBefore: new Date(now + (options.from ?? -DAY)),
        notAfter: new Date(now + (options.to ?? 365 * DAY)),
        signingAlgorithm: SIGN,
        extensions: options.ca
            ? [new X509.BasicConstraintsExtension(true, undefined, true), new X509.KeyUsagesExtension(X509.KeyUsageFlags.keyCertSign, true)]
            : [new X509.BasicConstraintsExtension(false, undefined, true), new X509.KeyUsagesExtension(X509.KeyUsageFlags.digitalSignature, true)]
    };
    const cert = issuer
        ? await X509.X509CertificateGenerator.create({ ...common, subject: `C=DE, CN=${name}`, issuer: issuer.cert.subject, publicKey: keys.publicKey as never, signingKey: issuer.keys.privateKey as never })
        : await X509.X509CertificateGenerator.createSelfSigned({ ...common, name: `C=DE, CN=${name}`, keys: keys as never });
    const privateJwk = await subtle.exportKey('jwk', keys.privateKey) as Crypto.JsonWebKey;
    return { keys, cert, privateJwk, privateKey: Crypto.createPrivateKey({ key: privateJwk, format: 'jwk' }) };
};

/** A real CA certificate (PEM): the demo tenant's root, for lists that need a signer certificate but are never fetched. */
export const DEMO_ROOT_PEM: string = (JSON.parse(require('node:fs').readFileSync(require('node:path').join(projectRoot, 'examples/config/demo/trust-lists/demo.json'), 'utf8')) as { spec: { entities: Array<{ certificates: string[] }> } }).spec.entities[0]!.certificates[0]!;
