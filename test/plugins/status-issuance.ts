import Crypto from 'node:crypto';
import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { cborDecode, cborEncode, DataItem, DeviceResponse, MDoc, parseIssuerSigned, Verifier, type DataItem as DataItemType, type PresentationDefinition } from '@animo-id/mdoc';
import { getListFromStatusListJWT } from '@sd-jwt/jwt-status-list';
import * as Jose from 'jose';
import Pino from 'pino';
import { importConfigFolder } from '../../lib/config-import';
import { ResourceModel } from '../../lib/db/models/resource';
import { mdocContext } from '../../lib/mdoc/context';
import { openid4vpSessionTranscript, verifyMdocPresentation } from '../../lib/verify/mdoc';
import { STATUS_LIST_PUBLISH_JOB } from '../../plugins/status/jobs/publish';
import { StatusAllocationModel, StatusListStateModel } from '../../plugins/status/models';
import { randomFreeIndex } from '../../plugins/status/services/allocation';
import { bearer, clientWithToken, createTenant, rootToken, tenantTables } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { freePort } from '../helpers/net';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';
import type { CredentialStatusProvider } from '../../plugins/oid4vci/services/credentials';
import { verifyMdoc, verifySdJwtVc, Wallet, type Received } from '../helpers/wallet';

/**
 * Token status lists on the issuance side: every credential of a configuration with statusManagement gets its own
 * random index (SD-JWT VC `status`, mdoc MSO `status`), lists fill and roll over, allocation is atomic under
 * concurrency, and activeCredentials revokes a subject's earlier credentials while only a keyed hash of the subject
 * is stored. Credentials come through the OpenID4VCI wallet library over HTTP; tokens and MSOs are decoded with
 * @sd-jwt/jwt-status-list and @animo-id/mdoc, not with the service's code.
 */

export const lab = Lab.script();
const { describe, it, before, after } = lab;

// The built test runs from dist/test/plugins, the sources from test/plugins: find the examples from either.
const demoRoot = (): string => {
    const root = [Path.join(__dirname, '..', '..', 'examples', 'config', 'demo'), Path.join(__dirname, '..', '..', '..', 'examples', 'config', 'demo')].find((dir) => Fs.existsSync(dir));
    if (!root) {
        throw new Error('No examples/config/demo');
    }
    return root;
};
const demoSpec = (...parts: string[]): Record<string, any> => (JSON.parse(Fs.readFileSync(Path.join(demoRoot(), ...parts), 'utf8')) as { spec: Record<string, any> }).spec;
const ISSUER_KEY_CHAIN = demoSpec('key-chains', 'issuer.json');
const MDL = demoSpec('issuance', 'credentials', 'mdl.json');
const MDL_NS = 'org.iso.18013.5.1';
const MDL_DOCTYPE = 'org.iso.18013.5.1.mDL';
const ROOT_PEM = ISSUER_KEY_CHAIN.keySource.certificateChain[1] as string;
const pemDer = (pem: string) => new Uint8Array(Buffer.from(pem.replace(/-----[A-Z ]+-----|\s/g, ''), 'base64'));

const sdJwtConfig = (id: string, extra: Record<string, unknown> = {}) => ({
    id,
    config: { format: 'dc+sd-jwt', display: [{ locale: 'en', name: id }] },
    vct: `urn:test:${id}`,
    keyChainId: 'issuer',
    fields: [{ path: ['given_name'], type: 'string', mandatory: true, disclosable: true }],
    lifeTime: 3600,
    statusManagement: true,
    ...extra
});

type StatusClaim = { status_list: { idx: number; uri: string } };

/** The token status list claim of an SD-JWT VC, after verifying it independently. */
const sdJwtStatus = async (credential: string): Promise<StatusClaim> => (await verifySdJwtVc(credential)).payload.status as StatusClaim;

