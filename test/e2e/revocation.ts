import Crypto from 'node:crypto';
import Fs from 'node:fs';
import Path from 'node:path';
import { cborDecode, parseIssuerSigned, type DataItem } from '@animo-id/mdoc';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { getListFromStatusListJWT } from '@sd-jwt/jwt-status-list';
import * as Jose from 'jose';
import { STATUS_LIST_PUBLISH_JOB } from '../../plugins/status/jobs/publish';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { Holder, type HeldCredential } from '../helpers/holder';
import { freePort } from '../helpers/net';
import { startTestServer, type TestServer } from '../helpers/server';
import { cwtEntries, verifiedCwt } from '../helpers/status-list';
import { sameKey, verifyMdoc, verifySdJwtVc, Wallet, type HolderKey } from '../helpers/wallet';

/**
 * Issue #12, "Done when", end to end on the demo tenant of examples/config: a credential issued by the service (the
 * real wallet library receives it) can be suspended, reinstated and revoked; its status is visible to any relying
 * party through the standard token (fetched over HTTP, signature checked with jose against its own x5c, whose leaf
 * is the demo issuer's certificate under the demo root, decoded with @sd-jwt/jwt-status-list); and the service's own
 * verifier, reached by the real holder library, refuses it once revoked (and while suspended), in both formats.
 *
 * The verifier keeps a verified list until its `iat + ttl` (lib/verify/status-list.ts), with no way around it from
 * outside. The tenant's ttlSeconds is 1 wherever the verifier must see a change, so a list it read is stale by the
 * next whole second after the presentation that read it: `verifierForgets` waits for that boundary (≤ 1 s), which
 * is a bound on the list's own claims, not a timing assertion. The publishing-job part uses ttl 3600, where a GET
 * that does not sign on the request path is observable, and presents only after the change was published.
 */

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const DEMO = Path.join(__dirname, '../../examples/config');
const NS = 'org.iso.18013.5.1';
const DOCTYPE = 'org.iso.18013.5.1.mDL';

/** The messages of spec 7.2 verification_error naming the status, written out here (not imported from the service). */
const SUSPENDED = 'The credential could not be verified: credential suspended.';
const REVOKED = 'The credential could not be verified: credential revoked.';

const FORMATS = ['dc+sd-jwt', 'mso_mdoc'] as const;
type Format = (typeof FORMATS)[number];

interface StatusRef {
    idx: number;
    uri: string;
}

