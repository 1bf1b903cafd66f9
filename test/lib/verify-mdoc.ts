import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { cborDecode, cborEncode, DataItem, DateOnly, DeviceResponse, Document, IssuerSignedDocument, MDoc, type PresentationDefinition } from '@animo-id/mdoc';
import type { JWK } from 'jose';
import { mdocContext } from '../../lib/mdoc/context';
import { FAILURE_MESSAGES, VerificationFailure } from '../../lib/verify/failures';
import { openid4vpSessionTranscript, verifyMdocPresentation, type MdocPresentationInput } from '../../lib/verify/mdoc';
import type { TrustAnchor } from '../../lib/verify/trust';
import { DAY, party, type Party } from '../helpers/pki';

export const lab = Lab.script();
const { describe, it, before } = lab;

const anchorOf = (p: Party, serviceType: TrustAnchor['serviceType'] = 'eaa-issuance'): TrustAnchor => ({ certificate: p.cert.toString('pem'), serviceType });

const deviceKey = () => {
    const { privateKey } = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const privateJwk = privateKey.export({ format: 'jwk' }) as JWK;
    const { d: _d, ...publicJwk } = privateJwk;
    return { privateJwk, publicJwk };
};

// Wallet and issuer side with @animo-id/mdoc and the service's crypto callbacks; keys are local JWKs.
const ctx = mdocContext(async (data, jwk) =>
    new Uint8Array(Crypto.sign('sha256', data, { key: Crypto.createPrivateKey({ key: jwk as Crypto.JsonWebKey, format: 'jwk' }), dsaEncoding: 'ieee-p1363' })));

const DOCTYPE = 'org.iso.18013.5.1.mDL';
const NS = 'org.iso.18013.5.1';
const CLIENT_ID = 'x509_hash:Rn2Qk0verifier';
const NONCE = 'nonce-0123456789';
const RESPONSE_URI = 'https://verifier.example.com/presentations/abc/response';
const THUMBPRINT = new Uint8Array(Crypto.createHash('sha256').update('encryption key').digest());

const issueMdoc = async (issuer: Party, devicePublicJwk: JWK, options: { docType?: string; validFrom?: Date; validUntil?: Date } = {}) => {
    const signed = new Date();
    return new Document(options.docType ?? DOCTYPE, { crypto: ctx.crypto })
        .addIssuerNameSpace(NS, { family_name: 'Mustermann', given_name: 'Erika', birth_date: new DateOnly('1964-08-12'), age_over_18: true, portrait: new Uint8Array([1, 2, 3, 4]) })
        .useDigestAlgorithm('SHA-256')
        .addValidityInfo({ signed, validFrom: options.validFrom ?? signed, validUntil: options.validUntil ?? new Date(signed.getTime() + 365 * DAY) })
        .addDeviceKeyInfo({ deviceKey: devicePublicJwk })
        .sign({ issuerPrivateKey: issuer.privateJwk, issuerCertificate: new Uint8Array(issuer.cert.rawData), alg: 'ES256' }, { crypto: ctx.crypto, cose: ctx.cose });
};

const definition = (docType: string, elements: string[]): PresentationDefinition => ({
    id: 'request',
    input_descriptors: [{
        id: docType,
        format: { mso_mdoc: { alg: ['ES256'] } },
        constraints: { limit_disclosure: 'required', fields: elements.map((e) => ({ path: [`$['${NS}']['${e}']`], intent_to_retain: false })) }
    }]
});

interface Handover { clientId?: string; nonce?: string; jwkThumbprint?: Uint8Array | null; responseUri?: string }

/** The wallet's DeviceResponse for this handover (SessionTranscript passed as tag-24 bytes, as the builder wants). */
const presentMdoc = async (document: IssuerSignedDocument, devicePrivateJwk: JWK, handover: Handover = {}, elements = ['family_name', 'birth_date', 'portrait']) => {
    const transcript = openid4vpSessionTranscript({ clientId: CLIENT_ID, nonce: NONCE, jwkThumbprint: THUMBPRINT, responseUri: RESPONSE_URI, ...handover });
    const response = await DeviceResponse.from(new MDoc([document]))
        .usingPresentationDefinition(definition(document.docType, elements))
        .usingSessionTranscriptBytes(cborEncode(new DataItem({ buffer: transcript })))
        .authenticateWithSignature(devicePrivateJwk, 'ES256')
        .sign({ crypto: ctx.crypto, cose: ctx.cose });
    return Buffer.from(response.encode()).toString('base64url');
};