/** The `status` member of an mdoc MSO, decoded with the mdoc library's CBOR decoder from the issuerAuth payload. */
const msoStatus = (credential: string): StatusClaim => {
    const doc = parseIssuerSigned(new Uint8Array(Buffer.from(credential, 'base64url')), MDL_DOCTYPE);
    const mso = (cborDecode(doc.issuerSigned.issuerAuth.payload) as DataItemType<Map<string, any>>).data;
    const statusList = mso.get('status')?.get('status_list') as Map<string, unknown> | undefined;
    expect(statusList, 'MSO status.status_list').to.be.an.instanceof(Map);
    return { status_list: { idx: statusList!.get('idx') as number, uri: statusList!.get('uri') as string } };
};

for (const dialect of DIALECTS) {
    describe(`status lists: issuance (${dialect})`, () => {
        let t: TestServer;
        let publicUrl: string;
        let admin: string;
        let other: string;

        const api = async (token: string, method: string, url: string, payload?: object) => {
            const res = await t.server.inject({ method, url, headers: bearer(token), ...(payload ? { payload } : {}) });
            return { status: res.statusCode, body: res.result as any, payload: res.payload };
        };
        const offer = async (configurationId: string, extra: Record<string, unknown> = {}, token = admin) => {
            const claims = configurationId.startsWith('mdl') ? { [MDL_NS]: { family_name: 'Mustermann', given_name: 'Erika' } } : { given_name: 'Erika' };
            const res = await api(token, 'POST', '/api/issuer/offer', { credentialConfigurationIds: [configurationId], credentialClaims: { [configurationId]: { type: 'inline', claims } }, ...extra });
            expect(res.status, res.payload).to.equal(201);
            return res.body as { session: string; uri: string };
        };
        /** Offer and receive through the wallet library; batch > 1 sends that many proofs. */
        const issue = async (configurationId: string, options: { batch?: number; subject?: string; token?: string } = {}): Promise<Received & { session: string }> => {
            const made = await offer(configurationId, options.subject ? { subject: options.subject } : {}, options.token);
            const received = await new Wallet().receive(made.uri, { configurationId, ...(options.batch ? { batch: options.batch } : {}) });
            return { ...received, session: made.session };
        };
        const listPath = (uri: string) => new URL(uri).pathname;
        const listId = (uri: string) => listPath(uri).split('/').pop()!;
        /** The list's token as a relying party gets it (over HTTP), its signature checked with its own x5c. */
        const fetchToken = async (uri: string): Promise<string> => {
            const res = await fetch(uri);
            expect(res.status).to.equal(200);
            expect(res.headers.get('content-type')).to.contain('application/statuslist+jwt');
            const jwt = await res.text();
            await Jose.jwtVerify(jwt, async (header) => Jose.importX509(`-----BEGIN CERTIFICATE-----\n${header.x5c![0]}\n-----END CERTIFICATE-----`, 'ES256'), { typ: 'statuslist+jwt', subject: uri });
            return jwt;
        };
        /**
         * The entry value as a fresh token states it: the publishing job re-signs the changed list (these tenants do not
         * set immediateUpdate), and the GET serves what it published.
         */
        const currentStatus = async (claim: StatusClaim): Promise<number> => {
            await t.server.jobs.runNow(STATUS_LIST_PUBLISH_JOB);
            return getListFromStatusListJWT(await fetchToken(claim.status_list.uri)).getStatus(claim.status_list.idx);
        };
        const allocations = (where: Record<string, unknown>) => t.server.db.model(StatusAllocationModel).query().where({ tenantId: 'acme', ...where }).orderBy('createdAt');
        const listsOf = async (credentialConfigurationId?: string) =>
            ((await api(admin, 'GET', '/api/status-lists?pageSize=100')).body.items as any[]).filter((l) => l.credentialConfigurationId === credentialConfigurationId);

        before(async () => {
            const port = await freePort();
            publicUrl = `http://127.0.0.1:${port}`;
            t = await startTestServer(dialect, { listen: true, manifest: manifestFor('hallmark-status', 'hallmark-kms-db', 'hallmark-tenancy'), env: { PORT: String(port), PUBLIC_URL: publicUrl } });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme', { statusListConfig: { bits: 1, capacity: 1000, ttlSeconds: 600, immediateUpdate: false } });
            await createTenant(t.server, root, 'globex');
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            other = (await clientWithToken(t.server, root, { clientId: 'globex-admin', roles: ['tenant:admin'], tenantId: 'globex' })).token;
            for (const token of [admin, other]) {
                const chain = await api(token, 'POST', '/api/key-chain', ISSUER_KEY_CHAIN);
                expect(chain.status, chain.payload).to.equal(201);
            }
            const configs = [
                sdJwtConfig('pid'),
                sdJwtConfig('plain', { statusManagement: false }),
                { ...MDL, statusManagement: true, status: { enabled: true, bits: 2, credentialConfigurationBound: true } },
                sdJwtConfig('spread', { status: { enabled: true, credentialConfigurationBound: true } }),
                sdJwtConfig('busy', { status: { enabled: true, credentialConfigurationBound: true } }),
                sdJwtConfig('roll', { status: { enabled: true, credentialConfigurationBound: true } }),
                sdJwtConfig('active', { activeCredentials: { enabled: true, tracking: 'internal' } })
            ];
            for (const config of configs) {
                const res = await api(admin, 'POST', '/api/issuer/credentials', config);
                expect(res.status, res.payload).to.equal(201);
            }
            expect((await api(other, 'POST', '/api/issuer/credentials', sdJwtConfig('pid'))).status).to.equal(201);
            expect((await api(admin, 'PUT', '/api/issuer/config', { batchSize: 3 })).status).to.equal(200);
        });
        after(() => t?.stop());

        it('puts status.status_list {idx, uri} in an SD-JWT VC, whose list token (fetched over HTTP) has the entry valid', async () => {
            const received = await issue('pid');
            const claim = await sdJwtStatus(received.credentials[0]!);
            expect(Object.keys(claim)).to.equal(['status_list']);
            expect(Object.keys(claim.status_list).sort()).to.equal(['idx', 'uri']);
            expect(claim.status_list.idx).to.be.a.number();
            expect(claim.status_list.uri).to.match(new RegExp(`^${publicUrl}/issuers/acme/status-management/status-list/[0-9a-f-]{36}$`));
            const token = await fetchToken(claim.status_list.uri);
            const list = getListFromStatusListJWT(token);
            expect(list.getBitsPerStatus()).to.equal(1);
            expect(list.getStatus(claim.status_list.idx)).to.equal(0);
            // Made on demand with the tenant's defaults, shared (no bound configuration), one index used.
            const made = (await listsOf(undefined)).find((l) => l.id === listId(claim.status_list.uri));
            expect(made).to.include({ bits: 1, capacity: 1000, used: 1, keyChainId: 'issuer', uri: claim.status_list.uri });
            const [row] = await allocations({ listId: made.id });
            expect(row).to.include({ idx: claim.status_list.idx, sessionId: received.session, credentialConfigurationId: 'pid', subjectHash: null });
        });

        it('gives a configuration without statusManagement no status claim and allocates nothing', async () => {
            const before = (await allocations({})).length;
            const received = await issue('plain');
            expect((await sdJwtStatus(received.credentials[0]!))).to.not.exist();
            expect((await allocations({})).length).to.equal(before);
        });

        it('puts the same structure in the MSO of an mdoc, which still verifies with the mdoc library and the service verifier', async () => {
            const received = await issue('mdl');
            const credential = received.credentials[0]!;
            const claim = msoStatus(credential);
            expect(claim.status_list.uri).to.startWith(`${publicUrl}/issuers/acme/status-management/status-list/`);
            // A 2-bit list bound to the configuration, as its status object says.
            const [bound] = await listsOf('mdl');
            expect(bound).to.include({ id: listId(claim.status_list.uri), bits: 2, used: 1 });
            expect(getListFromStatusListJWT(await fetchToken(claim.status_list.uri)).getStatus(claim.status_list.idx)).to.equal(0);

            // Independent digest and signature checks, then the mdoc library's own Verifier against the root CA.
            const verified = await verifyMdoc(credential, MDL_DOCTYPE);
            expect(verified.namespaces[MDL_NS]).to.include({ family_name: 'Mustermann', given_name: 'Erika' });
            const doc = parseIssuerSigned(new Uint8Array(Buffer.from(credential, 'base64url')), MDL_DOCTYPE);
            const ctx = mdocContext(async () => new Uint8Array());
            const checks: Array<{ status: string; check: string }> = [];
            const verifier = new Verifier();
            await verifier.verifyIssuerSignature({ trustedCertificates: [pemDer(ROOT_PEM)], issuerAuth: doc.issuerSigned.issuerAuth, disableCertificateChainValidation: false, onCheckG: (c) => checks.push(c) }, { x509: ctx.x509, cose: ctx.cose });
            await verifier.verifyData({ mdoc: doc, onCheckG: (c) => checks.push(c) }, { x509: ctx.x509, crypto: ctx.crypto });
            expect(checks.filter((c) => c.status === 'FAILED')).to.equal([]);
            expect(checks.filter((c) => c.status === 'PASSED').length).to.be.above(3);

            // Presented by the holder and verified by lib/verify/mdoc, as the service's verifier would.
            const holder = received.holderKeys[0]!;
            const handover = { clientId: 'x509_hash:verifier', nonce: 'nonce-0123456789', jwkThumbprint: null, responseUri: 'https://verifier.example/response' };
            const definition: PresentationDefinition = {
                id: 'request',
                input_descriptors: [{ id: MDL_DOCTYPE, format: { mso_mdoc: { alg: ['ES256'] } }, constraints: { limit_disclosure: 'required', fields: [{ path: [`$['${MDL_NS}']['family_name']`], intent_to_retain: false }] } }]
            };
            const holderCtx = mdocContext(async (data, jwk) =>
                new Uint8Array(Crypto.sign('sha256', data, { key: Crypto.createPrivateKey({ key: jwk as Crypto.JsonWebKey, format: 'jwk' }), dsaEncoding: 'ieee-p1363' })));
            const response = await DeviceResponse.from(new MDoc([doc]))
                .usingPresentationDefinition(definition)
                .usingSessionTranscriptBytes(cborEncode(new DataItem({ buffer: openid4vpSessionTranscript(handover) })))
                .authenticateWithSignature(holder.privateJwk, 'ES256')
                .sign({ crypto: holderCtx.crypto, cose: holderCtx.cose });
            const documents = await verifyMdocPresentation({
                deviceResponse: Buffer.from(response.encode()).toString('base64url'), ...handover, now: new Date(), skewSeconds: 30,
                anchors: [{ certificate: ROOT_PEM, serviceType: 'eaa-issuance' }]
            });
            // The issuer's chain from the MSO's x5chain (DER, base64), the leaf first.
            const { x5chain, ...reported } = documents[0] as unknown as { x5chain: string[] } & Record<string, unknown>;
            expect(new Crypto.X509Certificate(Buffer.from(x5chain[0]!, 'base64')).checkIssued(new Crypto.X509Certificate(ROOT_PEM))).to.be.true();
            expect([reported]).to.equal([{
                docType: MDL_DOCTYPE,
                claims: { [MDL_NS]: { family_name: 'Mustermann' } },
                issuerAnchor: { certificate: ROOT_PEM, serviceType: 'eaa-issuance' },
                // The service verifier reads the status reference this issuer put into the MSO.
                statusReference: { idx: claim.status_list.idx, uri: claim.status_list.uri }
            }]);
        });

        it('chooses indexes at random: unique, not in issuance order, spread over the list', async () => {
            const indexes: number[] = [];
            for (let i = 0; i < 30; i++) {
                indexes.push((await sdJwtStatus((await issue('spread')).credentials[0]!)).status_list.idx);
            }
            expect(new Set(indexes).size).to.equal(30);
            const ascending = indexes.slice(1).filter((idx, i) => idx > indexes[i]!).length;
            const consecutive = indexes.slice(1).filter((idx, i) => idx === indexes[i]! + 1).length;
            // Sequential allocation would give 29 ascending and 29 consecutive steps; random ones about half and none.
            expect(ascending, JSON.stringify(indexes)).to.be.within(5, 24);
            expect(consecutive, JSON.stringify(indexes)).to.be.below(3);
            expect(Math.max(...indexes) - Math.min(...indexes), JSON.stringify(indexes)).to.be.above(300);
            const [list] = await listsOf('spread');
            expect(list.used).to.equal(30);
            expect((await allocations({ listId: list.id })).map((r) => r.idx).sort((a, b) => a - b)).to.equal([...indexes].sort((a, b) => a - b));
        });

        it('allocates atomically: 20 concurrent issuances get 20 different indexes in one new list', async () => {
            const received = await Promise.all(Array.from({ length: 20 }, () => issue('busy')));
            const claims = await Promise.all(received.map((r) => sdJwtStatus(r.credentials[0]!)));
            expect(new Set(claims.map((c) => c.status_list.uri)).size).to.equal(1);
            expect(new Set(claims.map((c) => c.status_list.idx)).size).to.equal(20);
            // No second list was made by a concurrent first allocation, and the state agrees with the allocation rows.
            const lists = await listsOf('busy');
            expect(lists.map((l) => l.used)).to.equal([20]);
            const state = await t.server.db.model(StatusListStateModel).query().findById(['acme', lists[0].id]);
            const allocatedBits = [...state!.allocated].reduce((n, byte) => n + byte.toString(2).split('1').length - 1, 0);
            expect(allocatedBits).to.equal(20);
            expect((await allocations({ listId: lists[0].id })).length).to.equal(20);
        });

        it('gives each credential of a batch its own index, and rolls over to a new list when the list is full', async () => {
            const created = await api(admin, 'POST', '/api/status-lists', { id: 'roll-small', bits: 1, capacity: 4, credentialConfigurationId: 'roll' });
            expect(created.status, created.payload).to.equal(201);
            const first = await issue('roll', { batch: 3 });
            expect(first.credentials).to.have.length(3);
            const firstClaims = await Promise.all(first.credentials.map(sdJwtStatus));
            expect(firstClaims.map((c) => listId(c.status_list.uri))).to.equal(['roll-small', 'roll-small', 'roll-small']);
            expect(new Set(firstClaims.map((c) => c.status_list.idx)).size).to.equal(3);
            // One index left: the next batch takes it and two of a new list with the tenant's default capacity.
            const second = await Promise.all((await issue('roll', { batch: 3 })).credentials.map(sdJwtStatus));
            const lists = await listsOf('roll');
            expect(lists).to.have.length(2);
            const fresh = lists.find((l) => l.id !== 'roll-small');
            expect(lists.find((l) => l.id === 'roll-small')).to.include({ used: 4, capacity: 4 });
            expect(fresh).to.include({ used: 2, capacity: 1000, bits: 1 });
            expect(second.map((c) => listId(c.status_list.uri)).sort()).to.equal(['roll-small', fresh.id, fresh.id].sort());
            const all = [...firstClaims, ...second].map((c) => `${c.status_list.uri}#${c.status_list.idx}`);
            expect(new Set(all).size).to.equal(6);
            expect((await allocations({ listId: 'roll-small' })).map((r) => r.idx).sort()).to.equal([0, 1, 2, 3]);
            // A full list is never handed out again.
            const third = await sdJwtStatus((await issue('roll')).credentials[0]!);
            expect(listId(third.status_list.uri)).to.equal(fresh.id);
        });

        it('keeps the lists of tenants apart', async () => {
            const theirs = await sdJwtStatus((await issue('pid', { token: other })).credentials[0]!);
            expect(theirs.status_list.uri).to.startWith(`${publicUrl}/issuers/globex/status-management/status-list/`);
            const mine = await sdJwtStatus((await issue('pid')).credentials[0]!);
            expect(listId(mine.status_list.uri)).to.not.equal(listId(theirs.status_list.uri));
            expect((await fetch(theirs.status_list.uri.replace('/globex/', '/acme/'))).status).to.equal(404);
        });

        it('refuses the credential request when no key chain could sign a new list, and leaves nothing allocated', async () => {
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'initech');
            const initech = (await clientWithToken(t.server, root, { clientId: 'initech-admin', roles: ['tenant:admin'], tenantId: 'initech' })).token;
            // Its only key chain is for access tokens: neither a statusList nor an attestation chain to sign lists with.
            expect((await api(initech, 'POST', '/api/key-chain', { ...ISSUER_KEY_CHAIN, usageType: 'access' })).status).to.equal(201);
            expect((await api(initech, 'POST', '/api/issuer/credentials', sdJwtConfig('pid'))).status).to.equal(201);
            const made = await offer('pid', {}, initech);
            const wallet = new Wallet();
            await expect(wallet.receive(made.uri, { configurationId: 'pid' })).to.reject();
            expect(wallet.exchange('/vci/credential')!.status).to.equal(503);
            expect(await t.server.db.model(StatusAllocationModel).query().where({ tenantId: 'initech' })).to.equal([]);
            expect((await api(initech, 'GET', '/api/status-lists')).body.items).to.equal([]);
        });

        it('accepts one status provider, only before the server starts', () => {
            const provider: CredentialStatusProvider = { allocate: async () => [], supersede: async () => 0 };
            expect(() => t.server.registerCredentialStatusProvider(provider)).to.throw('A credential status provider must be registered before the server starts');
        });

        it('activeCredentials: needs the offer subject, revokes the subject\'s earlier credentials, and never stores the subject', async () => {
            const missing = await api(admin, 'POST', '/api/issuer/offer', { credentialConfigurationIds: ['active'], credentialClaims: { active: { type: 'inline', claims: { given_name: 'Erika' } } } });
            expect(missing.status, missing.payload).to.equal(400);
            expect(missing.body.details).to.equal([{ path: 'subject', message: 'is required for active (activeCredentials)' }]);
            for (const subject of ['', 'x'.repeat(256), 42]) {
                expect((await api(admin, 'POST', '/api/issuer/offer', { credentialConfigurationIds: ['active'], subject })).status).to.equal(400);
            }

            const SUBJECT = 'holder-7f3a-unique-subject';
            const first = await issue('active', { subject: SUBJECT });
            const firstClaim = await sdJwtStatus(first.credentials[0]!);
            const otherSubject = await sdJwtStatus((await issue('active', { subject: 'someone-else' })).credentials[0]!);
            expect(await currentStatus(firstClaim)).to.equal(0);
            const second = await issue('active', { subject: SUBJECT, batch: 2 });
            const secondClaims = await Promise.all(second.credentials.map(sdJwtStatus));
            expect(await currentStatus(firstClaim)).to.equal(1);
            for (const claim of secondClaims) {
                expect(await currentStatus(claim)).to.equal(0);
            }
            expect(await currentStatus(otherSubject)).to.equal(0);
            // The third issuance revokes both of the batch.
            const third = await sdJwtStatus((await issue('active', { subject: SUBJECT })).credentials[0]!);
            expect(await Promise.all(secondClaims.map((c) => currentStatus(c)))).to.equal([1, 1]);
            expect(await currentStatus(third)).to.equal(0);

            // A keyed hash, the same for the subject's credentials and different for another subject.
            const rows = await allocations({ credentialConfigurationId: 'active' });
            expect(rows).to.have.length(5);
            const hashes = rows.map((r) => r.subjectHash);
            expect(hashes.every((h) => /^[0-9a-f]{64}$/.test(h!))).to.be.true();
            expect(new Set(hashes).size).to.equal(2);
            // Neither the subject nor any part of it in any tenant table, nor in the (decrypted) issuance session data.
            const session = await t.server.sessions.get(first.session);
            expect(JSON.stringify(session)).to.not.contain(SUBJECT);
            expect((session!.data as any).subjectHash).to.equal(hashes[0]);
            for (const table of [...await tenantTables(t.server), 'sessions', 'audit_logs']) {
                const dump = JSON.stringify(await t.server.db.knex(table).select());
                expect(dump, table).to.not.contain(SUBJECT);
                expect(dump, table).to.not.contain(Buffer.from(SUBJECT).toString('base64'));
            }
        });
    });
}

