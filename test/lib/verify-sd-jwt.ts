import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { SDJwtVcInstance } from '@sd-jwt/sd-jwt-vc';
import * as Jose from 'jose';
import { FAILURE_MESSAGES, VerificationFailure } from '../../lib/verify/failures';
import { verifySdJwtPresentation, type SdJwtPresentationInput } from '../../lib/verify/sd-jwt-vc';
import type { TrustAnchor } from '../../lib/verify/trust';
import { DAY, party, type Party } from '../helpers/pki';

export const lab = Lab.script();
const { describe, it, before } = lab;

const x5cOf = (p: Party) => [Buffer.from(p.cert.rawData).toString('base64')];
const anchorOf = (p: Party, serviceType: TrustAnchor['serviceType'] = 'pid-issuance'): TrustAnchor => ({ certificate: p.cert.toString('pem'), serviceType });

// Wallet and issuer side, with @sd-jwt/sd-jwt-vc.
const hasher = (data: string | ArrayBuffer, alg: string) => {
    expect(alg).to.equal('sha-256');
    return new Uint8Array(Crypto.createHash('sha256').update(typeof data === 'string' ? data : Buffer.from(data)).digest());
};
const es256 = (key: Crypto.KeyObject) => async (data: string) => Crypto.sign('sha256', Buffer.from(data), { key, dsaEncoding: 'ieee-p1363' }).toString('base64url');
const b64urlSha256 = (data: string) => Crypto.createHash('sha256').update(data).digest('base64url');

const CLIENT_ID = 'x509_hash:verifier-hash';
const NONCE = 'n-0S6_WzA2Mj';
const VCT = 'urn:eudi:pid:1';
const ISS = 'https://issuer.example.com/issuers/t1';
const nowSeconds = () => Math.floor(Date.now() / 1000);

interface Holder { privateKey: Crypto.KeyObject; jwk: Jose.JWK }
const holderKey = (): Holder => {
    const { privateKey, publicKey } = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const { kty, crv, x, y } = publicKey.export({ format: 'jwk' });
    return { privateKey, jwk: { kty, crv, x, y } };
};

const sdJwt = (issuer: Party, holder?: Holder) => new SDJwtVcInstance({
    hasher,
    hashAlg: 'sha-256',
    saltGenerator: () => Crypto.randomBytes(16).toString('base64url'),
    signAlg: 'ES256',
    signer: es256(issuer.privateKey),
    ...(holder ? { kbSignAlg: 'ES256', kbSigner: es256(holder.privateKey) } : {})
});

const CLAIMS = {
    given_name: 'Erika',
    family_name: 'Mustermann',
    birthdate: '1964-08-12',
    address: { street_address: 'Heidestraße 17', locality: 'Köln', country: 'DE' },
    nationalities: ['DE', 'FR']
};
const FRAME = {
    _sd: ['given_name', 'family_name', 'birthdate', 'address'],
    address: { _sd: ['street_address', 'locality'] },
    nationalities: { _sd: [0, 1] }
};

const issue = async (issuer: Party, options: { holder?: Holder; payload?: Record<string, unknown>; typ?: string; x5c?: unknown } = {}) => {
    const iat = nowSeconds();
    const payload = { ...CLAIMS, iss: ISS, vct: VCT, iat, exp: iat + 3600, ...(options.holder ? { cnf: { jwk: options.holder.jwk } } : {}), ...options.payload };
    const header: Record<string, unknown> = { typ: options.typ ?? 'dc+sd-jwt', ...(options.x5c === undefined ? { x5c: x5cOf(issuer) } : options.x5c === null ? {} : { x5c: options.x5c }) };
    return sdJwt(issuer, options.holder).issue(payload as never, FRAME as never, { header: header as never });
};

const PRESENT = { given_name: true, address: { locality: true }, nationalities: { 0: true } };