interface Issued {
    format: Format;
    credential: string;
    key: HolderKey;
    status: StatusRef;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const derOfPem = (pem: string) => pem.replace(/-----(BEGIN|END) CERTIFICATE-----|\s/g, '');
const demoJson = (file: string) => JSON.parse(Fs.readFileSync(Path.join(DEMO, 'demo', file), 'utf8')).spec;

/** The demo issuer's certificate (leaf) and the root the demo trust list names, as base64 DER: read from the files. */
const DEMO_ISSUER_LEAF = derOfPem(demoJson('key-chains/issuer.json').keySource.certificateChain[0]);
const DEMO_ROOT = new Crypto.X509Certificate(demoJson('trust-lists/demo.json').entities[0].certificates[0]);

/** The base demo configuration, its query id in the demo presentation configuration, and claims for an offer. */
const DEMO_CONFIG: Record<Format, { id: string; queryId: string; claims: object }> = {
    'dc+sd-jwt': { id: 'pid', queryId: 'pid', claims: { given_name: 'Erika', family_name: 'Mustermann' } },
    mso_mdoc: { id: 'mdl', queryId: 'mdl', claims: { [NS]: { given_name: 'Erika', family_name: 'Mustermann' } } }
};

/** The MSO `status` of an mdoc IssuerSigned (base64url CBOR), as plain objects; the MSO signature is checked first. */
const msoStatus = async (credential: string): Promise<unknown> => {
    await verifyMdoc(credential, DOCTYPE);
    const doc = parseIssuerSigned(new Uint8Array(Buffer.from(credential, 'base64url')), DOCTYPE);
    const mso = (cborDecode(doc.issuerSigned.issuerAuth.payload) as DataItem<Map<string, unknown>>).data;
    const status = mso.get('status');
    const toPlain = (value: unknown): unknown => (value instanceof Map ? Object.fromEntries([...value].map(([k, v]) => [k, toPlain(v)])) : value);
    return toPlain(status);
};

for (const dialect of DIALECTS) {
    describe(`token status lists end to end on the demo tenant (${dialect})`, () => {
        let t: TestServer;
        let publicUrl: string;
        let admin: string;
        let offerer: string;
        let verifier: string;
        let other: string;
        /** When the last presentation ended (ms): the verifier's cached lists are stale from the next whole second. */
        let lastPresentation = 0;

        const api = async (token: string, method: string, url: string, payload?: object) => {
            const res = await t.server.inject({ method, url, headers: bearer(token), ...(payload ? { payload } : {}) });
            return { status: res.statusCode, body: res.result as any, payload: res.payload };
        };
        const ok = async (token: string, method: string, url: string, payload: object | undefined, status: number) => {
            const res = await api(token, method, url, payload);
            expect(res.status, res.payload).to.equal(status);
            return res.body;
        };
        const statusListConfig = (config: { ttlSeconds: number; immediateUpdate: boolean }) =>
            ok(admin, 'PUT', '/api/status-list-config', { bits: 2, capacity: 1000, ...config }, 200);

        before(async () => {
            const port = await freePort();
            publicUrl = `http://127.0.0.1:${port}`;
            // The verifier fetches the lists over HTTP from this very server on 127.0.0.1: the outbound guard must allow it.
            t = await startTestServer(dialect, { listen: true, env: { PORT: String(port), PUBLIC_URL: publicUrl, CONFIG_FOLDER: DEMO, OUTBOUND_URL_ALLOW_HTTP: 'true', OUTBOUND_URL_ALLOW_PRIVATE_NETWORK: 'true' } });
            const root = await rootToken(t.server);
            admin = (await clientWithToken(t.server, root, { clientId: 'demo-admin', roles: ['tenant:admin'], tenantId: 'demo' })).token;
            offerer = (await clientWithToken(t.server, root, { clientId: 'demo-offers', roles: ['issuance:offer'], tenantId: 'demo' })).token;
            verifier = (await clientWithToken(t.server, root, { clientId: 'demo-verifier', roles: ['presentation:request'], tenantId: 'demo' })).token;
            await createTenant(t.server, root, 'other');
            other = (await clientWithToken(t.server, root, { clientId: 'other-offers', roles: ['issuance:offer'], tenantId: 'other' })).token;

            // The demo trust list accepts the demo issuer chain: its leaf is signed by the root the trust list names.
            expect(new Crypto.X509Certificate(Buffer.from(DEMO_ISSUER_LEAF, 'base64')).verify(DEMO_ROOT.publicKey)).to.be.true();

            await statusListConfig({ ttlSeconds: 1, immediateUpdate: true });
            // Copies of the demo configurations with 2-bit status entries (so suspension exists), each with lists of its
            // own: `-revocable` for the parts with immediateUpdate, `-published` for the publishing-job part, `-active` with
            // activeCredentials.
            for (const format of FORMATS) {
                const { id } = DEMO_CONFIG[format];
                const { createdAt: _c, updatedAt: _u, ...spec } = await ok(admin, 'GET', `/api/issuer/credentials/${id}`, undefined, 200);
                for (const suffix of ['revocable', 'published', 'active']) {
                    const copy = {
                        ...spec,
                        id: `${id}-${suffix}`,
                        config: { ...spec.config, scope: `${id}-${suffix}` },
                        statusManagement: true,
                        status: { enabled: true, bits: 2, credentialConfigurationBound: true },
                        ...(suffix === 'active' ? { activeCredentials: { enabled: true } } : {})
                    };
                    await ok(admin, 'POST', '/api/issuer/credentials', copy, 201);
                }
            }
            // The demo presentation configuration with an explicit mode: strict (the default, named) and disabled.
            const { createdAt: _c, updatedAt: _u, ...identify } = await ok(admin, 'GET', '/api/verifier/config/identify', undefined, 200);
            for (const mode of ['strict', 'disabled']) {
                await ok(admin, 'POST', '/api/verifier/config', { ...identify, id: `identify-${mode}`, statusCheckMode: mode }, 201);
            }
        });

        after(() => t?.stop());

        /** An offer of `configurationIds` with the demo claims: the issuance session id and the offer link. */
        const offer = async (configurationIds: string[], extra: object = {}) => {
            const credentialClaims = Object.fromEntries(configurationIds.map((id) => [id, { type: 'inline', claims: DEMO_CONFIG[id.startsWith('pid') ? 'dc+sd-jwt' : 'mso_mdoc'].claims }]));
            return ok(offerer, 'POST', '/api/issuer/offer', { credentialConfigurationIds: configurationIds, credentialClaims, ...extra }, 201) as Promise<{ session: string; uri: string }>;
        };

        /**
         * The credentials of one response, each with its holder key (matched by the key it is bound to) and its status
         * reference, read from the SD-JWT VC payload or the MSO after checking the issuer signature.
         */
        const issuedOf = async (format: Format, credentials: string[], keys: HolderKey[]): Promise<Issued[]> => Promise.all(credentials.map(async (credential) => {
            if (format === 'dc+sd-jwt') {
                const { payload, x5c } = await verifySdJwtVc(credential);
                expect(x5c[0]).to.equal(DEMO_ISSUER_LEAF);
                const key = keys.find((k) => sameKey(k.publicJwk, (payload.cnf as { jwk: Jose.JWK }).jwk))!;
                return { format, credential, key, status: statusRefOf(payload.status) };
            }
            const { deviceJwk, x5chain } = await verifyMdoc(credential, DOCTYPE);
            expect(Buffer.from(x5chain[0]!).toString('base64')).to.equal(DEMO_ISSUER_LEAF);
            const key = keys.find((k) => sameKey(k.publicJwk, deviceJwk))!;
            return { format, credential, key, status: statusRefOf(await msoStatus(credential)) };
        }));

        /** `status: {status_list: {idx, uri}}` and nothing else; the uri is a list of the demo tenant on this service. */
        const statusRefOf = (status: unknown): StatusRef => {
            expect(status).to.be.an.object();
            expect(Object.keys(status as object)).to.equal(['status_list']);
            const ref = (status as { status_list: StatusRef }).status_list;
            expect(Object.keys(ref).sort()).to.equal(['idx', 'uri']);
            expect(ref.idx).to.be.a.number();
            expect(ref.uri).to.match(new RegExp(`^${publicUrl}/issuers/demo/status-management/status-list/[A-Za-z0-9_-]+$`));
            return ref;
        };

        /** Issues one credential of `configurationId` through the wallet library. */
        const issue = async (format: Format, configurationId: string, extra: object = {}): Promise<Issued> => {
            const wallet = new Wallet();
            const received = await wallet.receive((await offer([configurationId], extra)).uri, { configurationId });
            expect(received.credentials).to.have.length(1);
            return (await issuedOf(format, received.credentials, received.holderKeys))[0]!;
        };

        /**
         * The list token as any relying party gets it: over HTTP, a statuslist+jwt whose signature verifies (jose) with
         * the leaf of its own x5c, that leaf being the demo issuer's certificate; decoded with @sd-jwt/jwt-status-list.
         */
        const publicToken = async (uri: string) => {
            const res = await fetch(uri);
            expect(res.status).to.equal(200);
            expect(res.headers.get('content-type')!).to.startWith('application/statuslist+jwt');
            const jwt = (await res.text()).trim();
            const { payload, protectedHeader } = await Jose.jwtVerify(jwt, (header) => Jose.importX509(`-----BEGIN CERTIFICATE-----\n${header.x5c![0]}\n-----END CERTIFICATE-----`, 'ES256'), { typ: 'statuslist+jwt', algorithms: ['ES256'] });
            expect(protectedHeader.x5c![0]).to.equal(DEMO_ISSUER_LEAF);
            expect(payload.sub).to.equal(uri);
            // max-age is the ttl, less the part of a second that may pass between serving and answering near the token's end.
            const maxAge = Number(/^max-age=(\d+)$/.exec(res.headers.get('cache-control')!)![1]);
            expect(maxAge).to.be.at.most(payload.ttl as number);
            expect(maxAge).to.be.at.least((payload.ttl as number) - 1);
            const list = getListFromStatusListJWT(jwt);
            expect(list.getBitsPerStatus()).to.equal(2);
            return { payload, list };
        };
        const publishedStatus = async (ref: StatusRef) => (await publicToken(ref.uri)).list.getStatus(ref.idx);

        /**
         * The entry in the CWT form (Accept: application/statuslist+cwt), read with CBOR alone: COSE_Sign1 verified with
         * the leaf of its protected x5chain, that leaf being the demo issuer's certificate, `sub` (2) the list uri.
         */
        const publishedCwtStatus = async (ref: StatusRef) => {
            const res = await fetch(ref.uri, { headers: { accept: 'application/statuslist+cwt' } });
            expect(res.status).to.equal(200);
            expect(res.headers.get('content-type')).to.equal('application/statuslist+cwt');
            const { leaf, claims } = verifiedCwt(Buffer.from(await res.arrayBuffer()));
            expect(leaf.raw.toString('base64')).to.equal(DEMO_ISSUER_LEAF);
            expect(claims.get(2)).to.equal(ref.uri);
            const { bits, entries } = cwtEntries(claims);
            expect(bits).to.equal(2);
            return (entries[(ref.idx * bits) >> 3]! >> ((ref.idx * bits) & 7)) & 0b11;
        };

        /** A relying party's conditional GET with the ETag it holds: 304 while the token is the same. */
        const revalidate = async (uri: string, etag: string) => (await fetch(uri, { headers: { 'if-none-match': etag } })).status;
        const etagOf = async (uri: string) => (await fetch(uri)).headers.get('etag')!;

        const patch = (ref: StatusRef, value: number, token = offerer) => {
            const listId = ref.uri.split('/').pop()!;
            return api(token, 'PATCH', `/issuers/demo/status-management/status-list/${listId}/entry/${ref.idx}`, { value });
        };
        const setStatus = async (ref: StatusRef, value: number) => {
            const res = await patch(ref, value);
            expect(res.status, res.payload).to.equal(200);
            expect(res.body).to.equal({ listId: ref.uri.split('/').pop(), index: ref.idx, value });
        };

        /** Waits until every list the verifier read (ttl 1) is past its iat + ttl: the next whole second after the last presentation. */
        const verifierForgets = async () => {
            const boundary = (Math.floor(lastPresentation / 1000) + 1) * 1000;
            await sleep(Math.max(0, boundary - Date.now()) + 5);
        };

        /** Presents `issued` through the holder library to presentation configuration `requestId`; the answer and the session. */
        const present = async (issued: Issued, requestId = 'identify-strict') => {
            const started = await ok(verifier, 'POST', '/api/verifier/offer', { requestId }, 201);
            const holder = new Holder();
            const request = await holder.resolve(started.uri);
            const { queryId } = DEMO_CONFIG[issued.format];
            const held: HeldCredential = issued.format === 'dc+sd-jwt'
                ? { format: 'dc+sd-jwt', credential: issued.credential, key: issued.key }
                : { format: 'mso_mdoc', issuerSigned: issued.credential, key: issued.key };
            const answer = await holder.respond(request, await holder.vpToken(request, { [queryId]: held }));
            lastPresentation = Date.now();
            const session = await ok(verifier, 'GET', `/api/session/${started.session}`, undefined, 200);
            return { answer, session };
        };

        const outcomeEntry = (format: Format) => (format === 'dc+sd-jwt' ? { id: 'pid', format } : { id: 'mdl', format, docType: DOCTYPE });

        const expectAccepted = async (issued: Issued, requestId = 'identify-strict', status: 'valid' | null = 'valid') => {
            const { answer, session } = await present(issued, requestId);
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            expect(session.status).to.equal('completed');
            expect(session.failureCode).to.not.exist();
            expect(session.outcome).to.equal({ result: 'success', credentials: [{ ...outcomeEntry(issued.format), verified: true, ...(status ? { status } : {}) }] });
            const values = session.credentials[0].values[0];
            expect(issued.format === 'dc+sd-jwt' ? values : values[NS]).to.include({ given_name: 'Erika', family_name: 'Mustermann' });
        };

        const expectRefused = async (issued: Issued, message: string) => {
            const { answer, session } = await present(issued);
            expect(answer.status).to.equal(400);
            expect(answer.body).to.equal({ error: 'invalid_request', error_description: message });
            expect(session.status).to.equal('failed');
            expect(session.failureCode).to.equal('verification_error');
            expect(session.errorReason).to.equal(message);
            expect(session.credentials).to.not.exist();
            expect(session.outcome).to.equal({ result: 'failed', error: 'verification_error', message, credentials: [{ ...outcomeEntry(issued.format), verified: false, error: 'verification_error', message }] });
        };

        for (const format of FORMATS) {
            const { id } = DEMO_CONFIG[format];

            it(`${format}: suspends, reinstates and revokes an issued credential; the token shows each change at once (immediateUpdate) and the verifier follows it`, async () => {
                await statusListConfig({ ttlSeconds: 1, immediateUpdate: true });
                const issued = await issue(format, `${id}-revocable`);
                expect(await publishedStatus(issued.status)).to.equal(0);
                // The demo presentation configuration as shipped (strict by default) and its explicitly strict copy.
                await expectAccepted(issued, 'identify');
                await expectAccepted(issued);

                await setStatus(issued.status, 1);
                expect(await publishedStatus(issued.status)).to.equal(1);
                expect(await publishedCwtStatus(issued.status)).to.equal(1);
                await verifierForgets();
                await expectRefused(issued, SUSPENDED);

                await setStatus(issued.status, 0);
                expect(await publishedStatus(issued.status)).to.equal(0);
                expect(await publishedCwtStatus(issued.status)).to.equal(0);
                await verifierForgets();
                await expectAccepted(issued);

                await setStatus(issued.status, 2);
                const { payload, list } = await publicToken(issued.status.uri);
                expect(list.getStatus(issued.status.idx)).to.equal(2);
                expect(payload.ttl).to.equal(1);
                expect(payload.exp!).to.be.above(payload.iat!);
                expect(await publishedCwtStatus(issued.status)).to.equal(2);
                await verifierForgets();
                await expectRefused(issued, REVOKED);
                // Still refused: the verifier's fresh read of the list agrees with its cached one.
                await expectRefused(issued, REVOKED);

                // Revoked is final: neither reinstating nor suspending it is accepted, and the token keeps 2.
                for (const value of [0, 1]) {
                    const res = await patch(issued.status, value);
                    expect(res.status, res.payload).to.equal(409);
                }
                expect(await publishedStatus(issued.status)).to.equal(2);

                // A presentation configuration with statusCheckMode disabled accepts it (and reports no status).
                await expectAccepted(issued, 'identify-disabled', null);
            });
        }

        it('revokes every credential of an issuance session (a batch of SD-JWT VCs and one of mdocs in one offer), by configuration and then all', async () => {
            await statusListConfig({ ttlSeconds: 1, immediateUpdate: true });
            const { session, uri } = await offer(['pid-revocable', 'mdl-revocable']);
            const wallet = new Wallet();
            const received = await wallet.receive(uri, { configurationId: 'pid-revocable', batch: 2 });
            const pids = await issuedOf('dc+sd-jwt', received.credentials, received.holderKeys);
            // The second configuration of the offer with the same access token, as a wallet does.
            const { c_nonce: nonce } = await wallet.client.requestNonce({ issuerMetadata: received.issuerMetadata });
            const deviceKeys = [await wallet.key(), await wallet.key()];
            const { credentialResponse } = await wallet.client.retrieveCredentials({
                issuerMetadata: received.issuerMetadata,
                credentialConfigurationId: 'mdl-revocable',
                accessToken: received.accessToken,
                proofs: { jwt: await wallet.proofs(received.issuerMetadata, 'mdl-revocable', nonce, deviceKeys) }
            });
            const mdocs = await issuedOf('mso_mdoc', (credentialResponse.credentials ?? []).map((c) => (c as { credential: string }).credential), deviceKeys);
            expect(pids).to.have.length(2);
            expect(mdocs).to.have.length(2);
            // Each credential of a batch has its own entry.
            expect(new Set(pids.map((p) => `${p.status.uri}#${p.status.idx}`)).size).to.equal(2);
            expect(new Set(mdocs.map((m) => `${m.status.uri}#${m.status.idx}`)).size).to.equal(2);
            for (const issued of [...pids, ...mdocs]) {
                expect(await publishedStatus(issued.status)).to.equal(0);
                await expectAccepted(issued);
            }

            // Another tenant cannot name this session; bad bodies are refused.
            expect((await api(other, 'POST', '/api/session/revoke', { sessionId: session })).status).to.equal(404);
            expect((await api(offerer, 'POST', '/api/session/revoke', { sessionId: session, unknown: true })).status).to.equal(400);
            expect((await api(offerer, 'POST', '/api/session/revoke', { sessionId: session, status: 'revoked' })).status).to.equal(400);
            expect((await api(offerer, 'POST', '/api/session/revoke', { sessionId: session, status: 4 })).status).to.equal(400);
            for (const issued of [...pids, ...mdocs]) {
                expect(await publishedStatus(issued.status)).to.equal(0);
            }

            expect(await ok(offerer, 'POST', '/api/session/revoke', { sessionId: session, credentialConfigurationId: 'pid-revocable' }, 200)).to.equal({ updated: 2 });
            for (const issued of pids) {
                expect(await publishedStatus(issued.status)).to.equal(2);
            }
            for (const issued of mdocs) {
                expect(await publishedStatus(issued.status)).to.equal(0);
            }
            await verifierForgets();
            for (const issued of pids) {
                await expectRefused(issued, REVOKED);
            }
            for (const issued of mdocs) {
                await expectAccepted(issued);
            }

            // Without a configuration: the rest of the session; entries already revoked are not counted again.
            expect(await ok(offerer, 'POST', '/api/session/revoke', { sessionId: session }, 200)).to.equal({ updated: 2 });
            expect(await ok(offerer, 'POST', '/api/session/revoke', { sessionId: session }, 200)).to.equal({ updated: 0 });
            for (const issued of [...pids, ...mdocs]) {
                expect(await publishedStatus(issued.status)).to.equal(2);
            }
            await verifierForgets();
            for (const issued of [...pids, ...mdocs]) {
                await expectRefused(issued, REVOKED);
                expect((await patch(issued.status, 0)).status).to.equal(409);
            }
        });

        for (const format of FORMATS) {
            it(`${format}: with activeCredentials a new credential for the same subject revokes the earlier one, which the verifier then refuses`, async () => {
                const configurationId = `${DEMO_CONFIG[format].id}-active`;
                // activeCredentials needs the subject in the offer.
                expect((await api(offerer, 'POST', '/api/issuer/offer', { credentialConfigurationIds: [configurationId], credentialClaims: { [configurationId]: { type: 'inline', claims: DEMO_CONFIG[format].claims } } })).status).to.equal(400);
                const first = await issue(format, configurationId, { subject: 'holder-42' });
                const otherSubject = await issue(format, configurationId, { subject: 'holder-43' });
                await expectAccepted(first);
                const second = await issue(format, configurationId, { subject: 'holder-42' });
                expect(second.status.idx).to.not.equal(first.status.idx);
                expect(await publishedStatus(first.status)).to.equal(2);
                expect(await publishedStatus(second.status)).to.equal(0);
                expect(await publishedStatus(otherSubject.status)).to.equal(0);
                await verifierForgets();
                await expectRefused(first, REVOKED);
                await expectAccepted(second);
                await expectAccepted(otherSubject);
            });
        }

        it('revokes a session while its entries are being suspended concurrently: every entry ends revoked, nothing answers 500', async () => {
            const { session, uri } = await offer(['pid-revocable']);
            const wallet = new Wallet();
            const received = await wallet.receive(uri, { configurationId: 'pid-revocable', batch: 3 });
            const pids = await issuedOf('dc+sd-jwt', received.credentials, received.holderKeys);
            expect(pids).to.have.length(3);
            const [revocation, ...patches] = await Promise.all([
                api(offerer, 'POST', '/api/session/revoke', { sessionId: session }),
                ...pids.flatMap((issued) => [patch(issued.status, 1), patch(issued.status, 1)])
            ]);
            expect(revocation!.status, revocation!.payload).to.equal(200);
            // A suspension that came first is overwritten by the revocation; one that came after it finds the entry final.
            for (const res of patches) {
                expect([200, 409], res.payload).to.include(res.status);
            }
            expect(revocation!.body.updated).to.equal(3);
            for (const issued of pids) {
                expect(await publishedStatus(issued.status)).to.equal(2);
            }
            await verifierForgets();
            await expectRefused(pids[0]!, REVOKED);
            // A presentation session, and a session that does not exist, are not issuance sessions to revoke.
            const presentation = await ok(verifier, 'POST', '/api/verifier/offer', { requestId: 'identify' }, 201);
            expect((await api(offerer, 'POST', '/api/session/revoke', { sessionId: presentation.session })).status).to.equal(404);
            expect((await api(offerer, 'POST', '/api/session/revoke', { sessionId: 'no-such-session' })).status).to.equal(404);
        });

        it('refuses entry changes out of range, of unallocated indexes, of another tenant, and without the role', async () => {
            const issued = await issue('dc+sd-jwt', 'pid-revocable');
            const listId = issued.status.uri.split('/').pop()!;
            const entry = (tenant: string, idx: number) => `/issuers/${tenant}/status-management/status-list/${listId}/entry/${idx}`;
            expect((await patch(issued.status, 4)).status).to.equal(400);
            expect((await patch(issued.status, -1)).status).to.equal(400);
            expect((await api(offerer, 'PATCH', entry('demo', issued.status.idx), { value: 1, extra: 1 })).status).to.equal(400);
            expect((await api(offerer, 'PATCH', entry('demo', issued.status.idx), { value: true })).status).to.equal(400);
            // An index of the list that no credential holds, and one beyond its capacity (1000).
            const allocated = new Set((await t.server.db.knex('status_allocations').where({ tenantId: 'demo', listId }).select('idx')).map((row: { idx: number }) => row.idx));
            const free = Array.from({ length: 1000 }, (_v, i) => i).find((i) => !allocated.has(i))!;
            expect((await api(offerer, 'PATCH', entry('demo', free), { value: 1 })).status).to.equal(404);
            expect((await api(offerer, 'PATCH', entry('demo', 1000), { value: 1 })).status).to.equal(404);
            // The other tenant, by its own path and by the demo path; a client without an issuance role.
            expect((await api(other, 'PATCH', entry('other', issued.status.idx), { value: 1 })).status).to.equal(404);
            expect((await api(other, 'PATCH', entry('demo', issued.status.idx), { value: 1 })).status).to.equal(404);
            expect((await patch(issued.status, 1, verifier)).status).to.equal(403);
            // The demo list is no list of the other tenant's public path.
            expect((await fetch(issued.status.uri.replace('/issuers/demo/', '/issuers/other/'))).status).to.equal(404);
            // None of these changed the entry, nor marked the list changed.
            expect(await publishedStatus(issued.status)).to.equal(0);
            await expectAccepted(issued);
        });

        // Last: the publishing job re-signs every stale list of the tenant, so the lists of the parts above get tokens
        // with this part's ttl (3600), which a verifier would then keep for that long.
        for (const format of FORMATS) {
            const { id } = DEMO_CONFIG[format];

            it(`${format}: without immediateUpdate a change reaches the token through the publishing job, then the verifier refuses the credential`, async () => {
                await statusListConfig({ ttlSeconds: 3600, immediateUpdate: false });
                try {
                    const issued = await issue(format, `${id}-published`);
                    // The first GET of a list signs its token (none exists yet).
                    expect(await publishedStatus(issued.status)).to.equal(0);

                    const validEtag = await etagOf(issued.status.uri);
                    expect(await revalidate(issued.status.uri, validEtag)).to.equal(304);
                    await setStatus(issued.status, 1);
                    // A GET serves the valid cached token: the change is not public until the job publishes it.
                    expect(await publishedStatus(issued.status)).to.equal(0);
                    expect(await revalidate(issued.status.uri, validEtag)).to.equal(304);
                    await t.server.jobs.runNow(STATUS_LIST_PUBLISH_JOB);
                    // A relying party revalidating its copy is told it changed.
                    expect(await revalidate(issued.status.uri, validEtag)).to.equal(200);
                    expect(await publishedStatus(issued.status)).to.equal(1);
                    expect(await publishedCwtStatus(issued.status)).to.equal(1);

                    await setStatus(issued.status, 2);
                    expect(await publishedStatus(issued.status)).to.equal(1);
                    await t.server.jobs.runNow(STATUS_LIST_PUBLISH_JOB);
                    const { payload, list } = await publicToken(issued.status.uri);
                    expect(list.getStatus(issued.status.idx)).to.equal(2);
                    expect(payload.ttl).to.equal(3600);
                    // The verifier's first read of this list is the published token.
                    await expectRefused(issued, REVOKED);
                    expect((await patch(issued.status, 0)).status).to.equal(409);
                }
                finally {
                    await statusListConfig({ ttlSeconds: 1, immediateUpdate: true });
                }
            });
        }
    });
}