describe('status lists: randomFreeIndex()', () => {
    const bitmap = (capacity: number, free: number[]) => {
        const allocated = Buffer.alloc(Math.ceil(capacity / 8), 0xff);
        free.forEach((idx) => (allocated[idx >> 3] = allocated[idx >> 3]! & ~(1 << (idx & 7))));
        return allocated;
    };

    it('finds the only free index of a full list (past the random draws), wherever it is', () => {
        for (const [capacity, free] of [[1000, 0], [1000, 999], [1000, 517], [13, 12], [8, 3]] as const) {
            expect(randomFreeIndex(bitmap(capacity, [free]), capacity, capacity - 1), `${capacity}/${free}`).to.equal(free);
        }
    });

    it('draws every free index of a nearly full list, and only free ones', () => {
        const free = [5, 77, 400, 998];
        const drawn = new Map<number, number>();
        for (let i = 0; i < 400; i++) {
            const idx = randomFreeIndex(bitmap(1000, free), 1000, 996);
            drawn.set(idx, (drawn.get(idx) ?? 0) + 1);
        }
        expect([...drawn.keys()].sort((a, b) => a - b)).to.equal(free);
        // Uniform: each about 100 of 400 (far from what any fixed order would give).
        expect(Math.min(...drawn.values())).to.be.above(50);
        // Free indexes sharing a byte are told apart too.
        const sameByte = new Set(Array.from({ length: 200 }, () => randomFreeIndex(bitmap(1024, [3, 5, 6]), 1024, 1021)));
        expect([...sameByte].sort()).to.equal([3, 5, 6]);
    });

    it('ignores the bits past the capacity in the last byte, and refuses a bitmap that contradicts its count', () => {
        // Capacity 10: bits 10 … 15 of the second byte are no indexes even when clear.
        const allocated = Buffer.from([0xff, 0b11111110]);
        expect(randomFreeIndex(allocated, 10, 9)).to.equal(8);
        expect(() => randomFreeIndex(Buffer.from([0xff, 0x03]), 10, 9)).to.throw('The allocation bitmap has fewer free indexes than its used count says');
    });
});

