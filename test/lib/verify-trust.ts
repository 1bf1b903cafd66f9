import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as X509 from '@peculiar/x509';
import { claimValueMismatchMessage, FAILURE_CODES, FAILURE_MESSAGES, VerificationFailure } from '../../lib/verify/failures';
import { verifyCertificateChain, type TrustAnchor } from '../../lib/verify/trust';

export const lab = Lab.script();
const { describe, it, before } = lab;

// A small test PKI on node's WebCrypto (P-256 / ES256).
type KeyPair = Crypto.webcrypto.CryptoKeyPair;
interface Party { keys: KeyPair; cert: X509.X509Certificate }

const subtle = Crypto.webcrypto.subtle;
const EC = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGN = { name: 'ECDSA', hash: 'SHA-256' } as const;
const DAY = 86_400_000;
const NOW = new Date();

const keyPair = async (): Promise<KeyPair> => subtle.generateKey(EC, true, ['sign', 'verify']) as Promise<KeyPair>;
const serial = () => Crypto.randomBytes(8).toString('hex').replace(/^[89a-f]/, '1');
const validity = (from = -DAY, to = 365 * DAY) => ({ notBefore: new Date(NOW.getTime() + from), notAfter: new Date(NOW.getTime() + to) });

const ca = async (name: string, options: { from?: number; to?: number; issuer?: Party; keys?: KeyPair } = {}): Promise<Party> => {
    const keys = options.keys ?? await keyPair();
    const extensions = [new X509.BasicConstraintsExtension(true, undefined, true), new X509.KeyUsagesExtension(X509.KeyUsageFlags.keyCertSign | X509.KeyUsageFlags.cRLSign, true)];
    const cert = options.issuer
        ? await X509.X509CertificateGenerator.create({ serialNumber: serial(), subject: `CN=${name}`, issuer: options.issuer.cert.subject, ...validity(options.from, options.to), publicKey: keys.publicKey as never, signingKey: options.issuer.keys.privateKey as never, signingAlgorithm: SIGN, extensions })
        : await X509.X509CertificateGenerator.createSelfSigned({ serialNumber: serial(), name: `CN=${name}`, ...validity(options.from, options.to), keys: keys as never, signingAlgorithm: SIGN, extensions });
    return { keys, cert };
};

const leaf = async (name: string, issuer: Party | null, options: { from?: number; to?: number } = {}): Promise<Party> => {
    const keys = await keyPair();
    const extensions = [new X509.BasicConstraintsExtension(false, undefined, true), new X509.KeyUsagesExtension(X509.KeyUsageFlags.digitalSignature, true)];
    const cert = issuer
        ? await X509.X509CertificateGenerator.create({ serialNumber: serial(), subject: `C=DE, O=Test, CN=${name}`, issuer: issuer.cert.subject, ...validity(options.from, options.to), publicKey: keys.publicKey as never, signingKey: issuer.keys.privateKey as never, signingAlgorithm: SIGN, extensions })
        : await X509.X509CertificateGenerator.createSelfSigned({ serialNumber: serial(), name: `C=DE, O=Test, CN=${name}`, ...validity(options.from, options.to), keys: keys as never, signingAlgorithm: SIGN, extensions });
    return { keys, cert };
};

const x5c = (...parties: Party[]) => parties.map((p) => Buffer.from(p.cert.rawData).toString('base64'));
const anchor = (party: Party, serviceType: TrustAnchor['serviceType'] = 'pid-issuance'): TrustAnchor => ({ certificate: party.cert.toString('pem'), serviceType });

const rejects = async (promise: Promise<unknown>, code: string | undefined): Promise<VerificationFailure> => {
    const err = await expect(promise).to.reject(VerificationFailure) as VerificationFailure;
    expect(err.code).to.equal(code as never);
    if (code) {
        expect(err.message).to.equal(FAILURE_MESSAGES[code as keyof typeof FAILURE_MESSAGES]);
    }
    return err;
};

