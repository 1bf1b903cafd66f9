import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as X509 from '@peculiar/x509';
import { VerificationFailure, type FailureCode } from '../../lib/verify/failures';
import { verifyCertificateChain, type ChainPolicy, type TrustAnchor, type TrustServiceType } from '../../lib/verify/trust';
import { DAY, party, type Party } from '../helpers/pki';

export const lab = Lab.script();
const { describe, it, before } = lab;

const NOW = new Date();
const x5c = (...parties: Party[]) => parties.map((p) => Buffer.from(p.cert.rawData).toString('base64'));
const anchor = (p: Party, serviceType: TrustServiceType): TrustAnchor => ({ certificate: p.cert.toString('pem'), serviceType });

const WALLET: ChainPolicy = { serviceTypes: ['wallet-provider'], anchorExcluded: true };

const rejects = async (promise: Promise<unknown>, code: FailureCode, detail?: RegExp): Promise<void> => {
    const err = await expect(promise).to.reject(VerificationFailure);
    expect(err.code).to.equal(code);
    if (detail) {
        expect(err.detail).to.match(detail);
    }
};

describe('lib/verify/trust verifyCertificateChain() with a chain policy (wallet and key attestations)', () => {
    let root: Party;
    let intermediate: Party;
    let leaf: Party;
    let selfSigned: Party;

    before(async () => {
        root = await party('Policy Wallet Root', null, { ca: true });
        intermediate = await party('Policy Wallet Intermediate', root, { ca: true });
        leaf = await party('Policy Wallet Signer', intermediate);
        selfSigned = await party('Policy Self-signed', null);
    });

    it('trusts the service types it is given, and by default only the issuance ones', async () => {
        const result = await verifyCertificateChain(x5c(leaf, intermediate), [anchor(root, 'wallet-provider')], NOW, WALLET);
        expect(result.anchor.serviceType).to.equal('wallet-provider');
        await rejects(verifyCertificateChain(x5c(leaf, intermediate), [anchor(root, 'wallet-provider')], NOW), 'trust_chain_not_trusted');
        await rejects(verifyCertificateChain(x5c(leaf, intermediate), [anchor(root, 'pid-issuance')], NOW, WALLET), 'trust_chain_not_trusted');
        // The verified result is cached per policy: one policy's success is not another's.
        await verifyCertificateChain(x5c(leaf, intermediate), [anchor(root, 'pid-issuance')], NOW);
        await rejects(verifyCertificateChain(x5c(leaf, intermediate), [anchor(root, 'pid-issuance')], NOW, WALLET), 'trust_chain_not_trusted');
        await verifyCertificateChain(x5c(leaf, intermediate, root), [anchor(root, 'wallet-provider')], NOW, { serviceTypes: ['wallet-provider'] });
        await rejects(verifyCertificateChain(x5c(leaf, intermediate, root), [anchor(root, 'wallet-provider')], NOW, WALLET), 'verification_error', /includes its trust anchor/);
    });

    it('with anchorExcluded refuses an x5c that carries its anchor, also an anchor that is the leaf itself', async () => {
        await rejects(verifyCertificateChain(x5c(leaf, intermediate, root), [anchor(root, 'wallet-provider')], NOW, WALLET), 'verification_error', /includes its trust anchor \(subject "C=DE, CN=Policy Wallet Root"/);
        await rejects(verifyCertificateChain(x5c(leaf, intermediate), [anchor(intermediate, 'wallet-provider')], NOW, WALLET), 'verification_error', /includes its trust anchor/);
        await rejects(verifyCertificateChain(x5c(leaf), [anchor(leaf, 'wallet-provider')], NOW, WALLET), 'verification_error', /includes its trust anchor/);
    });

    it('with anchorExcluded takes a path to an anchor the x5c does not carry when the list has several', async () => {
        const result = await verifyCertificateChain(x5c(leaf, intermediate), [anchor(intermediate, 'wallet-provider'), anchor(root, 'wallet-provider')], NOW, WALLET);
        expect(result.anchor.certificate).to.equal(root.cert.toString('pem'));
        // Only anchors of the accepted types count as "its" anchor.
        await verifyCertificateChain(x5c(leaf, intermediate), [anchor(intermediate, 'pid-issuance'), anchor(root, 'wallet-provider')], NOW, WALLET);
    });

    it('with anchorExcluded refuses a self-signed leaf, listed or not', async () => {
        await rejects(verifyCertificateChain(x5c(selfSigned), [anchor(selfSigned, 'wallet-provider')], NOW, WALLET), 'verification_error', /leaf is self-signed/);
        await rejects(verifyCertificateChain(x5c(selfSigned), [anchor(root, 'wallet-provider')], NOW, WALLET), 'verification_error', /leaf is self-signed/);
        // Without the policy a listed self-signed leaf stays acceptable, as before.
        await verifyCertificateChain(x5c(selfSigned), [anchor(selfSigned, 'eaa-issuance')], NOW);
        // A certificate that names itself as issuer but is signed by another key is not self-signed: it fails as unchained.
        const mimic = await X509.X509CertificateGenerator.create({
            serialNumber: '01', subject: 'CN=Mimic', issuer: 'CN=Mimic', notBefore: new Date(NOW.getTime() - DAY), notAfter: new Date(NOW.getTime() + DAY),
            publicKey: leaf.keys.publicKey as never, signingKey: root.keys.privateKey as never, signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' }
        });
        await rejects(verifyCertificateChain([Buffer.from(mimic.rawData).toString('base64')], [anchor(root, 'wallet-provider')], NOW, WALLET), 'no_trust_chain_to_root');
    });
});
