import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { parseIssuerSigned } from '@animo-id/mdoc';
import { SDJwtVcInstance } from '@sd-jwt/sd-jwt-vc';
import * as Jose from 'jose';
import { mdocContext } from '../../lib/mdoc/context';
import { issueMdoc } from '../../plugins/oid4vci/formats/mdoc';
import { issueSdJwtVc } from '../../plugins/oid4vci/formats/sd-jwt';
import { completeClaims, flattenFields } from '../../plugins/oid4vci/formats/claims';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';
import { verifyMdoc } from '../helpers/wallet';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const hasher = (data: string | ArrayBuffer) => new Uint8Array(Crypto.createHash('sha256').update(typeof data === 'string' ? data : Buffer.from(data)).digest());

describe('credential formats', () => {
    let t: TestServer;
    let holder: Jose.JWK;
    before(async () => {
        t = await startTestServer('sqlite', { manifest: manifestFor('hallmark-oid4vci', 'hallmark-kms-db', 'hallmark-tenancy') });
        const root = await rootToken(t.server);
        await createTenant(t.server, root, 'acme');
        const admin = await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' });
        const res = await t.server.inject({ method: 'POST', url: '/api/key-chain', headers: bearer(admin.token), payload: { id: 'issuer', usageType: 'attestation', subject: { commonName: 'Acme', country: 'DE' } } });
        expect(res.statusCode).to.equal(201);
        holder = await Jose.exportJWK((await Jose.generateKeyPair('ES256', { extractable: true })).publicKey);
    });
    after(() => t.stop());

    it('fills defaults and refuses missing mandatory claims', () => {
        const fields = flattenFields([
            { path: ['given_name'], mandatory: true },
            { path: ['address'], children: [{ path: ['country'], defaultValue: 'DE', mandatory: true }] }
        ]);
        expect(completeClaims({ given_name: 'Erika' }, fields)).to.equal({ given_name: 'Erika', address: { country: 'DE' } });
        expect(() => completeClaims({}, fields)).to.throw(/Mandatory claims are missing: given_name/);
    });

    it('issues an SD-JWT VC that verifies with the x5c key, with disclosable claims as the fields say', async () => {
        const claims = { given_name: 'Erika', family_name: 'Mustermann', address: { locality: 'Berlin', country: 'DE' }, nationalities: ['DE', 'FR'] };
        const fields = [
            { path: ['given_name'], disclosable: true },
            { path: ['family_name'], disclosable: false },
            { path: ['address'], disclosable: true, children: [{ path: ['locality'], disclosable: true }] },
            { path: ['nationalities', null], disclosable: true }
        ];
        const credential = await issueSdJwtVc(t.server.signing, { tenantId: 'acme', keyChainId: 'issuer', issuer: 'http://hallmark.test/issuers/acme', vct: 'urn:eudi:pid:1', claims, fields, holderJwk: holder, lifetimeSeconds: 3600 });
        const header = Jose.decodeProtectedHeader(credential.split('~')[0]!);
        expect(header.typ).to.equal('dc+sd-jwt');
        const leaf = await Jose.importX509(`-----BEGIN CERTIFICATE-----\n${header.x5c![0]}\n-----END CERTIFICATE-----`, 'ES256');
        const verifier = new SDJwtVcInstance({ hasher, verifier: async (data, signature) => Crypto.verify('sha256', Buffer.from(data), { key: leaf as unknown as Crypto.KeyObject, dsaEncoding: 'ieee-p1363' }, Buffer.from(signature, 'base64url')) });
        const { payload } = await verifier.verify(credential);
        expect(payload).to.include({ iss: 'http://hallmark.test/issuers/acme', vct: 'urn:eudi:pid:1', given_name: 'Erika', family_name: 'Mustermann' });
        expect((payload as any).address).to.equal({ locality: 'Berlin', country: 'DE' });
        expect((payload as any).nationalities).to.equal(['DE', 'FR']);
        expect((payload as any).cnf.jwk.x).to.equal(holder.x);
        // Both time claims lie on a shared grid (unlinkable within a batch): exp is at least the lifetime after iat.
        expect((payload as any).exp - (payload as any).iat).to.be.within(3600, 7200);
        // given_name, address, address.locality, two nationalities: five disclosures; family_name in the clear.
        expect(credential.split('~').filter(Boolean).length - 1).to.equal(5);
        const jwtPayload = Jose.decodeJwt(credential.split('~')[0]!);
        expect(jwtPayload.family_name).to.equal('Mustermann');
        expect(jwtPayload.given_name).to.not.exist();
    });

    it('never issues an SD-JWT VC that expires before its lifetime has passed (200 credentials)', async () => {
        const lifetimes = [1, 600, 3599, 3600, 86_400 * 365];
        for (let i = 0; i < 200; i++) {
            const lifetimeSeconds = lifetimes[i % lifetimes.length]!;
            const before = Date.now() / 1000;
            const credential = await issueSdJwtVc(t.server.signing, { tenantId: 'acme', keyChainId: 'issuer', issuer: 'http://hallmark.test/issuers/acme', vct: 'urn:eudi:pid:1', claims: { given_name: 'Erika' }, fields: [], holderJwk: holder, lifetimeSeconds });
            const after = Date.now() / 1000;
            // Decoded by hand, not through the issuing library.
            const { iat, exp } = JSON.parse(Buffer.from(credential.split('~')[0]!.split('.')[1]!, 'base64url').toString('utf8')) as { iat: number; exp: number };
            const context = JSON.stringify({ before, after, iat, exp, lifetimeSeconds });
            expect(exp, context).to.be.at.least(before + lifetimeSeconds);
            // Rounding may lengthen the validity by less than one lifetime, and by less than an hour.
            expect(exp, context).to.be.below(after + lifetimeSeconds + Math.min(lifetimeSeconds, 3600));
            expect(iat, context).to.be.at.most(after);
            expect(iat, context).to.be.above(before - Math.min(lifetimeSeconds, 3600));
        }
    });

    it('never issues an mdoc whose validUntil is earlier than its lifetime after issuance', async () => {
        for (const lifetimeSeconds of [1, 600, 3600, 86_400 * 365]) {
            for (let i = 0; i < 5; i++) {
                const before = Date.now();
                const credential = await issueMdoc(t.server.signing, {
                    tenantId: 'acme', keyChainId: 'issuer', docType: 'org.iso.18013.5.1.mDL',
                    namespaces: { 'org.iso.18013.5.1': { given_name: 'Erika' } }, deviceJwk: holder, lifetimeSeconds
                });
                const after = Date.now();
                const { validityInfo } = await verifyMdoc(credential, 'org.iso.18013.5.1.mDL');
                const context = JSON.stringify({ before, after, validityInfo, lifetimeSeconds });
                expect(validityInfo.validUntil.getTime(), context).to.be.at.least(before + lifetimeSeconds * 1000);
                expect(validityInfo.validFrom.getTime(), context).to.be.at.most(after);
            }
        }
    });

    it('issues an mdoc IssuerSigned whose MSO signature verifies with the x5chain certificate', async () => {
        const credential = await issueMdoc(t.server.signing, {
            tenantId: 'acme', keyChainId: 'issuer', docType: 'org.iso.18013.5.1.mDL',
            namespaces: { 'org.iso.18013.5.1': { family_name: 'Mustermann', given_name: 'Erika', age_over_18: true } },
            deviceJwk: holder
        });
        const doc = parseIssuerSigned(Buffer.from(credential, 'base64url'), 'org.iso.18013.5.1.mDL');
        const issuerAuth = doc.issuerSigned.issuerAuth;
        const material = await t.server.signing.material('acme', 'issuer');
        const ok = await mdocContext(async () => new Uint8Array()).cose.sign1.verify({ sign1: issuerAuth as any, jwk: material.publicJwk });
        expect(ok).to.be.true();
        expect([...doc.getIssuerNameSpace('org.iso.18013.5.1')!.entries()]).to.include([['family_name', 'Mustermann']]);
        const mso = issuerAuth.decodedPayload as any;
        expect(mso.digestAlgorithm ?? mso.get?.('digestAlgorithm')).to.equal('SHA-256');
    });
});