describe('lib/verify/failures', () => {

    it('has the 8 codes of spec 7.2 with their exact messages', () => {
        expect(FAILURE_CODES).to.have.length(8);
        expect(FAILURE_MESSAGES).to.equal({
            signature_invalid: 'The credential signature is invalid.',
            no_trust_chain_to_root: 'The credential issuer does not chain to a trusted root.',
            trust_chain_not_trusted: 'The credential issuer is not in the trusted list.',
            trust_list_unavailable: 'The trusted list could not be loaded, so the credential could not be validated.',
            certificate_expired: 'The credential issuer certificate is expired or not yet valid.',
            x5c_missing: 'The credential is missing its issuer certificate chain.',
            verification_error: 'The credential could not be verified.',
            claim_value_mismatch: "Disclosed claim values do not match the requested values for credential '<id>': <paths>"
        });
        expect(Object.keys(FAILURE_MESSAGES).sort()).to.equal([...FAILURE_CODES].sort());
    });

    it('fills the claim_value_mismatch template with the query id and paths', () => {
        expect(claimValueMismatchMessage('pid', ['["age_over_18"]', '["address","country"]']))
            .to.equal(`Disclosed claim values do not match the requested values for credential 'pid': ["age_over_18"], ["address","country"]`);
    });

    it('builds coded and uncoded failures', () => {
        const coded = VerificationFailure.coded('x5c_missing', 'diagnostic');
        expect(coded).to.be.an.instanceof(Error);
        expect(coded.code).to.equal('x5c_missing');
        expect(coded.message).to.equal(FAILURE_MESSAGES.x5c_missing);
        expect(coded.detail).to.equal('diagnostic');
        const uncoded = VerificationFailure.presentation('transaction data hash mismatch');
        expect(uncoded.code).to.be.undefined();
        expect(uncoded.message).to.equal('Presentation validation failed: transaction data hash mismatch');
        expect(new VerificationFailure(undefined, 'Presentation validation failed').message).to.equal('Presentation validation failed');
    });
});

