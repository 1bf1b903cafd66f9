import Crypto from 'node:crypto';
import Zlib from 'node:zlib';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as X509 from '@peculiar/x509';
import * as Jose from 'jose';
import { entryOf, meaningOf, StatusListChecker, StatusListUnavailable, statusReferenceOf, verifyStatusListToken } from '../../lib/verify/status-list';
import type { TrustAnchor } from '../../lib/verify/trust';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { Holder, newHolderKey, type HeldCredential, type HolderKey } from '../helpers/holder';
import { freePort } from '../helpers/net';
import { party, type Party } from '../helpers/pki';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';
import { issueMdocWithStatus, issueSdJwtVcWithStatus, mdocStatus, startStatusListServer, statusListToken, type StatusListServer, type StatusRef, type TokenOptions } from '../helpers/status-issuer';

/**
 * Token status lists on the verifier side (contract "Token status lists", Verification; spec 2.1 statusCheckMode):
 * SD-JWT VCs and mdocs of a test issuer carry status.status_list references to lists served by a local list server;
 * the holder library presents them to the real response endpoint, and each case is run under strict (the default),
 * best_effort and disabled, counting the requests that reach the list server.
 */

export const lab = Lab.script();
const { describe, it, before, after, beforeEach } = lab;

const DOCTYPE = 'org.iso.18013.5.1.mDL';
const NS = 'org.iso.18013.5.1';
const VCT = 'urn:eudi:pid:1';
const MODES = ['strict', 'best_effort', 'disabled'] as const;
type Mode = (typeof MODES)[number];
const FORMATS = ['dc+sd-jwt', 'mso_mdoc'] as const;
type Format = (typeof FORMATS)[number];

const PID_QUERY = { credentials: [{ id: 'pid', format: 'dc+sd-jwt', meta: { vct_values: [VCT] }, claims: [{ path: ['given_name'] }] }] };
const MDL_QUERY = { credentials: [{ id: 'mdl', format: 'mso_mdoc', meta: { doctype_value: DOCTYPE }, claims: [{ path: [NS, 'family_name'] }] }] };

/** Expected messages, written out here: spec 7.2's verification_error message naming the status. */
const REVOKED = 'The credential could not be verified: credential revoked.';
const SUSPENDED = 'The credential could not be verified: credential suspended.';
const UNAVAILABLE = 'The credential could not be verified: status list unavailable.';
const MALFORMED = 'The credential could not be verified.';
const STATUS_LIST_ACCEPT = 'application/statuslist+jwt';

/** Entries of the 2-bit test lists: 3 valid, 5 suspended, 7 revoked (contract: 1 suspended, 2 revoked). */
const VALID_IDX = 3;
const SUSPENDED_IDX = 5;
const REVOKED_IDX = 7;
const TWO_BIT_VALUES = [0, 0, 0, 0, 0, 1, 0, 2, 0, 3];

interface Pki {
    root: Party;
    issuer: Party;
    signer: Party;
    /** Another issuer the tenant trusts, with its own root: its signer must not speak for our issuer's credentials. */
    otherRoot: Party;
    otherSigner: Party;
    /** A signer under a root nobody trusts. */
    untrustedSigner: Party;
}

const makePki = async (): Promise<Pki> => {
    const root = await party('Status Test Root CA', null, { ca: true });
    const otherRoot = await party('Other Issuer Root CA', null, { ca: true });
    const untrustedRoot = await party('Untrusted Root CA', null, { ca: true });
    return {
        root,
        issuer: await party('Status Test Issuer', root),
        signer: await party('Status Test List Signer', root),
        otherRoot,
        otherSigner: await party('Other Issuer List Signer', otherRoot),
        untrustedSigner: await party('Untrusted List Signer', untrustedRoot)
    };
};

/** The variants of an unreachable or invalid list: how the list server answers (or that nothing listens). */
interface UnavailableVariant {
    name: string;
    idx?: number;
    /** The credential names a port nothing listens on. */
    down?: boolean;
    answer?: (pki: Pki, id: string, list: StatusListServer) => void;
}

const tokenAnswer = (options: (pki: Pki) => Partial<TokenOptions>) => (pki: Pki, id: string, list: StatusListServer) =>
    list.serve(id, { token: (uri) => statusListToken({ bits: 2, values: TWO_BIT_VALUES, chain: [pki.signer], sub: uri, ...options(pki) }) });