/** Decodes a DeviceResponse, lets `change` edit its first document, encodes it again. */
const edit = (token: string, change: (document: Map<string, any>) => void): string => {
    const response = cborDecode(Buffer.from(token, 'base64url')) as Map<string, any>;
    change(response.get('documents')[0]);
    return Buffer.from(cborEncode(response)).toString('base64url');
};

const rejects = async (promise: Promise<unknown>, code: keyof typeof FAILURE_MESSAGES, detail?: string): Promise<VerificationFailure> => {
    const err = await expect(promise).to.reject(VerificationFailure) as VerificationFailure;
    expect(err.code).to.equal(code);
    expect(err.message).to.equal(FAILURE_MESSAGES[code]);
    if (detail) {
        expect(err.detail).to.contain(detail);
    }
    return err;
};

describe('lib/verify/mdoc openid4vpSessionTranscript()', () => {

    it('reproduces the OpenID4VP 1.0 Appendix B.2.6.1 example byte for byte', () => {
        const transcript = openid4vpSessionTranscript({
            clientId: 'x509_san_dns:example.com',
            nonce: 'exc7gBkxjx1rdc9udRrveKvSsJIq80avlXeLHhGwqtA',
            jwkThumbprint: Buffer.from('4283ec927ae0f208daaa2d026a814f2b22dca52cf85ffa8f3f8626c6bd669047', 'hex'),
            responseUri: 'https://example.com/response'
        });
        expect(Buffer.from(transcript).toString('hex')).to.equal('83f6f682714f70656e494434565048616e646f7665725820048bc053c00442af9b8eed494cefdd9d95240d254b046b11b68013722aad38ac');
    });

    it('encodes a null thumbprint for unencrypted responses and binds every input', () => {
        const base = { clientId: CLIENT_ID, nonce: NONCE, jwkThumbprint: null, responseUri: RESPONSE_URI };
        const transcript = openid4vpSessionTranscript(base);
        const info = cborEncode([CLIENT_ID, NONCE, null, RESPONSE_URI]);
        const decoded = cborDecode(transcript) as unknown[];
        expect(decoded[0]).to.be.null();
        expect(decoded[1]).to.be.null();
        const [label, hash] = decoded[2] as [string, Uint8Array];
        expect(label).to.equal('OpenID4VPHandover');
        expect(Buffer.from(hash).equals(Crypto.createHash('sha256').update(info).digest())).to.be.true();
        const variants = [
            { ...base, clientId: 'other' }, { ...base, nonce: 'other' }, { ...base, responseUri: 'https://other' }, { ...base, jwkThumbprint: THUMBPRINT }
        ].map((v) => Buffer.from(openid4vpSessionTranscript(v)).toString('hex'));
        expect(new Set([Buffer.from(transcript).toString('hex'), ...variants]).size).to.equal(5);
    });
});