describe('lib/verify/trust verifyCertificateChain()', () => {

    let root: Party;
    let otherRoot: Party;
    let intermediate: Party;
    let issuer: Party;
    let viaIntermediate: Party;
    let untrusted: Party;

    before(async () => {
        root = await ca('Test Root');
        otherRoot = await ca('Other Root');
        intermediate = await ca('Test Intermediate', { issuer: root });
        issuer = await leaf('Issuer', root);
        viaIntermediate = await leaf('Issuer via intermediate', intermediate);
        untrusted = await leaf('Untrusted issuer', otherRoot);
    });

    it('accepts a leaf issued by a pid-issuance anchor and returns its key and the anchor', async () => {
        const pid = anchor(root, 'pid-issuance');
        const result = await verifyCertificateChain(x5c(issuer), [anchor(otherRoot, 'eaa-issuance'), pid], NOW);
        expect(result.anchor).to.shallow.equal(pid);
        // The returned key is the leaf's: it verifies what the leaf's private key signs.
        const data = Buffer.from('payload');
        const signature = Buffer.from(await subtle.sign(SIGN, issuer.keys.privateKey, data));
        expect(Crypto.verify('sha256', data, { key: result.leafPublicKey, dsaEncoding: 'ieee-p1363' }, signature)).to.be.true();
    });

    it('accepts eaa-issuance anchors', async () => {
        const result = await verifyCertificateChain(x5c(issuer), [anchor(root, 'eaa-issuance')], NOW);
        expect(result.anchor.serviceType).to.equal('eaa-issuance');
    });

    it('accepts a chain that includes the anchor itself', async () => {
        await verifyCertificateChain(x5c(issuer, root), [anchor(root)], NOW);
        await verifyCertificateChain(x5c(viaIntermediate, intermediate, root), [anchor(root)], NOW);
    });

    it('accepts a chain through an intermediate, and an intermediate anchor', async () => {
        await verifyCertificateChain(x5c(viaIntermediate, intermediate), [anchor(root)], NOW);
        const result = await verifyCertificateChain(x5c(viaIntermediate, intermediate, root), [anchor(root, 'wallet-provider'), anchor(intermediate, 'eaa-issuance')], NOW);
        expect(result.anchor.serviceType).to.equal('eaa-issuance');
    });

    it('accepts a leaf listed directly as the anchor (also a self-signed standalone leaf)', async () => {
        await verifyCertificateChain(x5c(issuer), [anchor(issuer)], NOW);
        const standalone = await leaf('Standalone', null);
        await verifyCertificateChain(x5c(standalone), [anchor(standalone)], NOW);
    });

    it('prefers an issuance entry when the same certificate is in several entries', async () => {
        const result = await verifyCertificateChain(x5c(issuer), [anchor(root, 'wallet-provider'), anchor(root, 'pid-issuance')], NOW);
        expect(result.anchor.serviceType).to.equal('pid-issuance');
    });

    it('x5c_missing without a chain', async () => {
        await rejects(verifyCertificateChain([], [anchor(root)], NOW), 'x5c_missing');
        await rejects(verifyCertificateChain(undefined, [anchor(root)], NOW), 'x5c_missing');
        await rejects(verifyCertificateChain(null, [anchor(root)], NOW), 'x5c_missing');
    });

    it('verification_error for a malformed x5c', async () => {
        await rejects(verifyCertificateChain(['not base64!'], [anchor(root)], NOW), 'verification_error');
        await rejects(verifyCertificateChain([Buffer.from('not a certificate').toString('base64')], [anchor(root)], NOW), 'verification_error');
        await rejects(verifyCertificateChain([42 as never], [anchor(root)], NOW), 'verification_error');
        await rejects(verifyCertificateChain(Array.from({ length: 11 }, () => x5c(issuer)[0]!), [anchor(root)], NOW), 'verification_error');
        await rejects(verifyCertificateChain([Buffer.from(issuer.cert.rawData).toString('base64url').replace(/[-_]/g, '') + '-_'], [anchor(root)], NOW), 'verification_error');
    });

    it('no_trust_chain_to_root without anchors (fails closed)', async () => {
        const err = await rejects(verifyCertificateChain(x5c(issuer), [], NOW), 'no_trust_chain_to_root');
        expect(err.detail).to.contain('no trust anchors');
        await rejects(verifyCertificateChain(x5c(issuer), [{ certificate: 'garbage', serviceType: 'pid-issuance' }], NOW), 'no_trust_chain_to_root');
    });

    it('no_trust_chain_to_root for a leaf of another root', async () => {
        await rejects(verifyCertificateChain(x5c(untrusted), [anchor(root)], NOW), 'no_trust_chain_to_root');
        await rejects(verifyCertificateChain(x5c(untrusted, otherRoot), [anchor(root)], NOW), 'no_trust_chain_to_root');
    });

    it('no_trust_chain_to_root when a certificate is not issued by the next one', async () => {
        await rejects(verifyCertificateChain(x5c(issuer, otherRoot), [anchor(root), anchor(otherRoot)], NOW), 'no_trust_chain_to_root');
        await rejects(verifyCertificateChain(x5c(viaIntermediate, root), [anchor(root)], NOW), 'no_trust_chain_to_root');
    });

    it('no_trust_chain_to_root for an anchor with the right name but another key', async () => {
        const impostor = await ca('Test Root');
        expect(impostor.cert.subject).to.equal(root.cert.subject);
        await rejects(verifyCertificateChain(x5c(issuer), [anchor(impostor)], NOW), 'no_trust_chain_to_root');
        const forged = await leaf('Forged', impostor);
        await rejects(verifyCertificateChain(x5c(forged), [anchor(root)], NOW), 'no_trust_chain_to_root');
    });

    it('no_trust_chain_to_root when the issuing certificate is not a CA', async () => {
        const child = await leaf('Child of a leaf', issuer);
        await rejects(verifyCertificateChain(x5c(child), [anchor(issuer)], NOW), 'no_trust_chain_to_root');
        await rejects(verifyCertificateChain(x5c(child, issuer), [anchor(root)], NOW), 'no_trust_chain_to_root');
    });

    it('trust_chain_not_trusted when the path ends at a wallet-provider or other entry', async () => {
        await rejects(verifyCertificateChain(x5c(issuer), [anchor(root, 'wallet-provider')], NOW), 'trust_chain_not_trusted');
        await rejects(verifyCertificateChain(x5c(issuer), [anchor(root, 'other'), anchor(otherRoot, 'pid-issuance')], NOW), 'trust_chain_not_trusted');
        await rejects(verifyCertificateChain(x5c(issuer), [anchor(issuer, 'other')], NOW), 'trust_chain_not_trusted');
    });

    it('certificate_expired for an expired or not yet valid leaf', async () => {
        const expired = await leaf('Expired', root, { from: -30 * DAY, to: -DAY });
        const err = await rejects(verifyCertificateChain(x5c(expired), [anchor(root)], NOW), 'certificate_expired');
        expect(err.detail).to.contain('Expired');
        const future = await leaf('Future', root, { from: DAY, to: 30 * DAY });
        await rejects(verifyCertificateChain(x5c(future), [anchor(root)], NOW), 'certificate_expired');
        // Valid at another time.
        await verifyCertificateChain(x5c(future), [anchor(root)], new Date(NOW.getTime() + 2 * DAY));
    });

    it('certificate_expired for an expired intermediate or anchor', async () => {
        const expiredIntermediate = await ca('Expired Intermediate', { issuer: root, from: -30 * DAY, to: -DAY });
        const below = await leaf('Below expired intermediate', expiredIntermediate);
        await rejects(verifyCertificateChain(x5c(below, expiredIntermediate), [anchor(root)], NOW), 'certificate_expired');
        const expiredRoot = await ca('Expired Root', { from: -30 * DAY, to: -DAY });
        const child = await leaf('Child of expired root', expiredRoot);
        await rejects(verifyCertificateChain(x5c(child), [anchor(expiredRoot)], NOW), 'certificate_expired');
    });

    it('reports the trust failure before the validity of an untrusted chain', async () => {
        const expired = await leaf('Expired untrusted', otherRoot, { from: -30 * DAY, to: -DAY });
        await rejects(verifyCertificateChain(x5c(expired), [anchor(root)], NOW), 'no_trust_chain_to_root');
        await rejects(verifyCertificateChain(x5c(expired), [anchor(otherRoot, 'wallet-provider')], NOW), 'trust_chain_not_trusted');
    });
});