const UNAVAILABLE_VARIANTS: UnavailableVariant[] = [
    { name: 'the list server is down', down: true },
    { name: 'the list server answers 500', answer: (_pki, id, list) => list.serve(id, { status: 500 }) },
    { name: 'the list server answers 404', answer: (_pki, id, list) => list.serve(id, { status: 404 }) },
    { name: 'the answer is not a JWT', answer: (_pki, id, list) => list.serve(id, { token: async () => 'not-a-status-list-token' }) },
    { name: 'the token signature is broken', answer: tokenAnswer(() => ({ breakSignature: true })) },
    { name: 'the token is signed under an untrusted root', answer: tokenAnswer((pki) => ({ chain: [pki.untrustedSigner] })) },
    { name: 'the token is signed by another trusted issuer', answer: tokenAnswer((pki) => ({ chain: [pki.otherSigner] })) },
    { name: 'the token sub names another list', answer: tokenAnswer(() => ({ sub: 'http://127.0.0.1:1/lists/another' })) },
    { name: 'the token has expired', answer: tokenAnswer(() => ({ iat: -7200, exp: -3600 })) },
    { name: 'the token typ is not statuslist+jwt', answer: tokenAnswer(() => ({ typ: 'JWT' })) },
    { name: 'the index is beyond the list', idx: 5000, answer: tokenAnswer(() => ({ size: 16 })) }
];

