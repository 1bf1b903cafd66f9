import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { COUNT_CAP, prefixUpperBound, searchHandles, SessionSearch, type SessionListQuery } from '../../plugins/sessions/services/search';
import { sha256Hex } from '../../plugins/sessions/services/session-service';
import { parseInstant } from '../../plugins/sessions/routes/list';
import type { SessionStatus } from '../../plugins/sessions/models/session';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const PRE_AUTH = 'urn:ietf:params:oauth:grant-type:pre-authorized_code';

const sdJwt = (id: string) => ({
    id,
    config: { format: 'dc+sd-jwt', display: [{ locale: 'en', name: id }], scope: id },
    vct: `urn:test:${id}:1`,
    fields: [{ path: ['given_name'], type: 'string', disclosable: true }],
    lifeTime: 3600
});

interface Item {
    id: string;
    type: 'issuance' | 'presentation';
    status: string;
    requestId?: string;
    credentialConfigurationIds?: string[];
    reference?: string;
    failureCode?: string;
    createdAt: string;
    updatedAt: string;
    expiresAt?: string;
}

interface Page {
    items: Item[];
    total: number;
    page: number;
    pageSize: number;
    totalPages: number;
    totalCapped?: boolean;
}

interface Row {
    id: string;
    tenantId: string;
    type: 'issuance' | 'presentation';
    status: string;
    requestId?: string | null;
    credentialConfigurationIds?: string | null;
    reference?: string | null;
    walletNonce?: string | null;
    failureCode?: string | null;
    expiresAt?: string | null;
    createdAt: string;
    updatedAt: string;
}

/** Ids of directly inserted sessions share a prefix no random UUID of an offer is likely to have. */
const PREFIX = 'f0f0f0f0-';
const directId = (n: number) => `${PREFIX}0000-4000-8000-${String(n).padStart(12, '0')}`;

/** Presentation sessions (no API builds them yet) and old issuance sessions, with fixed timestamps. */
const ACME_ROWS: Row[] = [
    { id: directId(1), tenantId: 'acme', type: 'presentation', status: 'completed', requestId: 'age-check', walletNonce: 'wn-p1', reference: 'ref-p1', createdAt: '2024-01-10T10:00:00.000Z', updatedAt: '2024-01-10T10:05:00.000Z' },
    { id: directId(2), tenantId: 'acme', type: 'presentation', status: 'failed', requestId: 'age-check', walletNonce: 'wn-p2', failureCode: 'signature_invalid', createdAt: '2024-02-01T00:00:00.000Z', updatedAt: '2024-02-01T00:01:00.000Z' },
    { id: directId(3), tenantId: 'acme', type: 'presentation', status: 'failed', requestId: 'kyc', walletNonce: 'wn-p3', failureCode: 'access_denied', createdAt: '2024-03-01T12:00:00.000Z', updatedAt: '2024-03-02T12:00:00.000Z' },
    { id: directId(4), tenantId: 'acme', type: 'presentation', status: 'active', requestId: 'kyc', walletNonce: 'wn-p4', expiresAt: '2024-03-05T00:05:00.000Z', createdAt: '2024-03-05T00:00:00.000Z', updatedAt: '2024-03-05T00:00:00.000Z' },
    { id: directId(5), tenantId: 'acme', type: 'presentation', status: 'expired', requestId: 'age-check', walletNonce: 'wn-p5', createdAt: '2023-12-31T23:00:00.000Z', updatedAt: '2024-01-01T00:00:00.000Z' },
    { id: directId(6), tenantId: 'acme', type: 'issuance', status: 'completed', credentialConfigurationIds: '["pid"]', reference: 'ref-i1', createdAt: '2024-01-05T08:00:00.000Z', updatedAt: '2024-01-06T00:00:00.000Z' },
    { id: directId(7), tenantId: 'acme', type: 'issuance', status: 'expired', credentialConfigurationIds: '["badge"]', createdAt: '2024-02-15T00:00:00.000Z', updatedAt: '2024-02-16T00:00:00.000Z' },
    // Ids that a naive LIKE would confuse with pid: an underscore, a percent sign, another case, a quote.
    { id: directId(8), tenantId: 'acme', type: 'issuance', status: 'fetched', credentialConfigurationIds: '["pid_x","p%d","PID","a\\",\\"pid"]', createdAt: '2024-02-20T00:00:00.000Z', updatedAt: '2024-02-20T00:00:00.000Z' },
    // Same updatedAt as directId(8): the id decides their order.
    { id: directId(9), tenantId: 'acme', type: 'presentation', status: 'active', requestId: 'kyc', walletNonce: 'wn-p9', createdAt: '2024-02-20T00:00:00.000Z', updatedAt: '2024-02-20T00:00:00.000Z' }
];

const GLOBEX_ROWS: Row[] = [
    { id: directId(101), tenantId: 'globex', type: 'presentation', status: 'failed', requestId: 'age-check', walletNonce: 'wn-g1', reference: 'order-A', failureCode: 'access_denied', createdAt: '2024-01-15T00:00:00.000Z', updatedAt: '2024-01-15T00:00:00.000Z' },
    { id: directId(102), tenantId: 'globex', type: 'issuance', status: 'active', credentialConfigurationIds: '["pid"]', reference: 'ref-p1', createdAt: '2024-01-16T00:00:00.000Z', updatedAt: '2024-01-16T00:00:00.000Z' }
];

const byCodePoint = (a: string, b: string) => (a === b ? 0 : Buffer.compare(Buffer.from(a), Buffer.from(b)));
const cmp = (a: string | undefined, b: string | undefined) => (a === b ? 0 : a === undefined ? -1 : b === undefined ? 1 : byCodePoint(a, b));

/** The order the API promises: the key, then updatedAt, then id; requestId without a value sorts first ascending. */
const expectedOrder = (items: Item[], sortBy: string, sortOrder: 'asc' | 'desc'): string[] => {
    const sign = sortOrder === 'asc' ? 1 : -1;
    const key = (i: Item): string | undefined => (sortBy === 'id' ? undefined : (i as unknown as Record<string, string | undefined>)[sortBy]);
    return [...items].sort((a, b) => sign * (
        (sortBy === 'id' ? 0 : cmp(key(a), key(b)))
        || (sortBy === 'createdAt' || sortBy === 'id' ? 0 : cmp(a.updatedAt, b.updatedAt))
        || byCodePoint(a.id, b.id)
    )).map((i) => i.id);
};