/** Presentation with a KB-JWT made by @sd-jwt (kbSigner, kb option). */
const present = async (issuer: Party, credential: string, holder: Holder | undefined, kb?: Record<string, unknown>, frame: unknown = PRESENT) =>
    sdJwt(issuer, holder).present(credential, frame as never, kb ? { kb: { payload: { iat: nowSeconds(), aud: CLIENT_ID, nonce: NONCE, ...kb } as never } } : undefined);

/** Appends a hand-made KB-JWT to an SD-JWT ending in `~` (for negatives @sd-jwt will not produce). */
const withKb = async (sdJwtWithoutKb: string, holder: Holder, options: { payload?: Record<string, unknown>; header?: Record<string, unknown>; key?: Crypto.KeyObject } = {}) => {
    const payload = { iat: nowSeconds(), aud: CLIENT_ID, nonce: NONCE, sd_hash: b64urlSha256(sdJwtWithoutKb), ...options.payload };
    const kb = await new Jose.CompactSign(Buffer.from(JSON.stringify(payload))).setProtectedHeader({ alg: 'ES256', typ: 'kb+jwt', ...options.header }).sign(options.key ?? holder.privateKey);
    return `${sdJwtWithoutKb}${kb}`;
};

const withoutKb = (presentation: string) => presentation.slice(0, presentation.lastIndexOf('~') + 1);
const parts = (presentation: string) => presentation.split('~');
const disclosure = (content: unknown[]) => Buffer.from(JSON.stringify(content)).toString('base64url');

/** A hand-made issuer-signed JWT (for payload shapes no library issues). */
const signIssuerJwt = async (issuer: Party, payload: Record<string, unknown>, header: Record<string, unknown> = {}) =>
    new Jose.CompactSign(Buffer.from(JSON.stringify(payload))).setProtectedHeader({ alg: 'ES256', typ: 'dc+sd-jwt', x5c: x5cOf(issuer), ...header }).sign(issuer.privateKey);

const rejects = async (promise: Promise<unknown>, code: string | undefined, text?: string): Promise<VerificationFailure> => {
    const err = await expect(promise).to.reject(VerificationFailure) as VerificationFailure;
    expect(err.code).to.equal(code as never);
    if (code) {
        expect(err.message).to.equal(FAILURE_MESSAGES[code as keyof typeof FAILURE_MESSAGES]);
        if (text) {
            expect(err.detail).to.contain(text);
        }
    }
    else {
        expect(err.message).to.startWith('Presentation validation failed');
        if (text) {
            expect(err.message).to.contain(text);
        }
    }
    return err;
};