for (const dialect of DIALECTS) {
    describe(`OpenID4VP status list checks (${dialect})`, () => {
        let t: TestServer;
        let admin: string;
        let pki: Pki;
        let lists: StatusListServer;
        let downUri: string;
        let holderKey: HolderKey;
        let deviceKey: HolderKey;
        const holder = new Holder();
        let listCount = 0;

        const api = async (method: string, url: string, payload?: object) => {
            const res = await t.server.inject({ method, url, headers: bearer(admin), ...(payload ? { payload } : {}) });
            return { status: res.statusCode, body: res.result as any, payload: res.payload };
        };
        const create = async (url: string, payload: object) => {
            const res = await api('POST', url, payload);
            expect(res.status, res.payload).to.equal(201);
            return res.body;
        };
        const configId = (format: Format, mode: Mode) => `${format === 'dc+sd-jwt' ? 'pid' : 'mdl'}-${mode}`;

        before(async () => {
            pki = await makePki();
            lists = await startStatusListServer();
            downUri = `http://127.0.0.1:${await freePort()}/lists/down`;
            const port = await freePort();
            t = await startTestServer(dialect, {
                listen: true,
                manifest: manifestFor('hallmark-oid4vp', 'hallmark-kms-db', 'hallmark-tenancy'),
                env: { PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}`, OUTBOUND_URL_ALLOW_HTTP: 'true', OUTBOUND_URL_ALLOW_PRIVATE_NETWORK: 'true' }
            });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            await create('/api/key-chain', { id: 'verifier', usageType: 'access', subject: { commonName: 'Acme verifier' } });
            await create('/api/trust-lists', { id: 'issuers', entities: [
                { name: 'Status Test Issuer', serviceType: 'pid-issuance', certificates: [pki.root.cert.toString('pem')] },
                { name: 'Other Issuer', serviceType: 'eaa-issuance', certificates: [pki.otherRoot.cert.toString('pem')] }
            ] });
            for (const format of FORMATS) {
                for (const mode of MODES) {
                    // strict is the default: its configuration does not name a mode.
                    await create('/api/verifier/config', { id: configId(format, mode), dcql_query: format === 'dc+sd-jwt' ? PID_QUERY : MDL_QUERY, ...(mode === 'strict' ? {} : { statusCheckMode: mode }) });
                }
            }
            holderKey = await newHolderKey();
            deviceKey = await newHolderKey();
        });

        after(async () => {
            await t?.stop();
            await lists?.stop();
        });

        /** A fresh list id on the list server. */
        const newList = (name: string) => `${name.replace(/[^a-z0-9]+/gi, '-')}-${++listCount}`;

        /** A credential of the test issuer with a status list reference `ref` (none when undefined), or a raw `status`. */
        const credential = (format: Format, status: { ref?: StatusRef; raw?: unknown } = {}): Promise<string> => format === 'dc+sd-jwt'
            ? issueSdJwtVcWithStatus(pki.issuer, { vct: VCT, claims: { given_name: 'Erika', family_name: 'Mustermann' }, holderJwk: holderKey.publicJwk, status: status.raw ?? (status.ref ? { status_list: status.ref } : undefined) })
            : issueMdocWithStatus(pki.issuer, { docType: DOCTYPE, namespaces: { [NS]: { family_name: 'Mustermann', given_name: 'Erika' } }, deviceJwk: deviceKey.publicJwk, ...(status.raw || status.ref ? { status: (status.raw as Map<string, unknown>) ?? mdocStatus(status.ref!) } : {}) });

        /** Presents `issued` under `mode` through the holder library; the wallet's answer and the session afterwards. */
        const present = async (format: Format, mode: Mode, issued: string) => {
            const offer = await api('POST', '/api/verifier/offer', { requestId: configId(format, mode) });
            expect(offer.status, offer.payload).to.equal(201);
            const request = await holder.resolve(offer.body.uri);
            const held: Record<string, HeldCredential> = format === 'dc+sd-jwt'
                ? { pid: { format, credential: issued, key: holderKey } }
                : { mdl: { format, issuerSigned: issued, key: deviceKey } };
            const answer = await holder.respond(request, await holder.vpToken(request, held));
            const session = await api('GET', `/api/session/${offer.body.session}`);
            expect(session.status).to.equal(200);
            return { answer, session: session.body };
        };

        const entryOf = (format: Format) => (format === 'dc+sd-jwt' ? { id: 'pid', format } : { id: 'mdl', format, docType: DOCTYPE });

        const expectVerified = (result: Awaited<ReturnType<typeof present>>, format: Format, status?: 'valid' | 'unknown') => {
            expect(result.answer.status, JSON.stringify(result.answer.body)).to.equal(200);
            expect(result.session.status).to.equal('completed');
            expect(result.session.failureCode).to.not.exist();
            expect(result.session.outcome).to.equal({ result: 'success', credentials: [{ ...entryOf(format), verified: true, ...(status ? { status } : {}) }] });
            // The status reference is never among the presented values.
            expect(JSON.stringify(result.session.credentials)).to.not.contain('status_list');
        };

        const expectFailed = (result: Awaited<ReturnType<typeof present>>, format: Format, message: string) => {
            expect(result.answer.status).to.equal(400);
            expect(result.answer.body).to.equal({ error: 'invalid_request', error_description: message });
            expect(result.session.status).to.equal('failed');
            expect(result.session.failureCode).to.equal('verification_error');
            expect(result.session.errorReason).to.equal(message);
            expect(result.session.credentials).to.not.exist();
            expect(result.session.outcome).to.equal({ result: 'failed', error: 'verification_error', message, credentials: [{ ...entryOf(format), verified: false, error: 'verification_error', message }] });
            // Neither the list URI nor the index is shown.
            expect(JSON.stringify(result.session)).to.not.contain('127.0.0.1');
        };

        const validList = (id: string, options: Partial<TokenOptions> = {}) =>
            lists.serve(id, { token: (uri) => statusListToken({ bits: 2, values: TWO_BIT_VALUES, chain: [pki.signer], sub: uri, ...options }) });

        for (const format of FORMATS) {
            describe(format, () => {
                it('a valid entry verifies with status "valid" (strict by default, and best_effort); the list is fetched once with Accept statuslist+jwt, then cached', async () => {
                    const id = newList(`valid-${format}`);
                    validList(id);
                    const issued = await credential(format, { ref: { idx: VALID_IDX, uri: lists.uri(id) } });
                    expectVerified(await present(format, 'strict', issued), format, 'valid');
                    expect(lists.requests(id)).to.equal([{ accept: STATUS_LIST_ACCEPT }]);
                    expectVerified(await present(format, 'strict', issued), format, 'valid');
                    expectVerified(await present(format, 'best_effort', issued), format, 'valid');
                    expect(lists.requests(id)).to.have.length(1);
                    // Another entry of the cached list is read from the cache too.
                    expectFailed(await present(format, 'strict', await credential(format, { ref: { idx: REVOKED_IDX, uri: lists.uri(id) } })), format, REVOKED);
                    expect(lists.requests(id)).to.have.length(1);
                });

                it('concurrent presentations of one list share a single fetch', async () => {
                    const id = newList(`concurrent-${format}`);
                    validList(id);
                    const issued = await credential(format, { ref: { idx: VALID_IDX, uri: lists.uri(id) } });
                    const results = await Promise.all([present(format, 'strict', issued), present(format, 'best_effort', issued), present(format, 'strict', issued)]);
                    results.forEach((result) => expectVerified(result, format, 'valid'));
                    expect(lists.requests(id)).to.have.length(1);
                });

                it('a list whose ttl has already run out is not kept: each presentation fetches it', async () => {
                    const id = newList(`ttl0-${format}`);
                    validList(id, { ttl: 0 });
                    const issued = await credential(format, { ref: { idx: VALID_IDX, uri: lists.uri(id) } });
                    expectVerified(await present(format, 'strict', issued), format, 'valid');
                    expectVerified(await present(format, 'strict', issued), format, 'valid');
                    expect(lists.requests(id)).to.have.length(2);
                });

                it('a list without exp and ttl is kept (for a while) and verifies', async () => {
                    const id = newList(`no-exp-${format}`);
                    validList(id, { exp: null, ttl: null });
                    const issued = await credential(format, { ref: { idx: VALID_IDX, uri: lists.uri(id) } });
                    expectVerified(await present(format, 'strict', issued), format, 'valid');
                    expectVerified(await present(format, 'strict', issued), format, 'valid');
                    expect(lists.requests(id)).to.have.length(1);
                });

                for (const [status, idx, message] of [['revoked', REVOKED_IDX, REVOKED], ['suspended', SUSPENDED_IDX, SUSPENDED]] as const) {
                    it(`a ${status} entry fails in strict and best_effort ("${message}"); disabled verifies without fetching`, async () => {
                        for (const mode of MODES) {
                            const id = newList(`${status}-${format}-${mode}`);
                            validList(id);
                            const result = await present(format, mode, await credential(format, { ref: { idx, uri: lists.uri(id) } }));
                            if (mode === 'disabled') {
                                expectVerified(result, format);
                                expect(lists.requests(id)).to.have.length(0);
                            }
                            else {
                                expectFailed(result, format, message);
                                expect(lists.requests(id)).to.have.length(1);
                            }
                        }
                    });
                }

                it('on a 1-bit list, 1 is revoked; another value than 0, 1 or 2 on a wider list is not valid either', async () => {
                    const id = newList(`one-bit-${format}`);
                    validList(id, { bits: 1, values: [0, 1] });
                    expectFailed(await present(format, 'strict', await credential(format, { ref: { idx: 1, uri: lists.uri(id) } })), format, REVOKED);
                    expectVerified(await present(format, 'best_effort', await credential(format, { ref: { idx: 0, uri: lists.uri(id) } })), format, 'valid');
                    const custom = newList(`custom-${format}`);
                    validList(custom);
                    expectFailed(await present(format, 'best_effort', await credential(format, { ref: { idx: 9, uri: lists.uri(custom) } })), format, 'The credential could not be verified: credential status 3.');
                });

                it('a credential without a status reference is not checked and its outcome has no status', async () => {
                    for (const mode of MODES) {
                        expectVerified(await present(format, mode, await credential(format)), format);
                    }
                });

                it('a malformed status reference fails the credential (verification_error) in every mode, without a fetch', async () => {
                    const id = newList(`malformed-${format}`);
                    validList(id);
                    const raws = format === 'dc+sd-jwt'
                        ? [{ status_list: { idx: -1, uri: lists.uri(id) } }, { status_list: { idx: 1.5, uri: lists.uri(id) } }, { status_list: { idx: 1, uri: 'ftp://lists.example/1' } }, { status_list: { idx: 1 } }, 'revoked']
                        : [mdocStatus({ idx: -1, uri: lists.uri(id) }), mdocStatus({ idx: 1, uri: 'ftp://lists.example/1' }), new Map([['status_list', new Map([['idx', 1]])]])];
                    for (const [i, raw] of raws.entries()) {
                        expectFailed(await present(format, MODES[i % MODES.length]!, await credential(format, { raw })), format, MALFORMED);
                    }
                    expect(lists.requests(id)).to.have.length(0);
                });

                it('a status claim without status_list (another mechanism) is not checked', async () => {
                    const raw = format === 'dc+sd-jwt' ? { identifier_list: { id: '1', uri: 'https://lists.example/1' } } : new Map([['identifier_list', new Map([['id', '1']])]]);
                    expectVerified(await present(format, 'strict', await credential(format, { raw })), format);
                });

                for (const { name, idx, down, answer } of UNAVAILABLE_VARIANTS) {
                    it(`${name}: strict fails "status list unavailable", best_effort verifies with status "unknown", disabled verifies without fetching`, async () => {
                        for (const mode of MODES) {
                            const id = newList(`${name}-${format}-${mode}`);
                            answer?.(pki, id, lists);
                            const result = await present(format, mode, await credential(format, { ref: { idx: idx ?? VALID_IDX, uri: down ? downUri : lists.uri(id) } }));
                            if (mode === 'strict') {
                                expectFailed(result, format, UNAVAILABLE);
                            }
                            else {
                                expectVerified(result, format, mode === 'best_effort' ? 'unknown' : undefined);
                            }
                            expect(lists.requests(id), mode).to.have.length(down || mode === 'disabled' ? 0 : 1);
                        }
                    });
                }
            });
        }

        it('a query with an SD-JWT VC and an mdoc checks both; a revoked one fails the presentation', async () => {
            await create('/api/verifier/config', { id: 'both', dcql_query: { credentials: [...PID_QUERY.credentials, ...MDL_QUERY.credentials] } });
            const id = newList('both');
            validList(id);
            const run = async (pidIdx: number, mdlIdx: number) => {
                const offer = await api('POST', '/api/verifier/offer', { requestId: 'both' });
                const request = await holder.resolve(offer.body.uri);
                const vpToken = await holder.vpToken(request, {
                    pid: { format: 'dc+sd-jwt', credential: await credential('dc+sd-jwt', { ref: { idx: pidIdx, uri: lists.uri(id) } }), key: holderKey },
                    mdl: { format: 'mso_mdoc', issuerSigned: await credential('mso_mdoc', { ref: { idx: mdlIdx, uri: lists.uri(id) } }), key: deviceKey }
                });
                const answer = await holder.respond(request, vpToken);
                return { answer, session: (await api('GET', `/api/session/${offer.body.session}`)).body };
            };
            const ok = await run(VALID_IDX, VALID_IDX);
            expect(ok.answer.status).to.equal(200);
            expect(ok.session.outcome.credentials).to.equal([{ id: 'pid', format: 'dc+sd-jwt', verified: true, status: 'valid' }, { id: 'mdl', format: 'mso_mdoc', docType: DOCTYPE, verified: true, status: 'valid' }]);
            const revoked = await run(VALID_IDX, REVOKED_IDX);
            expect(revoked.answer.status).to.equal(400);
            expect(revoked.session.outcome.credentials).to.equal([{ id: 'mdl', format: 'mso_mdoc', docType: DOCTYPE, verified: false, error: 'verification_error', message: REVOKED }]);
            expect(lists.requests(id)).to.have.length(1);
        });

        it('statusCheckMode is validated: another value answers 400', async () => {
            const res = await api('POST', '/api/verifier/config', { id: 'bad-mode', dcql_query: PID_QUERY, statusCheckMode: 'lenient' });
            expect(res.status).to.equal(400);
            expect(res.payload).to.contain('statusCheckMode');
        });
    });
}

describe('lib/verify/status-list StatusListChecker', () => {
    let pki: Pki;
    let lists: StatusListServer;
    let anchor: TrustAnchor;
    const open = { allowHttp: true, allowPrivateNetwork: true, allowedHosts: [] };
    const check = (checker: StatusListChecker, uri: string, idx: number, mode: 'strict' | 'best_effort') =>
        checker.check({ reference: { idx, uri }, anchor, mode, now: new Date(), skewSeconds: 60 });

    before(async () => {
        pki = await makePki();
        lists = await startStatusListServer();
        anchor = { certificate: pki.root.cert.toString('pem'), serviceType: 'pid-issuance' };
        lists.serve('ok', { token: (uri) => statusListToken({ bits: 2, values: TWO_BIT_VALUES, chain: [pki.signer], sub: uri }) });
    });
    after(() => lists.stop());

    it('goes through the outbound guard: a policy that refuses private addresses makes the list unavailable, nothing is sent', async () => {
        const checker = new StatusListChecker({ outbound: { allowHttp: true, allowPrivateNetwork: false, allowedHosts: [] } });
        const before = lists.requests('ok').length;
        const unknown = await check(checker, lists.uri('ok'), VALID_IDX, 'best_effort');
        expect(unknown!.status).to.equal('unknown');
        expect(unknown!.detail).to.contain('OUTBOUND_URL_ALLOW_PRIVATE_NETWORK');
        const error = await expect(check(checker, lists.uri('ok'), VALID_IDX, 'strict')).to.reject() as Error & { code?: string };
        expect(error.message).to.equal(UNAVAILABLE);
        expect(error.code).to.equal('verification_error');
        expect(lists.requests('ok').length).to.equal(before);
        const allowed = await check(new StatusListChecker({ outbound: open }), lists.uri('ok'), VALID_IDX, 'strict');
        expect(allowed).to.equal({ status: 'valid' });
    });

    it('an entry of 2^24 bytes at most is inflated: a larger (or bomb) lst makes the list unavailable', async () => {
        const bomb = Zlib.deflateSync(Buffer.alloc(17 * 1024 * 1024)).toString('base64url');
        lists.serve('bomb', { token: async (uri) => new Jose.SignJWT({ sub: uri, iat: Math.floor(Date.now() / 1000), status_list: { bits: 1, lst: bomb } })
            .setProtectedHeader({ alg: 'ES256', typ: 'statuslist+jwt', x5c: [Buffer.from(pki.signer.cert.rawData).toString('base64')] }).sign(pki.signer.privateKey) });
        const result = await check(new StatusListChecker({ outbound: open }), lists.uri('bomb'), 0, 'best_effort');
        expect(result!.status).to.equal('unknown');
        expect(result!.detail).to.contain('inflate');
    });

    it('refuses a token with bits other than 1, 2, 4, 8, a missing iat, or an iat in the future', async () => {
        const signed = (payload: (uri: string) => Record<string, unknown>) => ({ token: async (uri: string) => new Jose.SignJWT(payload(uri))
            .setProtectedHeader({ alg: 'ES256', typ: 'statuslist+jwt', x5c: [Buffer.from(pki.signer.cert.rawData).toString('base64')] }).sign(pki.signer.privateKey) });
        const now = Math.floor(Date.now() / 1000);
        const lst = Zlib.deflateSync(Buffer.alloc(4)).toString('base64url');
        lists.serve('bits3', signed((uri) => ({ sub: uri, iat: now, status_list: { bits: 3, lst } })));
        lists.serve('no-iat', signed((uri) => ({ sub: uri, status_list: { bits: 1, lst } })));
        lists.serve('future', signed((uri) => ({ sub: uri, iat: now + 3600, status_list: { bits: 1, lst } })));
        lists.serve('fine', signed((uri) => ({ sub: uri, iat: now, status_list: { bits: 1, lst } })));
        const checker = new StatusListChecker({ outbound: open });
        for (const [id, reason] of [['bits3', 'status_list'], ['no-iat', 'iat'], ['future', 'future']]) {
            const result = await check(checker, lists.uri(id!), 0, 'best_effort');
            expect(result!.status, id).to.equal('unknown');
            expect(result!.detail, id).to.contain(reason!);
        }
        expect(await check(checker, lists.uri('fine'), 31, 'strict')).to.equal({ status: 'valid' });
        expect((await check(checker, lists.uri('fine'), 32, 'best_effort'))!.detail).to.contain('beyond the status list');
    });

    it('keeps at most maxEntries lists, dropping the oldest', async () => {
        const checker = new StatusListChecker({ outbound: open, maxEntries: 2 });
        for (const id of ['cap-a', 'cap-b', 'cap-c']) {
            lists.serve(id, { token: (uri) => statusListToken({ bits: 2, values: TWO_BIT_VALUES, chain: [pki.signer], sub: uri }) });
            await check(checker, lists.uri(id), VALID_IDX, 'strict');
        }
        await check(checker, lists.uri('cap-c'), VALID_IDX, 'strict');
        await check(checker, lists.uri('cap-b'), VALID_IDX, 'strict');
        await check(checker, lists.uri('cap-a'), VALID_IDX, 'strict');
        expect([lists.requests('cap-a').length, lists.requests('cap-b').length, lists.requests('cap-c').length]).to.equal([2, 1, 1]);
    });

    it('reads and forgets cached lists by time: a list past iat + ttl is fetched again', async () => {
        lists.serve('aging', { token: (uri) => statusListToken({ bits: 2, values: TWO_BIT_VALUES, chain: [pki.signer], sub: uri, ttl: 600 }) });
        const checker = new StatusListChecker({ outbound: open });
        const at = (seconds: number) => checker.check({ reference: { idx: VALID_IDX, uri: lists.uri('aging') }, anchor, mode: 'strict', now: new Date(Date.now() + seconds * 1000), skewSeconds: 60 });
        expect(await at(0)).to.equal({ status: 'valid' });
        expect(await at(300)).to.equal({ status: 'valid' });
        expect(lists.requests('aging')).to.have.length(1);
        expect(await at(700)).to.equal({ status: 'valid' });
        expect(lists.requests('aging')).to.have.length(2);
    });

    it('checks started together share one fetch', async () => {
        lists.serve('together', { token: (uri) => statusListToken({ bits: 2, values: TWO_BIT_VALUES, chain: [pki.signer], sub: uri }) });
        const checker = new StatusListChecker({ outbound: open });
        const results = await Promise.all([check(checker, lists.uri('together'), VALID_IDX, 'strict'), check(checker, lists.uri('together'), VALID_IDX, 'best_effort')]);
        expect(results).to.equal([{ status: 'valid' }, { status: 'valid' }]);
        expect(lists.requests('together')).to.have.length(1);
    });

    it('keeps lists within maxBytes: a list larger than the bound is not kept, and older ones make room', async () => {
        for (const id of ['big', 'room-a', 'room-b']) {
            lists.serve(id, { token: (uri) => statusListToken({ bits: 2, values: TWO_BIT_VALUES, size: 128, chain: [pki.signer], sub: uri }) });
        }
        const small = new StatusListChecker({ outbound: open, maxBytes: 20 });
        await check(small, lists.uri('big'), VALID_IDX, 'strict');
        await check(small, lists.uri('big'), VALID_IDX, 'strict');
        expect(lists.requests('big')).to.have.length(2);
        const two = new StatusListChecker({ outbound: open, maxBytes: 40 });
        for (const id of ['room-a', 'room-b', 'room-b', 'room-a']) {
            await check(two, lists.uri(id), VALID_IDX, 'strict');
        }
        expect([lists.requests('room-a').length, lists.requests('room-b').length]).to.equal([2, 1]);
    });

    it('statusReferenceOf: none, another mechanism, JSON and CBOR references; malformed ones are verification_error', () => {
        const uri = 'https://lists.example/1';
        expect(statusReferenceOf(undefined)).to.be.undefined();
        expect(statusReferenceOf({ identifier_list: {} })).to.be.undefined();
        expect(statusReferenceOf(new Map([['other', 1]]))).to.be.undefined();
        expect(statusReferenceOf({ status_list: { idx: 0, uri } })).to.equal({ idx: 0, uri });
        expect(statusReferenceOf(mdocStatus({ idx: 12, uri }))).to.equal({ idx: 12, uri });
        for (const bad of [null, 'revoked', [1], { status_list: 'x' }, { status_list: { idx: 2 ** 53, uri } }, { status_list: { idx: '1', uri } }, { status_list: { idx: 1, uri: 'http://' } }, { status_list: { idx: 1, uri: 7 } }]) {
            expect(() => statusReferenceOf(bad), JSON.stringify(bad)).to.throw(MALFORMED);
        }
    });

    it('entryOf reads entries least significant bits first; meaningOf follows the contract', () => {
        expect([0, 1].map((i) => entryOf({ bits: 4, entries: Buffer.from([0x21]) }, i))).to.equal([1, 2]);
        expect([0, 1, 2, 3, 4, 5, 6, 7].map((i) => entryOf({ bits: 1, entries: Buffer.from([0xb9]) }, i))).to.equal([1, 0, 0, 1, 1, 1, 0, 1]);
        expect(entryOf({ bits: 8, entries: Buffer.from([0, 0xff]) }, 1)).to.equal(255);
        expect(() => entryOf({ bits: 2, entries: Buffer.from([0]) }, 4)).to.throw(StatusListUnavailable, /beyond/);
        expect([[0, 1], [1, 1], [0, 2], [1, 2], [2, 2], [3, 2], [255, 8]].map(([value, bits]) => meaningOf(value!, bits!))).to.equal(['valid', 'revoked', 'valid', 'suspended', 'revoked', 'other', 'other']);
    });

    describe('verifyStatusListToken', () => {
        const uri = 'https://lists.example/7';
        const reference = { idx: 0, uri };
        // Per test: the whole suite may run long after this file is loaded, and the claims carry exp = now + 60.
        let now = 0;
        beforeEach(() => {
            now = Math.floor(Date.now() / 1000);
        });
        const lst = Zlib.deflateSync(Buffer.from([0x04])).toString('base64url');
        const x5c = () => [Buffer.from(pki.signer.cert.rawData).toString('base64')];
        const sign = (payload: Record<string, unknown>, header: Record<string, unknown> = {}, key = pki.signer.privateKey) =>
            new Jose.SignJWT(payload).setProtectedHeader({ alg: 'ES256', typ: 'statuslist+jwt', x5c: x5c(), ...header } as Jose.JWTHeaderParameters).sign(key);
        const claims = (extra: Record<string, unknown> = {}) => ({ sub: uri, iat: now, exp: now + 3600, ttl: 600, status_list: { bits: 1, lst }, ...extra });
        const refused = async (token: string, reason: string) => {
            const error = await expect(verifyStatusListToken(token, reference, anchor, new Date(), 60)).to.reject(StatusListUnavailable);
            expect(error.message).to.contain(reason);
        };
        const part = (value: string) => Buffer.from(value).toString('base64url');
        /** A JWS signed by hand with the list signer's key, whatever its header says. */
        const rawSign = (header: Record<string, unknown>, payload: unknown) => {
            const input = `${part(JSON.stringify(header))}.${part(typeof payload === 'string' ? payload : JSON.stringify(payload))}`;
            return `${input}.${Crypto.sign('sha256', Buffer.from(input), { key: pki.signer.privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`;
        };

        it('answers bits, the inflated entries, and min(exp, iat + ttl) as the cache end', async () => {
            expect(await verifyStatusListToken(await sign(claims()), reference, anchor, new Date(), 60)).to.equal({ bits: 1, entries: Buffer.from([0x04]), until: (now + 600) * 1000 });
            expect((await verifyStatusListToken(await sign(claims({ exp: now + 60 })), reference, anchor, new Date(), 60)).until).to.equal((now + 60) * 1000);
        });

        it('refuses malformed tokens and headers', async () => {
            const good = await sign(claims());
            const [h, p, sig] = good.split('.');
            await refused('a.b', 'not a compact JWS');
            await refused(`!!.${p}.${sig}`, 'header is not base64url');
            await refused(`${part('not json')}.${p}.${sig}`, 'header is not JSON');
            await refused(`${part('[1]')}.${p}.${sig}`, 'header is not a JSON object');
            await refused(`${h}.${p}.${sig!.slice(0, 40)}`, 'signature does not verify');
            await refused(`${h}.${part('{"sub":1}')}.${sig}`, 'signature does not verify');
            await refused(rawSign({ alg: 'ES384', typ: 'statuslist+jwt', x5c: x5c() }, claims()), 'alg is ES384');
            await refused(await sign(claims(), { x5c: undefined }), 'no x5c');
            await refused(await sign(claims(), { x5c: [] }), 'no x5c');
        });

        it('refuses a signer whose key is not P-256, even under the right anchor', async () => {
            const keys = await Crypto.webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-384' }, true, ['sign', 'verify']) as Crypto.webcrypto.CryptoKeyPair;
            const cert = await X509.X509CertificateGenerator.create({
                serialNumber: '0a1b', subject: 'C=DE, CN=P-384 list signer', issuer: pki.root.cert.subject, notBefore: new Date(Date.now() - 86_400_000), notAfter: new Date(Date.now() + 86_400_000),
                signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' }, publicKey: keys.publicKey as never, signingKey: pki.root.keys.privateKey as never,
                extensions: [new X509.BasicConstraintsExtension(false, undefined, true)]
            });
            const token = await sign(claims(), { x5c: [Buffer.from(cert.rawData).toString('base64')] });
            await refused(token, 'not P-256');
        });

        it('refuses payloads that break the claims rules', async () => {
            await refused(await sign(claims({ sub: 'https://lists.example/8' })), 'sub is not the uri');
            await refused(await sign(claims({ iat: 'now' })), 'iat is missing or not a number');
            await refused(await sign(claims({ exp: '1' })), 'exp is missing or not a number');
            // JSON.parse reads 1e400 as Infinity.
            await refused(rawSign({ alg: 'ES256', typ: 'statuslist+jwt', x5c: x5c() }, JSON.stringify(claims()).replace(/"exp":\d+/, '"exp":1e400')), 'exp is missing or not a number');
            await refused(await sign(claims({ ttl: -1 })), 'ttl is negative');
            await refused(await sign(claims({ exp: now - 3600 })), 'expired');
            await refused(await sign(claims({ status_list: undefined })), 'status_list');
            await refused(await sign(claims({ status_list: { bits: 16, lst } })), 'status_list');
            await refused(await sign(claims({ status_list: { bits: 1, lst: 5 } })), 'status_list');
            await refused(await sign(claims({ status_list: { bits: 1, lst: 'a+b/' } })), 'status_list');
            await refused(await sign(claims({ status_list: { bits: 1, lst: 'AAAA' } })), 'does not inflate');
            // Within the clock skew the token is still good.
            await verifyStatusListToken(await sign(claims({ exp: now - 30, iat: now + 30 })), reference, anchor, new Date(), 60);
        });

        it('a payload that is not a JSON object is refused after the signature check', async () => {
            await refused(rawSign({ alg: 'ES256', typ: 'statuslist+jwt', x5c: x5c() }, [1, 2]), 'payload is not a JSON object');
        });
    });
});