describe('session search handles', () => {
    it('take pasted links apart', () => {
        const byRef = `openid-credential-offer://?credential_offer_uri=${encodeURIComponent('http://h/issuers/acme/vci/credential-offers/OFFER1')}`;
        expect(searchHandles(byRef).offerIds).to.include('OFFER1');
        expect(searchHandles('http://h/issuers/acme/vci/credential-offers/OFFER2').offerIds).to.include('OFFER2');
        const offer = { credential_issuer: 'http://h/issuers/acme', credential_configuration_ids: ['pid'], grants: { [PRE_AUTH]: { 'pre-authorized_code': 'CODE1' } } };
        expect(searchHandles(`openid-credential-offer://?credential_offer=${encodeURIComponent(JSON.stringify(offer))}`).codeHashes).to.include(sha256Hex('CODE1'));
        expect(searchHandles(JSON.stringify(offer)).codeHashes).to.include(sha256Hex('CODE1'));
        expect(searchHandles('CODE2').codeHashes).to.equal([sha256Hex('CODE2')]);
        const vp = `openid4vp://?client_id=${encodeURIComponent('x509_hash:abc')}&request_uri=${encodeURIComponent('http://h/presentations/NONCE1/oid4vp/request')}`;
        expect(searchHandles(vp).walletNonces).to.include('NONCE1');
        expect(searchHandles(`haip://?request_uri=${encodeURIComponent('http://h/presentations/NONCE2/oid4vp/request')}&request_uri_method=post`).walletNonces).to.include('NONCE2');
        expect(searchHandles('http://h/presentations/NONCE3/oid4vp/request').walletNonces).to.include('NONCE3');
        // A link encoded once more, as some copy buttons do.
        expect(searchHandles(encodeURIComponent(vp)).walletNonces).to.include('NONCE1');
        expect(searchHandles('  plain  ')).to.equal({ idPrefixes: ['plain'], references: ['plain'], walletNonces: ['plain'], offerIds: ['plain'], codeHashes: [sha256Hex('plain')] });
    });

    it('read ISO 8601 instants with a time zone, and nothing else', () => {
        const at = (value: string) => parseInstant(value)?.toISOString();
        expect(at('2024-01-01T01:00:00+01:00')).to.equal('2024-01-01T00:00:00.000Z');
        expect(at('2024-01-01T01:00+0100')).to.equal('2024-01-01T00:00:00.000Z');
        expect(at('2024-01-01T01:00:00+01')).to.equal('2024-01-01T00:00:00.000Z');
        expect(at('2023-12-31T19:30:00.5-04:30')).to.equal('2024-01-01T00:00:00.500Z');
        expect(at('2024-01-01T00:00:00.123456789z')).to.equal('2024-01-01T00:00:00.123Z');
        expect(at('2024-02-29T12:00:00Z')).to.equal('2024-02-29T12:00:00.000Z');
        expect(at('0050-06-01T00:00:00Z')).to.equal('0050-06-01T00:00:00.000Z');
        expect(at('0001-01-01T00:00:00Z')).to.equal('0001-01-01T00:00:00.000Z');
        expect(at('9999-12-31T23:59:59.999Z')).to.equal('9999-12-31T23:59:59.999Z');
        for (const bad of ['2023-02-29T12:00:00Z', '2024-02-30T00:00:00Z', '2024-13-01T00:00:00Z', '2024-01-01T24:00:00Z', '2024-01-01T00:60:00Z',
            '2024-01-01T00:00:00+24:00', '0000-01-01T00:00:00Z', '2024-01-01T00:00:00', '2024-01-01', '2024-01-01 00:00:00Z', 'today',
            // Years 1 to 9999 written with an offset that puts the instant outside them in UTC.
            '0001-01-01T00:00:00+05:00', '9999-12-31T23:00:00-05:00']) {
            expect(at(bad), bad).to.be.undefined();
        }
    });

    it('bound id prefixes in code point order', () => {
        expect(prefixUpperBound('abc')).to.equal('abd');
        expect(prefixUpperBound('a\u{10ffff}')).to.equal('b');
        expect(prefixUpperBound('\u{10ffff}')).to.be.undefined();
        expect(prefixUpperBound('a\ud7ff')).to.equal('a\ue000');
    });
});