for (const dialect of DIALECTS) {
    describe(`status lists: statusManagement without the status plugin (${dialect})`, () => {
        let t: TestServer;
        let admin: string;
        before(async () => {
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-oid4vci', 'hallmark-kms-db', 'hallmark-tenancy') });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            expect((await t.server.inject({ method: 'POST', url: '/api/key-chain', headers: bearer(admin), payload: { id: 'issuer', usageType: 'attestation' } })).statusCode).to.equal(201);
        });
        after(() => t?.stop());

        it('refuses statusManagement and status.enabled with a 400 naming them, and stores nothing', async () => {
            const post = (payload: object) => t.server.inject({ method: 'POST', url: '/api/issuer/credentials', headers: bearer(admin), payload });
            const unavailable = (path: string) => ({ path, message: `"${path}": token status lists are not available in this deployment (the status plugin is not loaded)` });
            const both = await post(sdJwtConfig('pid', { status: { enabled: true } }));
            expect(both.statusCode, both.payload).to.equal(400);
            expect((both.result as any).details).to.equal([unavailable('statusManagement'), unavailable('status.enabled')]);
            const enabledOnly = await post(sdJwtConfig('pid', { statusManagement: undefined, status: { enabled: true } }));
            expect((enabledOnly.result as any).details).to.equal([unavailable('status.enabled')]);
            const active = await post(sdJwtConfig('pid', { activeCredentials: { enabled: true } }));
            expect((active.result as any).details).to.equal([unavailable('statusManagement')]);
            expect((await t.server.inject({ url: '/api/issuer/credentials/pid', headers: bearer(admin) })).statusCode).to.equal(404);
            // Off is accepted; an update that turns it on is refused as well.
            expect((await post(sdJwtConfig('pid', { statusManagement: false, status: { enabled: false } }))).statusCode).to.equal(201);
            const patched = await t.server.inject({ method: 'PATCH', url: '/api/issuer/credentials/pid', headers: bearer(admin), payload: { statusManagement: true, status: { enabled: true } } });
            expect(patched.statusCode, patched.payload).to.equal(400);
            expect((await t.server.inject({ url: '/api/issuer/credentials/pid', headers: bearer(admin) })).result).to.include({ statusManagement: false });
            // The configuration import refuses it too (the write's check), and the tenant is not imported.
            const folder = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-import-'));
            try {
                Fs.cpSync(demoRoot(), Path.join(folder, 'refused'), { recursive: true });
                const file = Path.join(folder, 'refused', 'issuance', 'credentials', 'pid.json');
                const document = JSON.parse(Fs.readFileSync(file, 'utf8'));
                document.spec.statusManagement = true;
                Fs.writeFileSync(file, JSON.stringify(document));
                const report = await importConfigFolder({ folder, registry: t.server.registry, log: Pino({ level: 'silent' }), variables: {}, unresolvedPlaceholders: 'warn' });
                expect(report.tenants[0]).to.include({ tenantId: 'refused', status: 'failed', created: 0 });
                expect(report.tenants[0]!.error).to.contain(unavailable('statusManagement').message);
                expect((await t.server.inject({ url: '/api/tenants/refused', headers: bearer(await rootToken(t.server)) })).statusCode).to.equal(404);
            }
            finally {
                Fs.rmSync(folder, { recursive: true, force: true });
            }
            // A configuration stored while the status plugin was loaded is not issued without its status entry.
            const now = new Date().toISOString();
            await t.server.db.model(ResourceModel).query().insert({ tenantId: 'acme', kind: 'CredentialConfig', id: 'legacy', spec: sdJwtConfig('legacy'), version: 1, generation: 1, ownership: 'unmanaged', createdAt: now, updatedAt: now });
            const made = await t.server.inject({ method: 'POST', url: '/api/issuer/offer', headers: bearer(admin), payload: { credentialConfigurationIds: ['legacy'], credentialClaims: { legacy: { type: 'inline', claims: { given_name: 'Erika' } } }, byReference: false } });
            expect(made.statusCode, made.payload).to.equal(201);
            const offered = JSON.parse(new URL((made.result as any).uri.replace('openid-credential-offer://', 'https://x/')).searchParams.get('credential_offer')!);
            const code = offered.grants['urn:ietf:params:oauth:grant-type:pre-authorized_code']['pre-authorized_code'];
            const token = await t.server.inject({ method: 'POST', url: '/issuers/acme/authorize/token', payload: new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:pre-authorized_code', 'pre-authorized_code': code }).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
            expect(token.statusCode, token.payload).to.equal(200);
            const nonce = ((await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/nonce' })).result as any).c_nonce;
            const holder = await Jose.generateKeyPair('ES256');
            const proof = await new Jose.SignJWT({ nonce, aud: 'http://hallmark.test/issuers/acme' })
                .setProtectedHeader({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: await Jose.exportJWK(holder.publicKey) }).setIssuedAt().sign(holder.privateKey);
            const refused = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/credential', headers: { authorization: `Bearer ${(token.result as any).access_token}` }, payload: { credential_configuration_id: 'legacy', proof: { proof_type: 'jwt', jwt: proof } } });
            expect(refused.statusCode, refused.payload).to.equal(400);
            expect(refused.result).to.equal({ error: 'credential_request_denied', error_description: 'This credential needs token status lists, which this deployment does not provide' });
            // The offer subject is still validated.
            expect((await t.server.inject({ method: 'POST', url: '/api/issuer/offer', headers: bearer(admin), payload: { credentialConfigurationIds: ['pid'], subject: 'x'.repeat(256) } })).statusCode).to.equal(400);
        });
    });
}