describe('lib/verify/sd-jwt-vc verifySdJwtPresentation()', () => {

    let root: Party;
    let otherRoot: Party;
    let issuer: Party;
    let expiredIssuer: Party;
    let untrustedIssuer: Party;
    let holder: Holder;
    let anchors: TrustAnchor[];
    let credential: string;

    const input = (presentation: string, extra: Partial<SdJwtPresentationInput> = {}): SdJwtPresentationInput =>
        ({ presentation, clientId: CLIENT_ID, nonce: NONCE, now: new Date(), skewSeconds: 30, anchors, ...extra });

    before(async () => {
        root = await party('Test Root', null, { ca: true });
        otherRoot = await party('Other Root', null, { ca: true });
        issuer = await party('PID Issuer', root);
        expiredIssuer = await party('Expired PID Issuer', root, { from: -30 * DAY, to: -DAY });
        untrustedIssuer = await party('Untrusted Issuer', otherRoot);
        holder = holderKey();
        anchors = [anchorOf(root, 'pid-issuance')];
        credential = await issue(issuer, { holder });
    });

    it('verifies a key-bound presentation and returns the disclosed claims', async () => {
        const presentation = await present(issuer, credential, holder, {});
        const result = await verifySdJwtPresentation(input(presentation));
        expect(result.keyBound).to.be.true();
        expect(result.vct).to.equal(VCT);
        expect(result.issuer).to.equal(ISS);
        const { iat, exp, cnf, ...rest } = result.claims;
        expect(iat).to.be.a.number();
        expect(exp).to.be.a.number();
        expect(cnf).to.equal({ jwk: holder.jwk });
        expect(rest).to.equal({ iss: ISS, vct: VCT, given_name: 'Erika', address: { locality: 'Köln', country: 'DE' }, nationalities: ['DE'] });
        expect(JSON.stringify(result.claims)).to.not.contain('_sd');
        expect(JSON.stringify(result.claims)).to.not.contain('"..."');
    });

    it('reconstructs every claim when all are disclosed', async () => {
        const presentation = await present(issuer, credential, holder, {}, { given_name: true, family_name: true, birthdate: true, address: { street_address: true, locality: true }, nationalities: { 0: true, 1: true } });
        const { claims } = await verifySdJwtPresentation(input(presentation));
        expect(claims).to.include(CLAIMS);
    });

    it('accepts vc+sd-jwt (older drafts) and credentials without cnf and KB-JWT', async () => {
        const old = await issue(issuer, { holder, typ: 'vc+sd-jwt' });
        await verifySdJwtPresentation(input(await present(issuer, old, holder, {})));
        const unbound = await issue(issuer);
        const result = await verifySdJwtPresentation(input(await present(issuer, unbound, undefined)));
        expect(result.keyBound).to.be.false();
        expect(result.claims.cnf).to.not.exist();
    });

    it('verification_error for another typ', async () => {
        const jwt = await issue(issuer, { holder, typ: 'JWT' });
        await rejects(verifySdJwtPresentation(input(await present(issuer, jwt, holder, {}))), 'verification_error', 'typ');
    });

    it('verification_error for malformed input', async () => {
        await rejects(verifySdJwtPresentation(input('no-tilde')), 'verification_error');
        await rejects(verifySdJwtPresentation(input('a.b~')), 'verification_error');
        await rejects(verifySdJwtPresentation(input(`${parts(credential)[0]}~~`)), 'verification_error', 'empty');
        await rejects(verifySdJwtPresentation(input(`${parts(credential)[0]}~%%%~`)), 'verification_error', 'base64url');
        await rejects(verifySdJwtPresentation(input(`${parts(credential)[0]}~${disclosure(['salt'])}~`)), 'verification_error', 'disclosure');
        await rejects(verifySdJwtPresentation(input(`${parts(credential)[0]}~${disclosure(['salt', '_sd', 1])}~`)), 'verification_error', 'claim name');
    });

    it('verification_error for an alg other than ES256', async () => {
        const { privateKey } = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-384' });
        const jwt = await new Jose.CompactSign(Buffer.from('{}')).setProtectedHeader({ alg: 'ES384', typ: 'dc+sd-jwt', x5c: x5cOf(issuer) }).sign(privateKey);
        await rejects(verifySdJwtPresentation(input(`${jwt}~`)), 'verification_error', 'alg');
    });

    it('signature_invalid for a bad credential signature', async () => {
        const [jwt, ...rest] = parts(credential);
        const [h, p, s] = jwt!.split('.');
        const signature = Buffer.from(s!, 'base64url');
        signature[10] ^= 0xff;
        const tampered = [`${h}.${p}.${signature.toString('base64url')}`, ...rest].join('~');
        await rejects(verifySdJwtPresentation(input(await withKb(withoutKb(await present(issuer, tampered, holder)), holder))), 'signature_invalid', 'issuer JWT');
        // The payload changed under an intact signature.
        const payload = JSON.parse(Buffer.from(p!, 'base64url').toString());
        payload.iss = 'https://evil.example.com';
        const swapped = [`${h}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.${s}`, ...rest].join('~');
        await rejects(verifySdJwtPresentation(input(await withKb(withoutKb(swapped), holder))), 'signature_invalid');
        // Signed by a key other than the x5c leaf's.
        const other = await issue(await party('Other key', root), { holder, x5c: x5cOf(issuer) });
        await rejects(verifySdJwtPresentation(input(await present(issuer, other, holder, {}))), 'signature_invalid');
    });

    it('x5c_missing without an x5c header', async () => {
        const noX5c = await issue(issuer, { holder, x5c: null });
        await rejects(verifySdJwtPresentation(input(await present(issuer, noX5c, holder, {}))), 'x5c_missing');
        const emptyX5c = await issue(issuer, { holder, x5c: [] });
        await rejects(verifySdJwtPresentation(input(await present(issuer, emptyX5c, holder, {}))), 'x5c_missing');
    });

    it('verification_error for a malformed x5c', async () => {
        const bad = await issue(issuer, { holder, x5c: ['!!!'] });
        await rejects(verifySdJwtPresentation(input(await present(issuer, bad, holder, {}))), 'verification_error');
        const notArray = await issue(issuer, { holder, x5c: 'MIIB' });
        await rejects(verifySdJwtPresentation(input(await present(issuer, notArray, holder, {}))), 'verification_error');
    });

    it('no_trust_chain_to_root for an untrusted issuer or without anchors', async () => {
        const untrusted = await issue(untrustedIssuer, { holder });
        await rejects(verifySdJwtPresentation(input(await present(untrustedIssuer, untrusted, holder, {}))), 'no_trust_chain_to_root');
        await rejects(verifySdJwtPresentation(input(await present(issuer, credential, holder, {}), { anchors: [] })), 'no_trust_chain_to_root');
    });

    it('trust_chain_not_trusted when the root is only a wallet-provider entry', async () => {
        await rejects(verifySdJwtPresentation(input(await present(issuer, credential, holder, {}), { anchors: [anchorOf(root, 'wallet-provider')] })), 'trust_chain_not_trusted');
    });

    it('certificate_expired for an expired issuer certificate', async () => {
        const expired = await issue(expiredIssuer, { holder });
        await rejects(verifySdJwtPresentation(input(await present(expiredIssuer, expired, holder, {}))), 'certificate_expired');
    });

    it('verification_error for an expired, not yet valid or future credential (with skew)', async () => {
        const now = nowSeconds();
        const expired = await issue(issuer, { holder, payload: { iat: now - 7200, exp: now - 3600 } });
        await rejects(verifySdJwtPresentation(input(await present(issuer, expired, holder, {}))), 'verification_error', 'expired');
        const justExpired = await issue(issuer, { holder, payload: { exp: now - 10 } });
        await verifySdJwtPresentation(input(await present(issuer, justExpired, holder, {})));
        const notYet = await issue(issuer, { holder, payload: { nbf: now + 3600 } });
        await rejects(verifySdJwtPresentation(input(await present(issuer, notYet, holder, {}))), 'verification_error', 'not yet valid');
        const future = await issue(issuer, { holder, payload: { iat: now + 3600 } });
        await rejects(verifySdJwtPresentation(input(await present(issuer, future, holder, {}))), 'verification_error', 'future');
        const badExp = await issue(issuer, { holder, payload: { exp: 'tomorrow' } });
        await rejects(verifySdJwtPresentation(input(await present(issuer, badExp, holder, {}))), 'verification_error', 'NumericDate');
    });

    it('verification_error for an unreferenced (extra) disclosure', async () => {
        const base = withoutKb(await present(issuer, credential, holder));
        const extra = `${base}${disclosure([Crypto.randomBytes(16).toString('base64url'), 'is_admin', true])}~`;
        await rejects(verifySdJwtPresentation(input(await withKb(extra, holder))), 'verification_error', 'not referenced');
        // A disclosure of another credential of the same issuer is not referenced either.
        const otherCredential = await issue(issuer, { holder });
        const foreign = parts(otherCredential)[1]!;
        await rejects(verifySdJwtPresentation(input(await withKb(`${base}${foreign}~`, holder))), 'verification_error', 'not referenced');
    });

    it('verification_error for a duplicated disclosure', async () => {
        const base = withoutKb(await present(issuer, credential, holder));
        const duplicated = `${base}${parts(base)[1]}~`;
        await rejects(verifySdJwtPresentation(input(await withKb(duplicated, holder))), 'verification_error', 'more than once');
    });

    it('verification_error for a digest referenced twice or a disclosure of the wrong kind', async () => {
        const given = disclosure(['salt-1', 'given_name', 'Erika']);
        const digest = b64urlSha256(given);
        const twice = await signIssuerJwt(issuer, { iss: ISS, vct: VCT, _sd: [digest], nested: { _sd: [digest] } });
        await rejects(verifySdJwtPresentation(input(`${twice}~${given}~`)), 'verification_error', 'referenced more than once');
        const asElement = await signIssuerJwt(issuer, { iss: ISS, vct: VCT, list: [{ '...': digest }] });
        await rejects(verifySdJwtPresentation(input(`${asElement}~${given}~`)), 'verification_error', 'other kind');
        const clash = await signIssuerJwt(issuer, { iss: ISS, vct: VCT, given_name: 'Max', _sd: [digest] });
        await rejects(verifySdJwtPresentation(input(`${clash}~${given}~`)), 'verification_error', 'already exists');
        const hiddenCnf = disclosure(['salt-2', 'cnf', { jwk: holder.jwk }]);
        const disclosedCnf = await signIssuerJwt(issuer, { iss: ISS, vct: VCT, _sd: [b64urlSha256(hiddenCnf)] });
        await rejects(verifySdJwtPresentation(input(`${disclosedCnf}~${hiddenCnf}~`)), 'verification_error', 'must not be selectively disclosed');
        const sha512 = await signIssuerJwt(issuer, { iss: ISS, vct: VCT, _sd_alg: 'sha-512' });
        await rejects(verifySdJwtPresentation(input(`${sha512}~`)), 'verification_error', '_sd_alg');
    });

    it('reconstructs recursive disclosures and ignores undisclosed digests (decoys)', async () => {
        const street = disclosure(['s1', 'street', 'Main St 1']);
        const address = disclosure(['s2', 'address', { _sd: [b64urlSha256(street), b64urlSha256('decoy')], zip: '12345' }]);
        const element = disclosure(['s3', 'DE']);
        const jwt = await signIssuerJwt(issuer, { iss: ISS, vct: VCT, _sd_alg: 'sha-256', _sd: [b64urlSha256(address)], list: [{ '...': b64urlSha256(element) }, { '...': b64urlSha256('hidden') }, 'FR'] });
        const { claims, keyBound } = await verifySdJwtPresentation(input(`${jwt}~${address}~${street}~${element}~`));
        expect(keyBound).to.be.false();
        expect(claims).to.equal({ iss: ISS, vct: VCT, address: { zip: '12345', street: 'Main St 1' }, list: ['DE', 'FR'] });
    });

    it('Presentation validation failed when the KB-JWT is missing although cnf is present', async () => {
        const presentation = await present(issuer, credential, holder);
        expect(presentation.endsWith('~')).to.be.true();
        await rejects(verifySdJwtPresentation(input(presentation)), undefined, 'KB-JWT missing');
    });

    it('Presentation validation failed for a KB-JWT without cnf', async () => {
        const unbound = await issue(issuer);
        await rejects(verifySdJwtPresentation(input(await withKb(withoutKb(await present(issuer, unbound, undefined)), holder))), undefined, 'without cnf');
    });

    it('signature_invalid for a bad KB-JWT signature', async () => {
        const other = holderKey();
        // Made by @sd-jwt with another holder key.
        const presentation = await present(issuer, credential, other, {});
        await rejects(verifySdJwtPresentation(input(presentation)), 'signature_invalid', 'KB-JWT');
        // A flipped signature byte.
        const valid = await present(issuer, credential, holder, {});
        const [h, p, s] = parts(valid).at(-1)!.split('.');
        const signature = Buffer.from(s!, 'base64url');
        signature[5] ^= 0x01;
        await rejects(verifySdJwtPresentation(input(`${withoutKb(valid)}${h}.${p}.${signature.toString('base64url')}`)), 'signature_invalid');
    });

    it('Presentation validation failed for a wrong KB-JWT typ or alg', async () => {
        const base = withoutKb(await present(issuer, credential, holder));
        await rejects(verifySdJwtPresentation(input(await withKb(base, holder, { header: { typ: 'JWT' } }))), undefined, 'typ');
        await rejects(verifySdJwtPresentation(input(`${base}not-a-jwt`)), undefined, 'compact JWS');
    });

    it('Presentation validation failed for a bad sd_hash', async () => {
        const base = withoutKb(await present(issuer, credential, holder));
        await rejects(verifySdJwtPresentation(input(await withKb(base, holder, { payload: { sd_hash: b64urlSha256('something else') } }))), undefined, 'sd_hash');
        await rejects(verifySdJwtPresentation(input(await withKb(base, holder, { payload: { sd_hash: undefined } }))), undefined, 'sd_hash');
        // A disclosure removed after the KB-JWT was made.
        const valid = await present(issuer, credential, holder, {});
        const split = parts(valid);
        const dropped = [split[0], ...split.slice(2)].join('~');
        await rejects(verifySdJwtPresentation(input(dropped)), undefined, 'sd_hash');
    });

    it('Presentation validation failed for a wrong nonce or aud', async () => {
        await rejects(verifySdJwtPresentation(input(await present(issuer, credential, holder, { nonce: 'another-nonce' }))), undefined, 'nonce');
        await rejects(verifySdJwtPresentation(input(await present(issuer, credential, holder, { aud: 'x509_hash:another-verifier' }))), undefined, 'aud');
        await rejects(verifySdJwtPresentation(input(await present(issuer, credential, holder, {}), { nonce: 'expected-other' })), undefined, 'nonce');
        await rejects(verifySdJwtPresentation(input(await present(issuer, credential, holder, {}), { clientId: 'redirect_uri:https://rp.example.com' })), undefined, 'aud');
    });

    it('Presentation validation failed for a KB-JWT iat too old or in the future', async () => {
        const now = nowSeconds();
        await rejects(verifySdJwtPresentation(input(await present(issuer, credential, holder, { iat: now - 3600 }))), undefined, 'too old');
        await rejects(verifySdJwtPresentation(input(await present(issuer, credential, holder, { iat: now + 3600 }))), undefined, 'future');
        await rejects(verifySdJwtPresentation(input(await present(issuer, credential, holder, { iat: now - 100 }), { kbMaxAgeSeconds: 30 })), undefined, 'too old');
        // Inside the window (max age 300 s + skew 30 s).
        await verifySdJwtPresentation(input(await present(issuer, credential, holder, { iat: now - 320 })));
        await verifySdJwtPresentation(input(await present(issuer, credential, holder, { iat: now + 20 })));
        const base = withoutKb(await present(issuer, credential, holder));
        await rejects(verifySdJwtPresentation(input(await withKb(base, holder, { payload: { iat: undefined } }))), undefined, 'iat');
    });

    it('checks transaction_data_hashes when the request had transaction data', async () => {
        const td = Buffer.from(JSON.stringify({ type: 'payment', credential_ids: ['pid'] })).toString('base64url');
        const hash = b64urlSha256(td);
        const ok = await present(issuer, credential, holder, { transaction_data_hashes: [hash], transaction_data_hashes_alg: 'sha-256' });
        await verifySdJwtPresentation(input(ok, { transactionDataHashes: [hash] }));
        const mismatch = await present(issuer, credential, holder, { transaction_data_hashes: [b64urlSha256('other')] });
        const err = await rejects(verifySdJwtPresentation(input(mismatch, { transactionDataHashes: [hash] })), undefined);
        expect(err.message).to.equal('Presentation validation failed: transaction data hash mismatch');
        await rejects(verifySdJwtPresentation(input(await present(issuer, credential, holder, {}), { transactionDataHashes: [hash] })), undefined, 'transaction data hash mismatch');
        await rejects(verifySdJwtPresentation(input(await present(issuer, credential, holder, { transaction_data_hashes: [hash], transaction_data_hashes_alg: 'sha-384' }), { transactionDataHashes: [hash] })), undefined, 'transaction data hash mismatch');
        const unbound = await issue(issuer);
        await rejects(verifySdJwtPresentation(input(await present(issuer, unbound, undefined), { transactionDataHashes: [hash] })), undefined, 'transaction data hash mismatch');
    });
});