for (const dialect of DIALECTS) {
    describe(`GET /api/session and DELETE /api/session/{id} (${dialect})`, () => {
        let t: TestServer;
        const tokens: Record<string, string> = {};
        const offers: Record<'A' | 'B' | 'C', { session: string; uri: string; code?: string }> = {} as never;

        const list = async (query: string, who = 'admin'): Promise<Page> => {
            const res = await t.server.inject({ url: `/api/session${query ? `?${query}` : ''}`, headers: bearer(tokens[who]!) });
            expect(res.statusCode, `${query}: ${res.payload}`).to.equal(200);
            return res.result as Page;
        };
        const ids = async (query: string, who = 'admin'): Promise<string[]> => (await list(`${query}${query ? '&' : ''}pageSize=100`, who)).items.map((i) => i.id);
        const sorted = (values: string[]) => [...values].sort();
        const status = async (query: string, who = 'admin') => (await t.server.inject({ url: `/api/session?${query}`, headers: bearer(tokens[who]!) }));
        const insert = (rows: Row[]) => t.server.db.knex('sessions').insert(rows.map((r) => ({ txCodeFailures: 0, ...r })));

        before(async () => {
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-sessions', 'hallmark-oid4vci', 'hallmark-kms-db', 'hallmark-tenancy') });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            await createTenant(t.server, root, 'globex');
            tokens.admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            const roles: Record<string, string[]> = {
                offer: ['issuance:offer'],
                issuanceConfig: ['issuance:config'],
                request: ['presentation:request'],
                presentationConfig: ['presentation:config'],
                reader: ['tenant:read'],
                keys: ['key:manage']
            };
            for (const [name, r] of Object.entries(roles)) {
                tokens[name] = (await clientWithToken(t.server, root, { clientId: `acme-${name.toLowerCase()}`, roles: r, tenantId: 'acme' })).token;
            }
            tokens.globex = (await clientWithToken(t.server, root, { clientId: 'globex-admin', roles: ['tenant:admin'], tenantId: 'globex' })).token;

            expect((await t.server.inject({ method: 'POST', url: '/api/key-chain', headers: bearer(tokens.admin), payload: { id: 'issuer', usageType: 'attestation', subject: { commonName: 'Acme', country: 'DE' } } })).statusCode).to.equal(201);
            for (const id of ['pid', 'badge']) {
                const res = await t.server.inject({ method: 'POST', url: '/api/issuer/credentials', headers: bearer(tokens.admin), payload: sdJwt(id) });
                expect(res.statusCode, res.payload).to.equal(201);
            }
            const offer = async (payload: Record<string, unknown>) => {
                const res = await t.server.inject({ method: 'POST', url: '/api/issuer/offer', headers: bearer(tokens.offer), payload });
                expect(res.statusCode, res.payload).to.equal(201);
                return res.result as { session: string; uri: string };
            };
            offers.A = await offer({ credentialConfigurationIds: ['pid'], reference: 'order-A' });
            offers.B = await offer({ credentialConfigurationIds: ['pid', 'badge'], reference: 'order-B', byReference: false });
            offers.C = await offer({ credentialConfigurationIds: ['badge'] });
            offers.B.code = JSON.parse(new URL(offers.B.uri).searchParams.get('credential_offer')!).grants[PRE_AUTH]['pre-authorized_code'];

            await insert([...ACME_ROWS, ...GLOBEX_ROWS]);
        });
        after(() => t.stop());

        it('lists the tenant\'s sessions, most recently updated first, as list items', async () => {
            const page = await list('');
            expect(page.total).to.equal(12);
            expect(page.page).to.equal(1);
            expect(page.pageSize).to.equal(25);
            expect(page.totalPages).to.equal(1);
            expect(page.totalCapped).to.not.exist();
            expect(page.items.map((i) => i.id)).to.equal(expectedOrder(page.items, 'updatedAt', 'desc'));
            expect(sorted(page.items.map((i) => i.id))).to.equal(sorted([offers.A.session, offers.B.session, offers.C.session, ...ACME_ROWS.map((r) => r.id)]));
            // The offers were created just now: they come first.
            expect(page.items.slice(0, 3).map((i) => i.id).sort()).to.equal(sorted([offers.A.session, offers.B.session, offers.C.session]));
            // The tie on updatedAt between directId(8) and directId(9) is broken by the id, descending.
            const at = (id: string) => page.items.findIndex((i) => i.id === id);
            expect(at(directId(9))).to.equal(at(directId(8)) - 1);

            const a = page.items.find((i) => i.id === offers.A.session)!;
            expect(a).to.include({ type: 'issuance', status: 'active', reference: 'order-A', credentialConfigurationIds: ['pid'] });
            expect(Object.keys(a).sort()).to.equal(['createdAt', 'credentialConfigurationIds', 'id', 'reference', 'status', 'type', 'updatedAt']);
            const p3 = page.items.find((i) => i.id === directId(3))!;
            expect(p3).to.equal({ id: directId(3), type: 'presentation', status: 'failed', requestId: 'kyc', failureCode: 'access_denied', createdAt: '2024-03-01T12:00:00.000Z', updatedAt: '2024-03-02T12:00:00.000Z' });
            expect(page.items.find((i) => i.id === directId(4))!.expiresAt).to.equal('2024-03-05T00:05:00.000Z');
        });

        it('filters by type and status (repeatable), and refuses unknown values', async () => {
            expect(sorted(await ids('type=issuance'))).to.equal(sorted([offers.A.session, offers.B.session, offers.C.session, directId(6), directId(7), directId(8)]));
            expect(sorted(await ids('type=presentation'))).to.equal(sorted([1, 2, 3, 4, 5, 9].map(directId)));
            expect(sorted(await ids('status=failed'))).to.equal(sorted([directId(2), directId(3)]));
            expect(sorted(await ids('status=failed&status=expired'))).to.equal(sorted([2, 3, 5, 7].map(directId)));
            expect(sorted(await ids('status=active&type=presentation'))).to.equal(sorted([directId(4), directId(9)]));
            expect(sorted(await ids('status=active&type=issuance'))).to.equal(sorted([offers.A.session, offers.B.session, offers.C.session]));
            expect((await ids('status=active&status=fetched&status=completed&status=failed&status=expired')).length).to.equal(12);
            expect((await status('status=done')).statusCode).to.equal(400);
            expect((await status('status=active&status=nope')).statusCode).to.equal(400);
            expect((await status('type=both')).statusCode).to.equal(400);
        });

        it('filters by requestId, failureCode and credentialConfigurationId, combined with AND', async () => {
            expect(sorted(await ids('requestId=age-check'))).to.equal(sorted([1, 2, 5].map(directId)));
            expect(sorted(await ids('requestId=kyc&status=failed'))).to.equal([directId(3)]);
            expect(await ids('failureCode=access_denied')).to.equal([directId(3)]);
            expect(await ids('requestId=age-check&failureCode=signature_invalid')).to.equal([directId(2)]);
            expect(await ids('requestId=kyc&failureCode=signature_invalid')).to.equal([]);

            expect(sorted(await ids('credentialConfigurationId=pid'))).to.equal(sorted([offers.A.session, offers.B.session, directId(6)]));
            expect(sorted(await ids('credentialConfigurationId=badge'))).to.equal(sorted([offers.B.session, offers.C.session, directId(7)]));
            expect(await ids('credentialConfigurationId=badge&status=expired')).to.equal([directId(7)]);
            expect(await ids(`credentialConfigurationId=${encodeURIComponent('p%d')}`)).to.equal([directId(8)]);
            expect(await ids('credentialConfigurationId=p_d')).to.equal([]);
            expect(await ids('credentialConfigurationId=PID')).to.equal([directId(8)]);
            expect(await ids('credentialConfigurationId=pid_x')).to.equal([directId(8)]);
            expect(await ids(`credentialConfigurationId=${encodeURIComponent('a","pid')}`)).to.equal([directId(8)]);
            expect(await ids('credentialConfigurationId=pi')).to.equal([]);
            // Only issuance sessions offer credential configurations.
            expect(await ids('credentialConfigurationId=pid&type=presentation')).to.equal([]);
        });

        it('filters by creation and update time, bounds included, any time zone', async () => {
            expect(sorted(await ids('createdFrom=2024-01-01T00:00:00Z&createdTo=2024-02-01T00:00:00Z'))).to.equal(sorted([1, 2, 6].map(directId)));
            // The same instants, written with an offset.
            expect(sorted(await ids(`createdFrom=${encodeURIComponent('2024-01-01T01:00:00+01:00')}&createdTo=${encodeURIComponent('2024-01-31T19:00:00-05:00')}`))).to.equal(sorted([1, 2, 6].map(directId)));
            expect(sorted(await ids('createdTo=2024-01-01T00:00:00.000Z'))).to.equal([directId(5)]);
            expect(sorted(await ids('updatedFrom=2024-01-06T00:00:00.000Z&updatedTo=2024-03-02T12:00:00.000Z'))).to.equal(sorted([1, 2, 3, 6, 7, 8, 9].map(directId)));
            expect(sorted(await ids('updatedFrom=2024-01-06T00:00:00.000Z&updatedTo=2024-03-02T12:00:00.000Z&type=presentation&status=failed'))).to.equal(sorted([2, 3].map(directId)));
            expect(sorted(await ids('createdFrom=2024-03-05T00:00:00Z&createdTo=2024-03-05T00:00:00Z'))).to.equal([directId(4)]);
            const recent = await ids(`updatedFrom=${encodeURIComponent(new Date(Date.now() - 3_600_000).toISOString())}`);
            expect(sorted(recent)).to.equal(sorted([offers.A.session, offers.B.session, offers.C.session]));
        });

        it('answers 400 for an inverted range, naming the parameter, and for times without a time zone', async () => {
            for (const [from, to] of [['createdFrom', 'createdTo'], ['updatedFrom', 'updatedTo']]) {
                const res = await status(`${from}=2024-02-01T00:00:00Z&${to}=2024-01-31T23:59:59.999Z`);
                expect(res.statusCode).to.equal(400);
                const body = res.result as { message: string; details: Array<{ path: string }> };
                expect(body.message).to.contain(from!);
                expect(body.details[0]!.path).to.equal(from);
            }
            expect((await status('createdFrom=2024-02-01T00:00:00')).statusCode).to.equal(400);
            expect((await status('updatedTo=2024-02-01')).statusCode).to.equal(400);
            expect((await status('createdFrom=yesterday')).statusCode).to.equal(400);
            expect((await status('createdFrom=2024-02-30T00:00:00Z')).statusCode).to.equal(400);
            // Outside the years 1 to 9999 in UTC (PostgreSQL refused the ISO text of year 0 with a 500).
            expect((await status(`createdFrom=${encodeURIComponent('0001-01-01T00:00:00+05:00')}`)).statusCode).to.equal(400);
            expect((await status(`updatedTo=${encodeURIComponent('9999-12-31T23:00:00-05:00')}`)).statusCode).to.equal(400);
            // The ends of that span are good values, alone and as a wide window (whose bounds go beyond them).
            for (const query of ['createdFrom=0001-01-01T00:00:00Z', 'createdTo=9999-12-31T23:59:59.999Z', 'createdFrom=0001-01-01T00:00:00Z&createdTo=9999-12-31T23:59:59.999Z']) {
                expect((await list(query)).total, query).to.equal(12);
            }
        });

        it('filters by id prefix, at most 255 characters', async () => {
            expect(sorted(await ids(`id=${PREFIX}`))).to.equal(sorted(ACME_ROWS.map((r) => r.id)));
            expect(await ids(`id=${offers.A.session}`)).to.equal([offers.A.session]);
            expect(await ids(`id=${offers.A.session.slice(0, 13)}`)).to.include(offers.A.session);
            expect(await ids(`id=${PREFIX}&status=failed&type=presentation`)).to.have.length(2);
            expect(await ids(`id=${PREFIX.toUpperCase()}`)).to.equal([]);
            expect(await ids(`id=${'a'.repeat(255)}`)).to.equal([]);
            const res = await status(`id=${'a'.repeat(256)}`);
            expect(res.statusCode).to.equal(400);
            expect((res.result as { message: string }).message).to.contain('id');
        });

        it('finds a session by each handle with q', async () => {
            expect(await ids(`q=${offers.A.session}`)).to.equal([offers.A.session]);
            expect(await ids(`q=${offers.A.session.slice(0, 8)}`)).to.include(offers.A.session);
            expect(await ids(`q=${encodeURIComponent(`  ${offers.A.session}  `)}`)).to.equal([offers.A.session]);
            // Reference: globex has a session with the same reference, which never shows.
            expect(await ids('q=order-A')).to.equal([offers.A.session]);
            expect(await ids('q=ref-p1')).to.equal([directId(1)]);
            // The pasted link, by reference and by value.
            expect(await ids(`q=${encodeURIComponent(offers.A.uri)}`)).to.equal([offers.A.session]);
            expect(await ids(`q=${encodeURIComponent(offers.B.uri)}`)).to.equal([offers.B.session]);
            // The pre-authorized code, as a wallet received it (for A: from the offer fetched by reference).
            expect(await ids(`q=${encodeURIComponent(offers.B.code!)}`)).to.equal([offers.B.session]);
            const offerUri = new URL(offers.A.uri).searchParams.get('credential_offer_uri')!;
            const fetched = await t.server.inject(offerUri.replace('http://hallmark.test', ''));
            expect(fetched.statusCode).to.equal(200);
            const codeA = (fetched.result as any).grants[PRE_AUTH]['pre-authorized_code'] as string;
            expect(await ids(`q=${encodeURIComponent(codeA)}`)).to.equal([offers.A.session]);
            // walletNonce, and a pasted OpenID4VP request link or its request_uri.
            expect(await ids('q=wn-p3')).to.equal([directId(3)]);
            const requestUri = 'http://hallmark.test/presentations/wn-p3/oid4vp/request';
            expect(await ids(`q=${encodeURIComponent(`openid4vp://?client_id=${encodeURIComponent('x509_hash:abc')}&request_uri=${encodeURIComponent(requestUri)}`)}`)).to.equal([directId(3)]);
            expect(await ids(`q=${encodeURIComponent(requestUri)}`)).to.equal([directId(3)]);
            // Combined with filters; no match; another tenant's handles.
            expect(await ids('q=order-A&status=completed')).to.equal([]);
            expect(await ids('q=order-A&type=issuance')).to.equal([offers.A.session]);
            expect(await ids(`q=${PREFIX}&status=failed`)).to.have.length(2);
            expect(await ids('q=no-such-thing')).to.equal([]);
            expect(await ids('q=wn-g1')).to.equal([]);
            expect(await ids(`q=${directId(101)}`)).to.equal([]);
            expect((await ids('q=')).length).to.equal(12);
        });

        it('sorts by every key, both ways', async () => {
            const acmeAll = (await list('pageSize=100')).items;
            for (const sortBy of ['id', 'status', 'createdAt', 'updatedAt', 'requestId']) {
                for (const sortOrder of ['asc', 'desc'] as const) {
                    const got = await ids(`sortBy=${sortBy}&sortOrder=${sortOrder}`);
                    expect(got, `${sortBy} ${sortOrder}`).to.equal(expectedOrder(acmeAll, sortBy, sortOrder));
                }
            }
            expect(await ids('sortOrder=asc')).to.equal(expectedOrder(acmeAll, 'updatedAt', 'asc'));
            const presentations = await ids('type=presentation&sortBy=requestId&sortOrder=asc');
            expect(presentations).to.equal([5, 1, 2, 9, 3, 4].map(directId));
            expect((await status('sortBy=reference')).statusCode).to.equal(400);
            expect((await status('sortOrder=up')).statusCode).to.equal(400);
        });

        it('pages with totals', async () => {
            const all = (await list('pageSize=100')).items.map((i) => i.id);
            const seen: string[] = [];
            for (let page = 1; page <= 3; page++) {
                const body = await list(`pageSize=5&page=${page}`);
                expect(body).to.include({ total: 12, page, pageSize: 5, totalPages: 3 });
                expect(body.items).to.have.length(page < 3 ? 5 : 2);
                seen.push(...body.items.map((i) => i.id));
            }
            expect(seen).to.equal(all);
            expect(await list('pageSize=5&page=4')).to.include({ total: 12, totalPages: 3, items: [] });
            expect(await list('pageSize=2&status=failed')).to.include({ total: 2, totalPages: 1 });
            expect(await list('pageSize=1&status=failed&page=2')).to.include({ total: 2, totalPages: 2 });
            for (const bad of ['pageSize=0', 'pageSize=101', 'page=0', 'page=x']) {
                expect((await status(bad)).statusCode, bad).to.equal(400);
            }
            expect((await list('pageSize=100')).pageSize).to.equal(100);
        });

        it('refuses unknown parameters', async () => {
            expect((await status('foo=1')).statusCode).to.equal(400);
            expect((await status('tenantId=globex')).statusCode).to.equal(400);
            expect((await status('status=active&limit=5')).statusCode).to.equal(400);
        });

        it('shows each caller only the session types its roles allow', async () => {
            const issuance = await ids('', 'offer');
            expect(sorted(issuance)).to.equal(sorted([offers.A.session, offers.B.session, offers.C.session, directId(6), directId(7), directId(8)]));
            expect(await ids('type=presentation', 'offer')).to.equal([]);
            expect(await ids('q=wn-p3', 'offer')).to.equal([]);
            expect(await ids('requestId=kyc', 'offer')).to.equal([]);
            expect(sorted(await ids('', 'issuanceConfig'))).to.equal(sorted(issuance));

            const presentation = await ids('', 'request');
            expect(sorted(presentation)).to.equal(sorted([1, 2, 3, 4, 5, 9].map(directId)));
            expect(await ids('type=issuance', 'request')).to.equal([]);
            expect(await ids('q=order-A', 'request')).to.equal([]);
            expect(await ids('credentialConfigurationId=pid', 'request')).to.equal([]);
            expect(await ids('requestId=kyc&status=active', 'request')).to.equal([directId(4), directId(9)]);
            expect(sorted(await ids('', 'presentationConfig'))).to.equal(sorted(presentation));
            expect((await list('', 'request')).total).to.equal(6);

            expect((await ids('', 'reader')).length).to.equal(12);
            expect((await status('', 'keys')).statusCode).to.equal(403);
            expect((await t.server.inject('/api/session')).statusCode).to.equal(401);
        });

        it('never shows another tenant\'s sessions', async () => {
            expect(sorted(await ids('', 'globex'))).to.equal(sorted(GLOBEX_ROWS.map((r) => r.id)));
            expect(await ids('q=order-A', 'globex')).to.equal([directId(101)]);
            expect(await ids(`q=${offers.A.session}`, 'globex')).to.equal([]);
            expect(await ids(`q=${encodeURIComponent(offers.A.uri)}`, 'globex')).to.equal([]);
            expect(await ids(`id=${PREFIX}`, 'globex')).to.equal([directId(102), directId(101)]);
            for (const query of ['', `id=${PREFIX}`, `q=${PREFIX}`, 'q=ref-p1', 'q=wn-g1', 'requestId=age-check', 'failureCode=access_denied', 'credentialConfigurationId=pid', 'sortBy=id&sortOrder=asc']) {
                const seen = await ids(query);
                expect(seen, query).to.not.include(GLOBEX_ROWS.map((r) => r.id));
                expect(seen.filter((id) => id === directId(101) || id === directId(102)), query).to.equal([]);
            }
        });

        it('counts up to a cap, exactly below it', async () => {
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'bulk');
            tokens.bulk = (await clientWithToken(t.server, root, { clientId: 'bulk-admin', roles: ['tenant:admin'], tenantId: 'bulk' })).token;
            const n = COUNT_CAP + 30;
            const base = Date.parse('2025-01-01T00:00:00.000Z');
            const rows = Array.from({ length: n }, (_, i) => ({
                id: `bulk-${String(i).padStart(6, '0')}`,
                tenantId: 'bulk',
                type: i % 2 ? 'presentation' : 'issuance',
                status: i < 30 ? 'failed' : 'completed',
                txCodeFailures: 0,
                createdAt: new Date(base + i * 1000).toISOString(),
                updatedAt: new Date(base + i * 1000).toISOString()
            }));
            await t.server.db.knex.batchInsert('sessions', rows, 500);

            const first = await list('pageSize=100', 'bulk');
            expect(first).to.include({ total: COUNT_CAP, totalCapped: true, totalPages: COUNT_CAP / 100 });
            expect(first.items[0]!.id).to.equal(`bulk-${String(n - 1).padStart(6, '0')}`);
            // The last page ends the list: its total is exact.
            const last = await list(`pageSize=100&page=${Math.ceil(n / 100)}`, 'bulk');
            expect(last.items).to.have.length(30);
            expect(last.total).to.equal(n);
            expect(last.totalCapped).to.not.exist();
            expect(await list('pageSize=10&status=failed', 'bulk')).to.include({ total: 30, totalPages: 3 });
            expect((await list('pageSize=10&type=issuance', 'bulk')).total).to.equal(Math.ceil(n / 2));
            expect((await list('pageSize=10&type=issuance', 'bulk')).totalCapped).to.not.exist();

            // Handles that match many sessions (walked in index order) and few (looked up), alike in results.
            const bulkId = (i: number) => `bulk-${String(i).padStart(6, '0')}`;
            const many = await list('q=bulk-0&pageSize=5', 'bulk');
            expect(many).to.include({ total: COUNT_CAP, totalCapped: true });
            expect(many.items.map((i) => i.id)).to.equal([n - 1, n - 2, n - 3, n - 4, n - 5].map(bulkId));
            expect((await list('q=bulk-00&sortBy=id&sortOrder=asc&pageSize=3', 'bulk')).items.map((i) => i.id)).to.equal([0, 1, 2].map(bulkId));
            expect(await list('q=bulk-&status=failed&pageSize=10&page=3', 'bulk')).to.include({ total: 30, totalPages: 3 });
            // Counted through the id prefix first: with the other filters applied there, so a filtered scan stays exact.
            expect(await list('q=bulk-&type=issuance&pageSize=10', 'bulk')).to.include({ total: Math.ceil(n / 2) });
            const exactlyTheCap = await list('q=bulk-&status=completed&pageSize=10', 'bulk');
            expect(exactlyTheCap.total).to.equal(COUNT_CAP);
            expect(exactlyTheCap.totalCapped).to.not.exist();
            expect((await list('q=bulk-&status=failed&type=presentation&pageSize=100', 'bulk')).items.map((i) => i.id)).to.equal([29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1].map(bulkId));
            expect((await list('id=bulk-0001&pageSize=100', 'bulk')).items.map((i) => i.id)).to.equal(Array.from({ length: 100 }, (_, i) => bulkId(199 - i)));
            expect((await list('id=bulk-00002&status=failed', 'bulk')).total).to.equal(10);
            expect((await list('id=bulk-00002&status=completed', 'bulk')).total).to.equal(0);
            expect((await list('id=bulk-&q=bulk-00002&status=failed&pageSize=3', 'bulk'))).to.include({ total: 10, totalPages: 4 });
            expect((await list('id=bulk-00002&q=bulk-&type=issuance', 'bulk')).items.map((i) => i.id)).to.equal([28, 26, 24, 22, 20].map(bulkId));
            expect((await list('q=bulk-0', 'admin')).total).to.equal(0);

            // Time ranges that hold many sessions (tested on rows in sort order) and few (read from their index).
            const at = (i: number) => encodeURIComponent(new Date(base + i * 1000).toISOString());
            const broad = await list(`createdTo=${at(7200)}&pageSize=3`, 'bulk');
            expect(broad).to.include({ total: 7201 });
            expect(broad.items.map((i) => i.id)).to.equal([7200, 7199, 7198].map(bulkId));
            const narrow = await list(`createdFrom=${at(7200)}&createdTo=${at(7209)}&sortBy=status&sortOrder=asc&pageSize=4`, 'bulk');
            expect(narrow).to.include({ total: 10 });
            expect(narrow.items.map((i) => i.id)).to.equal([7200, 7201, 7202, 7203].map(bulkId));
            expect(await list(`createdFrom=${at(0)}&status=failed&pageSize=10`, 'bulk')).to.include({ total: 30 });
            expect((await list(`updatedFrom=${at(20)}&updatedTo=${at(5000)}&sortBy=createdAt&sortOrder=asc&pageSize=2`, 'bulk')).items.map((i) => i.id)).to.equal([20, 21].map(bulkId));
            expect((await list(`updatedFrom=${at(20)}&updatedTo=${at(5000)}&createdFrom=${at(4990)}&sortBy=id&sortOrder=desc&pageSize=20`, 'bulk')).items.map((i) => i.id)).to.equal(Array.from({ length: 11 }, (_, i) => bulkId(5000 - i)));
            expect((await list(`createdFrom=${at(100)}&createdTo=${at(199)}&q=bulk-0001&type=presentation`, 'bulk')).total).to.equal(50);

            // Every plan answers alike: thresholds that force each way of running a query give the same pages.
            const iso = (i: number) => new Date(base + i * 1000).toISOString();
            const both: Array<'issuance' | 'presentation'> = ['issuance', 'presentation'];
            const variants = {
                default: new SessionSearch(t.server.db),
                lookupAndDrive: new SessionSearch(t.server.db, { lookupLimit: 1e9, rangeLimit: 1e9 }),
                scanAndProbe: new SessionSearch(t.server.db, { lookupLimit: 1, rangeLimit: 1, walkProbe: 50, walkBudget: 100 }),
                scanAndWalk: new SessionSearch(t.server.db, { lookupLimit: 1, rangeLimit: 1, walkProbe: 10, walkBudget: 1e9 })
            };
            const queries: Array<Partial<SessionListQuery>> = [
                { q: 'bulk-0001' },
                { q: 'bulk-00', sortBy: 'id', sortOrder: 'asc' },
                { id: 'bulk-000', status: ['failed'] },
                { q: 'bulk-0', id: 'bulk-0002', sortBy: 'status' },
                { createdTo: iso(7200) },
                { createdFrom: iso(9000), type: 'issuance' },
                { createdFrom: iso(100), createdTo: iso(3000), sortBy: 'status', sortOrder: 'asc' },
                { updatedFrom: iso(20), updatedTo: iso(5000), sortBy: 'createdAt' },
                { updatedFrom: iso(5000), sortBy: 'id', sortOrder: 'asc', type: 'presentation' },
                { createdFrom: iso(0), q: 'bulk-00', status: ['failed', 'completed'], sortBy: 'requestId' },
                { createdFrom: iso(10), createdTo: iso(9000), updatedFrom: iso(20), updatedTo: iso(8000), sortOrder: 'asc' }
            ];
            for (const q of queries) {
                for (const page of [1, 3]) {
                    const query = { page, pageSize: 7, ...q } as SessionListQuery;
                    const results = await Promise.all(Object.values(variants).map((v) => v.list('bulk', both, query)));
                    for (const result of results.slice(1)) {
                        expect(result.items.map((i) => i.id), JSON.stringify(query)).to.equal(results[0]!.items.map((i) => i.id));
                        expect(result.items.length, JSON.stringify(query)).to.equal(7);
                    }
                }
            }
            const planOf = (v: SessionSearch, q: Partial<SessionListQuery>) => v.plan('bulk', both, { page: 1, pageSize: 7, ...q } as SessionListQuery);
            expect((await planOf(variants.default, { q: 'bulk-0001' })).handles).to.equal('lookup-q');
            expect((await planOf(variants.default, { q: 'bulk-0' })).handles).to.equal('scan');
            expect((await planOf(variants.default, { q: 'bulk-0', id: 'bulk-0002' })).handles).to.equal('lookup-id');
            expect((await planOf(variants.scanAndProbe, { q: 'bulk-0001' })).handles).to.equal('scan');
            expect((await planOf(variants.lookupAndDrive, { createdTo: iso(7200) })).drive).to.equal('created');
            // A wide created range in the default order walks the window of the updated-at index (see ListPlan).
            expect(await planOf(variants.scanAndProbe, { createdTo: iso(7200) })).to.equal({ rowOnly: [], window: true });
            expect(await planOf(variants.scanAndProbe, { createdFrom: iso(9000) })).to.equal({ rowOnly: [], window: true });
            const walked = await planOf(variants.scanAndProbe, { createdFrom: iso(9000), sortBy: 'status' });
            expect(walked.drive).to.be.undefined();
            expect(walked.rowOnly).to.equal(dialect === 'sqlite' ? ['created'] : []);
            expect((await planOf(variants.scanAndWalk, { updatedFrom: iso(20), sortBy: 'createdAt' })).drive).to.be.undefined();
            expect((await planOf(variants.default, { updatedFrom: iso(20) })).drive).to.be.undefined();
        });

        it('lists wide created ranges in the default order exactly: the window of the updated-at index and the late updates', async () => {
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'late');
            tokens.late = (await clientWithToken(t.server, root, { clientId: 'late-admin', roles: ['tenant:admin'], tenantId: 'late' })).token;
            const base = Date.parse('2025-03-01T00:00:00.000Z');
            const DAY = 86_400_000;
            // One session every 10 minutes for 3 days; most updated within the hour, every 13th one to three days later
            // (late), and lags at the edge of a day: exactly a day (not late), a day and a millisecond, and a second.
            const lagOf = (i: number): number => {
                // 200: updated by a replica whose clock lags, five seconds "before" its creation.
                const edges: Record<number, number> = { 100: DAY, 101: DAY + 1, 102: DAY + 1000, 103: DAY - 1, 200: -5000 };
                return edges[i] ?? (i % 13 === 0 ? DAY + ((i * 7919) % (2 * DAY)) : (i * 37_000) % 3_600_000);
            };
            const rows: Row[] = Array.from({ length: 432 }, (_, i) => ({
                id: `late-${String(i).padStart(4, '0')}`,
                tenantId: 'late',
                type: i % 2 ? 'presentation' : 'issuance',
                status: i % 3 ? 'completed' : 'failed',
                // A few sessions match q=late-01 by a handle rather than by their id.
                reference: i >= 300 && i < 304 ? 'late-01' : null,
                walletNonce: i === 305 ? 'late-01' : null,
                createdAt: new Date(base + i * 600_000).toISOString(),
                updatedAt: new Date(base + i * 600_000 + lagOf(i)).toISOString()
            }));
            // Another tenant's late sessions in the same range never show.
            const foreign: Row[] = [0, 1, 2].map((i) => ({ id: `late-foreign-${i}`, tenantId: 'globex', type: 'issuance', status: 'completed', createdAt: new Date(base + DAY).toISOString(), updatedAt: new Date(base + 9 * DAY + i).toISOString() }));
            await t.server.db.knex.batchInsert('sessions', [...rows, ...foreign].map((r) => ({ txCodeFailures: 0, ...r })), 200);

            const at = (ms: number) => new Date(ms).toISOString();
            const expected = (q: Partial<SessionListQuery>, page: number, pageSize: number): string[] => {
                const inRange = (value: string, from?: string, to?: string) => (!from || value >= from) && (!to || value <= to);
                const dir = q.sortOrder === 'asc' ? 1 : -1;
                return rows
                    .filter((r) => inRange(r.createdAt, q.createdFrom, q.createdTo) && inRange(r.updatedAt, q.updatedFrom, q.updatedTo))
                    .filter((r) => (!q.type || r.type === q.type) && (!q.status || q.status.includes(r.status as never)))
                    .sort((a, b) => dir * (a.updatedAt.localeCompare(b.updatedAt) || a.id.localeCompare(b.id)))
                    .slice((page - 1) * pageSize, page * pageSize)
                    .map((r) => r.id);
            };
            const windowed = new SessionSearch(t.server.db, { rangeLimit: 1 });
            const both: Array<'issuance' | 'presentation'> = ['issuance', 'presentation'];
            const queries: Array<Partial<SessionListQuery>> = [
                { createdTo: at(base + DAY) },
                { createdTo: at(base + DAY), sortOrder: 'asc' },
                { createdFrom: at(base + DAY / 2), createdTo: at(base + DAY + DAY / 3) },
                { createdFrom: at(base + DAY / 2), createdTo: at(base + DAY + DAY / 3), sortOrder: 'asc' },
                { createdFrom: at(base + 2 * DAY) },
                { createdFrom: at(base + 100 * 600_000), createdTo: at(base + 103 * 600_000) },
                { createdFrom: at(base + 200 * 600_000), sortOrder: 'asc' },
                { createdFrom: at(base + 200 * 600_000), createdTo: at(base + 200 * 600_000) },
                { createdTo: at(base + DAY), status: ['failed'], type: 'presentation' },
                { createdFrom: at(base + DAY / 4), createdTo: at(base + 2 * DAY), updatedFrom: at(base + DAY), updatedTo: at(base + 3 * DAY) },
                { createdFrom: at(base + DAY / 4), createdTo: at(base + DAY), updatedFrom: at(base + 3 * DAY), sortOrder: 'asc' },
                // At the ends of the instants a query may hold: the window's bounds lie beyond them and are left out.
                { createdTo: '9999-12-31T23:59:59.999Z' },
                { createdFrom: '0001-01-01T00:00:00.000Z', sortOrder: 'asc' }
            ];
            for (const q of queries) {
                expect((await windowed.plan('late', both, { page: 1, pageSize: 7, ...q } as SessionListQuery)).window, JSON.stringify(q)).to.be.true();
                for (const page of [1, 2, 5, 40]) {
                    const query = { page, pageSize: 7, ...q } as SessionListQuery;
                    const want = expected(q, page, 7);
                    expect((await windowed.list('late', both, query)).items.map((i) => i.id), JSON.stringify(query)).to.equal(want);
                    const params = new URLSearchParams({ page: String(page), pageSize: '7' });
                    for (const [key, value] of Object.entries(q)) {
                        for (const v of [value].flat()) {
                            params.append(key, String(v));
                        }
                    }
                    expect((await list(params.toString(), 'late')).items.map((i) => i.id), params.toString()).to.equal(want);
                }
            }
            // A q that matches many sessions by their id and a few by a handle: the two parts of a scan, in every order.
            const scanning = new SessionSearch(t.server.db, { lookupLimit: 1 });
            for (const sortBy of ['id', 'status', 'createdAt', 'updatedAt', 'requestId'] as const) {
                for (const sortOrder of ['asc', 'desc'] as const) {
                    const q = { q: 'late-01', sortBy, sortOrder };
                    expect((await scanning.plan('late', both, { page: 1, pageSize: 7, ...q } as SessionListQuery)).handles).to.equal('scan');
                    const key = (r: Row) => (sortBy === 'id' ? '' : sortBy === 'status' ? r.status : sortBy === 'createdAt' ? r.createdAt : sortBy === 'requestId' ? '' : r.updatedAt);
                    const tail = (r: Row) => (sortBy === 'createdAt' || sortBy === 'id' ? '' : r.updatedAt);
                    const matching = rows.filter((r) => r.id.startsWith('late-01') || r.reference === 'late-01' || r.walletNonce === 'late-01')
                        .sort((a, b) => (sortOrder === 'asc' ? 1 : -1) * (key(a).localeCompare(key(b)) || tail(a).localeCompare(tail(b)) || a.id.localeCompare(b.id)));
                    expect(matching.length).to.equal(105);
                    for (const page of [1, 4, 15, 16]) {
                        const want = matching.slice((page - 1) * 7, page * 7).map((r) => r.id);
                        const got = await scanning.list('late', both, { page, pageSize: 7, ...q } as SessionListQuery);
                        expect(got.items.map((i) => i.id), `${JSON.stringify(q)} page ${page}`).to.equal(want);
                    }
                    expect((await scanning.list('late', both, { page: 2, pageSize: 7, ...q } as SessionListQuery)).total).to.equal(105);
                }
            }

            // An id prefix that matches many sessions: pages and the count, exact or capped, whichever end of the
            // updated-at order the count walks from (PostgreSQL picks the end nearer the prefix).
            const cappedScan = new SessionSearch(t.server.db, { lookupLimit: 1, countCap: 10 });
            for (const sortOrder of ['asc', 'desc'] as const) {
                for (const status of [undefined, ['failed'] as SessionStatus[]]) {
                    const q = { id: 'late-01', sortOrder, ...(status ? { status } : {}) };
                    expect((await scanning.plan('late', both, { page: 1, pageSize: 7, ...q } as SessionListQuery)).handles).to.equal('scan');
                    const matching = rows.filter((r) => r.id.startsWith('late-01') && (!status || status.includes(r.status as SessionStatus)))
                        .sort((a, b) => (sortOrder === 'asc' ? 1 : -1) * (a.updatedAt.localeCompare(b.updatedAt) || a.id.localeCompare(b.id)));
                    for (const page of [1, 3]) {
                        const got = await scanning.list('late', both, { page, pageSize: 7, ...q } as SessionListQuery);
                        expect(got.items.map((i) => i.id), `${JSON.stringify(q)} page ${page}`).to.equal(matching.slice((page - 1) * 7, page * 7).map((r) => r.id));
                        expect(got.total, JSON.stringify(q)).to.equal(matching.length);
                    }
                    const capped = await cappedScan.list('late', both, { page: 1, pageSize: 7, ...q } as SessionListQuery);
                    expect(capped.totalCapped, JSON.stringify(q)).to.equal(matching.length > 10);
                    expect(capped.total, JSON.stringify(q)).to.equal(Math.min(matching.length, 10));
                }
            }

            // The late ones really came from their own index: the window alone would miss them.
            const lateOnes = expected({ createdTo: at(base + DAY) }, 1, 7).filter((id) => Number(id.slice(5)) % 13 === 0 || id === 'late-0101' || id === 'late-0102');
            expect(lateOnes.length).to.be.above(0);
        });

        it('deletes a session of the tenant, with the role of its type', async () => {
            const rows: Row[] = [
                { id: directId(201), tenantId: 'acme', type: 'issuance', status: 'completed', createdAt: '2024-05-01T00:00:00.000Z', updatedAt: '2024-05-01T00:00:00.000Z' },
                { id: directId(202), tenantId: 'acme', type: 'presentation', status: 'completed', requestId: 'kyc', createdAt: '2024-05-01T00:00:00.000Z', updatedAt: '2024-05-01T00:00:00.000Z' },
                { id: directId(203), tenantId: 'acme', type: 'presentation', status: 'failed', requestId: 'kyc', createdAt: '2024-05-01T00:00:00.000Z', updatedAt: '2024-05-01T00:00:00.000Z' }
            ];
            await insert(rows);
            await t.server.db.knex('sessionLogs').insert({ tenantId: 'acme', sessionId: directId(203), level: 'info', message: 'hello', createdAt: new Date().toISOString() });
            const del = (id: string, who: string) => t.server.inject({ method: 'DELETE', url: `/api/session/${encodeURIComponent(id)}`, headers: bearer(tokens[who]!) });
            const exists = async (id: string) => (await t.server.db.knex('sessions').where({ id })).length === 1;

            // Another tenant's session: 404, and it stays.
            expect((await del(directId(101), 'admin')).statusCode).to.equal(404);
            expect(await exists(directId(101))).to.be.true();
            expect((await del('no-such-session', 'admin')).statusCode).to.equal(404);
            expect((await del('x'.repeat(256), 'admin')).statusCode).to.equal(400);

            // Roles: offer and read roles cannot delete; a config role only sessions of its type.
            expect((await del(directId(201), 'offer')).statusCode).to.equal(403);
            expect((await del(directId(201), 'reader')).statusCode).to.equal(403);
            expect((await del(directId(201), 'request')).statusCode).to.equal(403);
            expect((await del(directId(201), 'presentationConfig')).statusCode).to.equal(404);
            expect((await del(directId(202), 'issuanceConfig')).statusCode).to.equal(404);
            expect(await exists(directId(201))).to.be.true();
            expect(await exists(directId(202))).to.be.true();

            const gone = await del(directId(201), 'issuanceConfig');
            expect(gone.statusCode).to.equal(204);
            expect(gone.payload).to.equal('');
            expect(await exists(directId(201))).to.be.false();
            expect((await t.server.inject({ url: `/api/session/${directId(201)}`, headers: bearer(tokens.admin) })).statusCode).to.equal(404);
            expect((await del(directId(201), 'issuanceConfig')).statusCode).to.equal(404);

            expect((await del(directId(202), 'presentationConfig')).statusCode).to.equal(204);
            expect(await exists(directId(202))).to.be.false();

            // tenant:admin deletes either type; the session's logs go with it.
            expect((await del(directId(203), 'admin')).statusCode).to.equal(204);
            expect(await exists(directId(203))).to.be.false();
            expect(await t.server.db.knex('sessionLogs').where({ sessionId: directId(203) })).to.equal([]);
            expect(await ids(`id=${directId(201).slice(0, -1)}`)).to.equal([]);

            // An offer session through the API too; the other tenant deleting it gets 404.
            expect((await del(offers.C.session, 'globex')).statusCode).to.equal(404);
            expect((await del(offers.C.session, 'admin')).statusCode).to.equal(204);
            expect(await ids(`q=${offers.C.session}`)).to.equal([]);
            expect((await list('')).total).to.equal(11);
            expect(await exists(directId(101))).to.be.true();
        });
    });
}