describe('lib/verify/mdoc verifyMdocPresentation()', () => {

    let root: Party;
    let otherRoot: Party;
    let issuer: Party;
    let device: ReturnType<typeof deviceKey>;
    let issued: IssuerSignedDocument;
    let token: string;

    const input = (deviceResponse: string, extra: Partial<MdocPresentationInput> = {}): MdocPresentationInput => ({
        deviceResponse, clientId: CLIENT_ID, nonce: NONCE, jwkThumbprint: THUMBPRINT, responseUri: RESPONSE_URI, now: new Date(), skewSeconds: 30, anchors: [anchorOf(root)], ...extra
    });

    before(async () => {
        root = await party('Test IACA', null, { ca: true });
        otherRoot = await party('Other IACA', null, { ca: true });
        issuer = await party('mDL Issuer', root);
        device = deviceKey();
        issued = await issueMdoc(issuer, device.publicJwk);
        token = await presentMdoc(issued, device.privateJwk);
    });

    it('verifies a DeviceResponse and returns the presented claims, JSON-ready', async () => {
        const documents = await verifyMdocPresentation(input(token));
        expect(documents).to.equal([{
            docType: DOCTYPE,
            claims: { [NS]: { family_name: 'Mustermann', birth_date: '1964-08-12', portrait: Buffer.from([1, 2, 3, 4]).toString('base64url') } },
            issuerAnchor: anchorOf(root),
            x5chain: [Buffer.from(issuer.cert.rawData).toString('base64')]
        }]);
    });

    it('verifies an unencrypted-response transcript (null thumbprint) and pid-issuance anchors', async () => {
        const plain = await presentMdoc(issued, device.privateJwk, { jwkThumbprint: null }, ['age_over_18']);
        const [document] = await verifyMdocPresentation(input(plain, { jwkThumbprint: null, anchors: [anchorOf(root, 'pid-issuance')] }));
        expect(document!.claims).to.equal({ [NS]: { age_over_18: true } });
    });

    it('still verifies after a lossless decode and re-encode (the tampering tests change only what they say)', async () => {
        await verifyMdocPresentation(input(edit(token, () => undefined)));
    });

    it('signature_invalid for a wrong session transcript (nonce, client_id, thumbprint, response_uri)', async () => {
        await rejects(verifyMdocPresentation(input(token, { nonce: 'another-nonce' })), 'signature_invalid', 'deviceSignature');
        await rejects(verifyMdocPresentation(input(token, { clientId: 'x509_hash:another' })), 'signature_invalid', 'deviceSignature');
        await rejects(verifyMdocPresentation(input(token, { jwkThumbprint: null })), 'signature_invalid', 'deviceSignature');
        await rejects(verifyMdocPresentation(input(token, { jwkThumbprint: new Uint8Array(32) })), 'signature_invalid', 'deviceSignature');
        await rejects(verifyMdocPresentation(input(token, { responseUri: 'https://verifier.example.com/other' })), 'signature_invalid', 'deviceSignature');
        // A wallet that used another transcript (e.g. the pre-final OpenID4VP handover).
        const legacy = await presentMdoc(issued, device.privateJwk, { nonce: 'nonce-of-another-session' });
        await rejects(verifyMdocPresentation(input(legacy)), 'signature_invalid', 'deviceSignature');
    });

    it('signature_invalid for a device signature by another key than the MSO deviceKey', async () => {
        const other = deviceKey();
        await rejects(verifyMdocPresentation(input(await presentMdoc(issued, other.privateJwk))), 'signature_invalid', 'deviceSignature');
    });

    it('signature_invalid for a tampered element value', async () => {
        const tampered = edit(token, (document) => {
            const items = document.get('issuerSigned').get('nameSpaces').get(NS) as DataItem<Map<string, unknown>>[];
            const index = items.findIndex((item) => item.data.get('elementIdentifier') === 'family_name');
            const changed = new Map(items[index]!.data);
            changed.set('elementValue', 'Musterfrau');
            items[index] = DataItem.fromData(changed);
        });
        await rejects(verifyMdocPresentation(input(tampered)), 'signature_invalid', 'family_name');
    });

    it('signature_invalid for an element whose digestID is not in the MSO', async () => {
        const tampered = edit(token, (document) => {
            const items = document.get('issuerSigned').get('nameSpaces').get(NS) as DataItem<Map<string, unknown>>[];
            const changed = new Map(items[0]!.data);
            changed.set('digestID', 999);
            items[0] = DataItem.fromData(changed);
        });
        await rejects(verifyMdocPresentation(input(tampered)), 'signature_invalid', 'does not match the MSO');
    });

    it('signature_invalid for a bad issuer signature', async () => {
        const tampered = edit(token, (document) => {
            const issuerAuth = document.get('issuerSigned').get('issuerAuth') as Uint8Array[];
            const signature = Buffer.from(issuerAuth[3]!);
            signature[7] ^= 0xff;
            issuerAuth[3] = signature;
        });
        await rejects(verifyMdocPresentation(input(tampered)), 'signature_invalid', 'issuerAuth');
        // An MSO signed by a key other than the x5chain leaf's.
        const otherKey = await party('Other key', root);
        const forged = await issueMdoc({ ...otherKey, cert: issuer.cert }, device.publicJwk);
        await rejects(verifyMdocPresentation(input(await presentMdoc(forged, device.privateJwk))), 'signature_invalid', 'issuerAuth');
    });

    it('x5c_missing without x5chain', async () => {
        const stripped = edit(token, (document) => {
            (document.get('issuerSigned').get('issuerAuth')[1] as Map<number, unknown>).delete(33);
        });
        await rejects(verifyMdocPresentation(input(stripped)), 'x5c_missing');
    });

    it('no_trust_chain_to_root for an untrusted issuer or without anchors', async () => {
        const untrustedIssuer = await party('Untrusted mDL Issuer', otherRoot);
        const untrusted = await presentMdoc(await issueMdoc(untrustedIssuer, device.publicJwk), device.privateJwk);
        await rejects(verifyMdocPresentation(input(untrusted)), 'no_trust_chain_to_root');
        await rejects(verifyMdocPresentation(input(token, { anchors: [] })), 'no_trust_chain_to_root');
    });

    it('trust_chain_not_trusted when the root is only in a wallet-provider or other entry', async () => {
        await rejects(verifyMdocPresentation(input(token, { anchors: [anchorOf(root, 'wallet-provider')] })), 'trust_chain_not_trusted');
        await rejects(verifyMdocPresentation(input(token, { anchors: [anchorOf(root, 'other')] })), 'trust_chain_not_trusted');
    });

    it('certificate_expired for an expired issuer certificate', async () => {
        const expiredIssuer = await party('Expired mDL Issuer', root, { from: -30 * DAY, to: -DAY });
        const expired = await presentMdoc(await issueMdoc(expiredIssuer, device.publicJwk), device.privateJwk);
        await rejects(verifyMdocPresentation(input(expired)), 'certificate_expired');
    });

    it('verification_error when the MSO docType differs from the document docType', async () => {
        const relabelled = new IssuerSignedDocument('org.example.other.1', issued.issuerSigned);
        const presented = await presentMdoc(relabelled, device.privateJwk);
        await rejects(verifyMdocPresentation(input(presented)), 'verification_error', 'docType');
    });

    it('verification_error outside the MSO validity (with skew)', async () => {
        const now = Date.now();
        const expired = await issueMdoc(issuer, device.publicJwk, { validFrom: new Date(now - 10 * DAY), validUntil: new Date(now - DAY) });
        await rejects(verifyMdocPresentation(input(await presentMdoc(expired, device.privateJwk))), 'verification_error', 'expired');
        const notYet = await issueMdoc(issuer, device.publicJwk, { validFrom: new Date(now + DAY), validUntil: new Date(now + 10 * DAY) });
        await rejects(verifyMdocPresentation(input(await presentMdoc(notYet, device.privateJwk))), 'verification_error', 'not yet valid');
        const justExpired = await issueMdoc(issuer, device.publicJwk, { validFrom: new Date(now - DAY), validUntil: new Date(now - 10_000) });
        await verifyMdocPresentation(input(await presentMdoc(justExpired, device.privateJwk)));
    });

    it('verification_error for deviceMac (not supported) and a missing deviceSigned', async () => {
        const mac = edit(token, (document) => {
            const deviceAuth = document.get('deviceSigned').get('deviceAuth') as Map<string, unknown>;
            deviceAuth.set('deviceMac', deviceAuth.get('deviceSignature'));
            deviceAuth.delete('deviceSignature');
        });
        await rejects(verifyMdocPresentation(input(mac)), 'verification_error', 'deviceMac');
        const issuerOnly = edit(token, (document) => document.delete('deviceSigned'));
        await rejects(verifyMdocPresentation(input(issuerOnly)), 'verification_error', 'deviceSigned');
    });

    it('verification_error for a duplicated element', async () => {
        const duplicated = edit(token, (document) => {
            const items = document.get('issuerSigned').get('nameSpaces').get(NS) as unknown[];
            items.push(items[0]);
        });
        await rejects(verifyMdocPresentation(input(duplicated)), 'verification_error', 'twice');
    });

    it('verification_error for malformed input', async () => {
        await rejects(verifyMdocPresentation(input('not base64url!')), 'verification_error');
        await rejects(verifyMdocPresentation(input(Buffer.from([0xff, 0x00]).toString('base64url'))), 'verification_error');
        await rejects(verifyMdocPresentation(input(Buffer.from(cborEncode({ version: '1.0', documents: [], status: 0 })).toString('base64url'))), 'verification_error', 'no documents');
        await rejects(verifyMdocPresentation(input(Buffer.from(cborEncode({ version: '1.0', status: 10 })).toString('base64url'))), 'verification_error', 'status');
        await rejects(verifyMdocPresentation(input(edit(token, (document) => document.get('issuerSigned').set('issuerAuth', [1, 2])))), 'verification_error', 'COSE_Sign1');
    });
});
