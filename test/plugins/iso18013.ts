import Crypto from 'node:crypto';
import { cborDecode, cborEncode } from '@animo-id/mdoc';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { issueMdoc } from '../../plugins/oid4vci/formats/mdoc';
import { DIALECTS } from '../helpers/databases';
import type { HolderKey } from '../helpers/holder';
import { annexCTranscript, deviceResponse, parseEncryptionInfo, readDeviceRequest, sealResponse } from '../helpers/mdoc-wallet';
import type { Receiver } from '../helpers/net';
import { party, type Party } from '../helpers/pki';
import { issueMdocWithStatus, mdocStatus, startStatusListServer, statusListToken, type StatusListServer } from '../helpers/status-issuer';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';
import { acmeAdmin, DOCTYPE, NS, startVerifierTenant, TRUSTED_ISSUER, type VerifierTenant } from '../helpers/verifier-tenant';

/**
 * ISO 18013-7 Annex C end to end: a wallet written from the standards (test/helpers/mdoc-wallet) reads the
 * DeviceRequest (checking readerAuth against the access key chain's root), seals a DeviceResponse over the Annex C
 * SessionTranscript with HPKE, and the service opens, verifies and records it: accepted with the trust outcome and
 * webhook, wrong SessionTranscript, tampered ciphertext, replay, bad input; and without the plugin, 400.
 */

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const ORIGIN = 'https://rp.example';
const MDL_QUERY = {
    credentials: [{
        id: 'mdl',
        format: 'mso_mdoc',
        meta: { doctype_value: DOCTYPE },
        claims: [{ path: [NS, 'family_name'], intent_to_retain: true }, { path: [NS, 'age_over_18'], values: [true] }]
    }]
};
const ELEMENTS: Array<[string, string]> = [[NS, 'family_name'], [NS, 'age_over_18']];

for (const dialect of DIALECTS) {
    describe(`ISO 18013-7 Annex C (${dialect})`, () => {
        let tenant: VerifierTenant | undefined;
        let t: TestServer;
        let api: VerifierTenant['api'];
        let create: VerifierTenant['create'];
        let deviceKey: HolderKey;
        let mdl: string;
        let accessRoot: string;
        let issuerRoot: string;
        let receiver: Receiver;
        let lists: StatusListServer;
        let statusRoot: Party;
        let statusIssuer: Party;

        before(async () => {
            lists = await startStatusListServer();
            statusRoot = await party('Status Root CA', null, { ca: true });
            statusIssuer = await party('Status mDL Issuer', statusRoot);
            const signer = await party('Status List Signer', statusRoot);
            lists.serve('mdl', { token: (uri) => statusListToken({ bits: 2, values: [0, 0, 0, 0, 0, 0, 0, 2], chain: [signer], sub: uri }) });
            tenant = await startVerifierTenant(dialect, 'hallmark-iso18013');
            ({ t, api, create, deviceKey, mdl, accessRoot, issuerRoot, receiver } = tenant);
            await create('/api/verifier/config', { id: 'mdl', dcql_query: MDL_QUERY, readerAuth: true, statusCheckMode: 'disabled' });
            await create('/api/verifier/config', { id: 'mdl-plain', dcql_query: MDL_QUERY, redirectUri: 'https://rp.example/done/{sessionId}' });
            await create('/api/trust-lists', { id: 'status', entities: [{ name: 'Status issuer', serviceType: 'pid-issuance', certificates: [statusRoot.cert.toString('pem')] }] });
            const statusQuery = { credentials: [{ ...MDL_QUERY.credentials[0], trusted_authorities: [{ type: 'etsi_tl', values: [{ trustListId: 'status' }] }] }] };
            await create('/api/verifier/config', { id: 'mdl-status', dcql_query: statusQuery });
            await create('/api/verifier/config', { id: 'pid', dcql_query: { credentials: [{ id: 'pid', format: 'dc+sd-jwt', meta: { vct_values: ['urn:eudi:pid:1'] } }] } });
        });
        after(async () => {
            await tenant?.stop();
            await lists?.stop();
        });

        const offer = async (body: Record<string, unknown>) => {
            const res = await api('POST', '/api/verifier/offer', { response_type: 'iso-18013-7', ...body });
            expect(res.status, res.payload).to.equal(201);
            return res.body as { session: string; deviceRequest: string; encryptionInfo: string };
        };
        const post = (session: string, payload: unknown) => t.server.inject({ method: 'POST', url: `/presentations/${session}/iso-18013-7`, payload: payload as object });
        const sessionOf = async (id: string) => (await api('GET', `/api/session/${id}`)).body;
        /** The wallet: DeviceResponse over `transcriptOrigin`'s transcript, sealed over the request's own transcript. */
        const respond = async (answer: { encryptionInfo: string }, options: { transcriptOrigin?: string; tamper?: boolean } = {}) => {
            const transcript = annexCTranscript(answer.encryptionInfo, ORIGIN);
            const signed = options.transcriptOrigin ? annexCTranscript(answer.encryptionInfo, options.transcriptOrigin) : transcript;
            return sealResponse(answer.encryptionInfo, await deviceResponse(mdl, deviceKey, DOCTYPE, ELEMENTS, signed), transcript, options.tamper);
        };

        it('verifies a sealed DeviceResponse: readerAuth checks out, the session completes with trust and webhook', async () => {
            const answer = await offer({ requestId: 'mdl', expected_origins: [ORIGIN], reference: 'order-7', webhook: { url: `${receiver.url}/iso` } });
            expect(Object.keys(answer).sort()).to.equal(['deviceRequest', 'encryptionInfo', 'session']);
            const transcript = annexCTranscript(answer.encryptionInfo, ORIGIN);
            const { parsed, readerAuthVerified } = readDeviceRequest(answer.deviceRequest, transcript, accessRoot);
            expect(readerAuthVerified).to.equal([true]);
            // Another origin's transcript does not verify: readerAuth binds the origin.
            expect(readDeviceRequest(answer.deviceRequest, annexCTranscript(answer.encryptionInfo, 'https://evil.example'), accessRoot).readerAuthVerified).to.equal([false]);
            // ... and a root of another PKI does not either.
            const stranger = await party('Stranger Root CA', null, { ca: true });
            expect(readDeviceRequest(answer.deviceRequest, transcript, stranger.cert.toString('pem')).readerAuthVerified).to.equal([false]);
            const items = parsed.docRequests[0]!.itemsRequest.data;
            expect(items.docType).to.equal(DOCTYPE);
            expect([...items.nameSpaces.get(NS)!.entries()]).to.equal([['family_name', true], ['age_over_18', false]]);
            expect(parseEncryptionInfo(answer.encryptionInfo).nonce.length).to.equal(16);
            expect((await sessionOf(answer.session)).status).to.equal('active');

            const data = await respond(answer);
            const res = await post(answer.session, { data });
            expect(res.statusCode, res.payload).to.equal(200);
            expect(res.result).to.equal({});
            const session = await sessionOf(answer.session);
            expect(session.status).to.equal('completed');
            expect(session.responseCode).to.be.a.string();
            expect(session.credentials).to.equal([{ id: 'mdl', format: 'mso_mdoc', docType: DOCTYPE, claims: { [NS]: { family_name: 'Mustermann', age_over_18: true } } }]);
            const rootDer = new Crypto.X509Certificate(issuerRoot).raw;
            expect(session.outcome).to.equal({
                result: 'success',
                credentials: [{ id: 'mdl', format: 'mso_mdoc', docType: DOCTYPE, verified: true, trust: { matchedIssuer: TRUSTED_ISSUER, issuanceThumbprint: Crypto.createHash('sha256').update(rootDer).digest('base64url'), matchMode: 'ca' } }]
            });
            const hook = receiver.deliveries.find((d) => d.path === '/iso')!;
            expect(hook.body).to.equal({ status: 'completed', outcome: session.outcome, credentials: session.credentials, session: answer.session, reference: 'order-7' });

            // Replay: the same sealed response again.
            const again = await post(answer.session, { data });
            expect(again.statusCode).to.equal(400);
            expect((again.result as any).message).to.equal('The presentation offer has already been used');
        });

        it('records exactly one of two concurrent responses; the other answers 400 in the ISO shape', async () => {
            const answer = await offer({ requestId: 'mdl', expected_origins: [ORIGIN] });
            const data = await respond(answer);
            const results = await Promise.all([post(answer.session, { data }), post(answer.session, { data })]);
            expect(results.map((r) => r.statusCode).sort()).to.equal([200, 400]);
            const loser = results.find((r) => r.statusCode === 400)!.result as any;
            expect(loser).to.include({ statusCode: 400, message: 'The presentation offer has already been used' });
            expect((await sessionOf(answer.session)).status).to.equal('completed');
        });

        it('fails with signature_invalid when the device signed another SessionTranscript', async () => {
            const answer = await offer({ requestId: 'mdl-plain' });
            // No expected_origins: the transcript's origin is the public URL's; the wallet signs over another.
            const transcript = annexCTranscript(answer.encryptionInfo, 'http://hallmark.test');
            expect(readDeviceRequest(answer.deviceRequest, transcript).readerAuthVerified).to.equal([false]);
            const data = await sealResponse(answer.encryptionInfo, await deviceResponse(mdl, deviceKey, DOCTYPE, ELEMENTS, annexCTranscript(answer.encryptionInfo, ORIGIN)), transcript);
            const res = await post(answer.session, { data });
            expect(res.statusCode).to.equal(400);
            const body = res.result as any;
            expect(body).to.include({ statusCode: 400, path: `/presentations/${answer.session}/iso-18013-7`, error: 'signature_invalid', message: 'The credential signature is invalid.' });
            expect(Date.parse(body.timestamp)).to.be.a.number();
            expect(body.redirect_uri).to.not.exist();
            const session = await sessionOf(answer.session);
            expect(session).to.include({ status: 'failed', failureCode: 'signature_invalid' });
            expect(session.outcome.credentials).to.equal([{ id: 'mdl', format: 'mso_mdoc', docType: DOCTYPE, verified: false, error: 'signature_invalid', message: 'The credential signature is invalid.' }]);
        });

        it('fails without a code when the ciphertext was changed (HPKE decryption failed)', async () => {
            const answer = await offer({ requestId: 'mdl', expected_origins: [ORIGIN] });
            const res = await post(answer.session, { data: await respond(answer, { tamper: true }) });
            expect(res.statusCode).to.equal(400);
            const body = res.result as any;
            expect(body.message).to.equal('HPKE decryption failed');
            expect(body.error).to.not.exist();
            const session = await sessionOf(answer.session);
            expect(session.status).to.equal('failed');
            expect(session.failureCode).to.not.exist();
            expect(session.errorReason).to.equal('HPKE decryption failed');
            expect(session.outcome).to.equal({ result: 'failed', message: 'HPKE decryption failed' });
        });

        it('fails without a code when one DeviceResponse carries several documents for a query without multiple', async () => {
            const answer = await offer({ requestId: 'mdl', expected_origins: [ORIGIN] });
            const transcript = annexCTranscript(answer.encryptionInfo, ORIGIN);
            // Two documents of the requested docType, each validly issued and device-signed over this transcript.
            const second = await issueMdoc(t.server.signing, {
                tenantId: 'acme', keyChainId: 'issuer', docType: DOCTYPE,
                namespaces: { [NS]: { family_name: 'Other', age_over_18: true } },
                deviceJwk: deviceKey.publicJwk
            });
            const [a, b] = [
                cborDecode(await deviceResponse(mdl, deviceKey, DOCTYPE, ELEMENTS, transcript)) as Map<string, unknown>,
                cborDecode(await deviceResponse(second, deviceKey, DOCTYPE, ELEMENTS, transcript)) as Map<string, unknown>
            ];
            a.set('documents', [...a.get('documents') as unknown[], ...b.get('documents') as unknown[]]);
            const res = await post(answer.session, { data: await sealResponse(answer.encryptionInfo, cborEncode(a), transcript) });
            expect(res.statusCode).to.equal(400);
            const body = res.result as any;
            expect(body.error).to.not.exist();
            expect(body.message).to.equal('Presentation validation failed: several presentations for mdl, which does not allow multiple');
            const session = await sessionOf(answer.session);
            expect(session.status).to.equal('failed');
            expect(session.failureCode).to.not.exist();
        });

        it('answers a redirect with response_code on success when the configuration has one', async () => {
            const answer = await offer({ requestId: 'mdl-plain' });
            const transcript = annexCTranscript(answer.encryptionInfo, 'http://hallmark.test');
            const data = await sealResponse(answer.encryptionInfo, await deviceResponse(mdl, deviceKey, DOCTYPE, ELEMENTS, transcript), transcript);
            const res = await post(answer.session, { data });
            expect(res.statusCode, res.payload).to.equal(200);
            const redirect = new URL((res.result as any).redirect_uri);
            expect(redirect.pathname).to.equal(`/done/${answer.session}`);
            expect(redirect.searchParams.get('response_code')).to.equal((await sessionOf(answer.session)).responseCode);
        });

        it('checks status lists: a valid entry adds status and revocationThumbprint, a revoked one fails', async () => {
            const present = async (idx: number) => {
                const issued = await issueMdocWithStatus(statusIssuer, { docType: DOCTYPE, namespaces: { [NS]: { family_name: 'Mustermann', age_over_18: true } }, deviceJwk: deviceKey.publicJwk, status: mdocStatus({ idx, uri: lists.uri('mdl') }) });
                const answer = await offer({ requestId: 'mdl-status', expected_origins: [ORIGIN] });
                const transcript = annexCTranscript(answer.encryptionInfo, ORIGIN);
                const res = await post(answer.session, { data: await sealResponse(answer.encryptionInfo, await deviceResponse(issued, deviceKey, DOCTYPE, ELEMENTS, transcript), transcript) });
                return { res, session: await sessionOf(answer.session) };
            };
            const thumbprint = Crypto.createHash('sha256').update(Buffer.from(statusRoot.cert.rawData)).digest('base64url');
            const valid = await present(3);
            expect(valid.res.statusCode, valid.res.payload).to.equal(200);
            expect(valid.session.outcome.credentials).to.equal([{ id: 'mdl', format: 'mso_mdoc', docType: DOCTYPE, verified: true, status: 'valid', trust: { matchedIssuer: 'Status issuer', issuanceThumbprint: thumbprint, matchMode: 'ca', revocationThumbprint: thumbprint } }]);
            const revoked = await present(7);
            expect(revoked.res.statusCode).to.equal(400);
            expect(revoked.res.result).to.include({ error: 'verification_error', message: 'The credential could not be verified: credential revoked.' });
            expect(revoked.session).to.include({ status: 'failed', failureCode: 'verification_error' });
        });

        it('refuses bad input with 4xx', async () => {
            for (const body of [
                { requestId: 'pid' },
                { requestId: 'mdl', expected_origins: [ORIGIN, 'https://other.example'] },
                { requestId: 'mdl', redirectUri: 'https://rp.example/x' },
                { requestId: 'mdl', transaction_data: [{ type: 'org.example.payment', credential_ids: ['mdl'] }] },
                { requestId: 'missing' }
            ]) {
                const res = await api('POST', '/api/verifier/offer', { response_type: 'iso-18013-7', ...body });
                expect(res.status, JSON.stringify(body)).to.equal(400);
            }
            const answer = await offer({ requestId: 'mdl' });
            expect((await post(answer.session, {})).statusCode).to.equal(400);
            expect((await post(answer.session, { data: 'x', extra: 1 })).statusCode).to.equal(400);
            expect((await post('no-such-session', { data: 'abc' })).statusCode).to.equal(404);
            // An expired request answers 400 with the spec's message and records nothing.
            const expired = await offer({ requestId: 'mdl', expected_origins: [ORIGIN] });
            await t.server.sessions.update(expired.session, { expiresAt: new Date(Date.now() - 1000).toISOString() });
            const late = await post(expired.session, { data: await respond(expired) });
            expect(late.statusCode).to.equal(400);
            expect((late.result as any).message).to.equal('The presentation session has expired');
            expect((await sessionOf(expired.session)).status).to.equal('active');
            // The OpenID4VP endpoints do not take an ISO session: not by its session id, and its wallet nonce (never
            // published) fetches no request object and takes no response.
            expect((await t.server.inject({ method: 'POST', url: `/presentations/${answer.session}/oid4vp`, payload: { response: 'x', origin: ORIGIN } })).statusCode).to.equal(404);
            const { walletNonce } = (await t.server.sessions.get(answer.session))!;
            expect((await t.server.inject(`/presentations/${walletNonce}/oid4vp/request`)).statusCode).to.equal(400);
            expect((await t.server.inject({ method: 'POST', url: `/presentations/${walletNonce}/oid4vp`, payload: { response: 'x' } })).statusCode).to.equal(400);
            expect((await sessionOf(answer.session)).status).to.equal('active');
            // Garbage that is no EncryptedResponse does not open: the codeless failure.
            const garbage = await post(answer.session, { data: 'bm90LWNib3I' });
            expect(garbage.statusCode).to.equal(400);
            expect((garbage.result as any).message).to.equal('HPKE decryption failed');
        });
    });

    describe(`ISO 18013-7 without the iso18013 plugin (${dialect})`, () => {
        let t: TestServer;
        before(async () => {
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-oid4vp', 'hallmark-kms-db', 'hallmark-tenancy') });
        });
        after(() => t?.stop());

        it('answers 400 for response_type iso-18013-7, and 404 at the response path', async () => {
            const admin = await acmeAdmin(t.server);
            await admin.create('/api/key-chain', { id: 'verifier', usageType: 'access', subject: { commonName: 'v' } });
            await admin.create('/api/verifier/config', { id: 'mdl', dcql_query: MDL_QUERY });
            const res = await admin.api('POST', '/api/verifier/offer', { requestId: 'mdl', response_type: 'iso-18013-7' });
            expect(res.status, res.payload).to.equal(400);
            expect(res.payload).to.contain('iso-18013-7');
            expect((await t.server.inject({ method: 'POST', url: '/presentations/x/iso-18013-7', payload: { data: 'a' } })).statusCode).to.equal(404);
        });
    });
}
