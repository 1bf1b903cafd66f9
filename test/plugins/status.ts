import Zlib from 'node:zlib';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { getListFromStatusListJWT } from '@sd-jwt/jwt-status-list';
import { statusListKind } from '../../resources/status-list';
import { DIALECTS } from '../helpers/databases';
import { cwtEntries, verified, verifiedCwt } from '../helpers/status-list';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const BASE = 'http://hallmark.test/issuers';

const CWT = { accept: 'application/statuslist+cwt' };

for (const dialect of DIALECTS) {
    describe(`status lists (${dialect})`, () => {
        let t: TestServer;
        let admin: string;
        let reader: string;
        let offer: string;
        let other: string;
        const inject = (token: string | undefined, method: string, url: string, payload?: object, headers: Record<string, string> = {}) =>
            t.server.inject({ method, url, payload, headers: { ...(token ? bearer(token) : {}), ...headers } });

        before(async () => {
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-status', 'hallmark-kms-db', 'hallmark-tenancy') });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme', { statusListConfig: { bits: 2, capacity: 64, ttlSeconds: 600, immediateUpdate: false } });
            await createTenant(t.server, root, 'globex');
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            reader = (await clientWithToken(t.server, root, { clientId: 'acme-reader', roles: ['tenant:read'], tenantId: 'acme' })).token;
            offer = (await clientWithToken(t.server, root, { clientId: 'acme-offer', roles: ['issuance:offer'], tenantId: 'acme' })).token;
            other = (await clientWithToken(t.server, root, { clientId: 'globex-admin', roles: ['tenant:admin'], tenantId: 'globex' })).token;
            for (const [id, usageType] of [['issuer', 'attestation'], ['status', 'statusList']]) {
                expect((await inject(admin, 'POST', '/api/key-chain', { id, usageType })).statusCode).to.equal(201);
            }
            expect((await inject(other, 'POST', '/api/key-chain', { id: 'issuer', usageType: 'attestation' })).statusCode).to.equal(201);
        });
        after(() => t.stop());

        it('creates a list with the tenant\'s defaults and its statusList key chain', async () => {
            const res = await inject(admin, 'POST', '/api/status-lists', { id: 'shared' });
            expect(res.statusCode).to.equal(201);
            const body = res.result as any;
            expect(body).to.include({ id: 'shared', uri: `${BASE}/acme/status-management/status-list/shared`, bits: 2, capacity: 64, used: 0, keyChainId: 'status' });
            expect(body.createdAt).to.be.a.string();
            expect(body.credentialConfigurationId).to.not.exist();
        });

        it('makes an id when none is given; another tenant falls back to its attestation chain and default layout', async () => {
            const mine = (await inject(admin, 'POST', '/api/status-lists', { bits: 8, capacity: 10, keyChainId: 'issuer' })).result as any;
            expect(mine.id).to.match(/^[0-9a-f-]{36}$/);
            expect(mine).to.include({ bits: 8, capacity: 10, keyChainId: 'issuer' });
            const theirs = await inject(other, 'POST', '/api/status-lists', { id: 'g1' });
            expect(theirs.statusCode).to.equal(201);
            expect(theirs.result).to.include({ bits: 1, capacity: 100_000, keyChainId: 'issuer', uri: `${BASE}/globex/status-management/status-list/g1` });
            expect((await inject(admin, 'DELETE', `/api/status-lists/${mine.id}`)).statusCode).to.equal(204);
        });

        it('validates bits, capacity and references', async () => {
            for (const payload of [{ bits: 3 }, { bits: 0 }, { capacity: 0 }, { capacity: 10_000_001 }, { capacity: 1.5 }, { id: '-bad' }]) {
                expect((await inject(admin, 'POST', '/api/status-lists', payload)).statusCode).to.equal(400);
            }
            const missing = await inject(admin, 'POST', '/api/status-lists', { id: 'x', keyChainId: 'nope' });
            expect(missing.statusCode).to.equal(400);
            expect(JSON.stringify((missing.result as any).details)).to.contain('MISSING_RESOURCE_REFERENCE');
            const unbound = await inject(admin, 'POST', '/api/status-lists', { id: 'y', credentialConfigurationId: 'nope' });
            expect(JSON.stringify((unbound.result as any).details)).to.contain('MISSING_RESOURCE_REFERENCE');
            expect((await inject(admin, 'POST', '/api/status-lists', { id: 'shared' })).statusCode).to.equal(409);
        });

        it('refuses a document that changes the layout of an existing list (STATUS_LIST_LAYOUT_IMMUTABLE)', async () => {
            const ctx = { tenantId: 'acme', clientId: 'test', roles: [] };
            const error = await expect(t.server.registry.write(ctx, statusListKind, { id: 'shared', bits: 4, capacity: 64, keyChainId: 'status' })).to.reject();
            expect((error as any).status).to.equal(400);
            expect((error as any).details).to.equal([{ path: 'bits', message: 'STATUS_LIST_LAYOUT_IMMUTABLE: bits stays 2' }]);
            const both = await expect(t.server.registry.write(ctx, statusListKind, { id: 'shared', bits: 1, capacity: 128 })).to.reject();
            expect((both as any).details.map((d: any) => d.path)).to.equal(['bits', 'capacity']);
            // The same layout is an ordinary update.
            await t.server.registry.write(ctx, statusListKind, { id: 'shared', bits: 2, capacity: 64, keyChainId: 'status' });
        });

        it('lists and reads lists of the caller\'s tenant only, for issuance:config and tenant:read', async () => {
            const page = (await inject(reader, 'GET', '/api/status-lists')).result as any;
            expect(page.items.map((l: any) => l.id)).to.equal(['shared']);
            expect(page.total).to.equal(1);
            expect(((await inject(reader, 'GET', '/api/status-lists/shared')).result as any).uri).to.equal(`${BASE}/acme/status-management/status-list/shared`);
            expect((await inject(other, 'GET', '/api/status-lists/shared')).statusCode).to.equal(404);
            expect((await inject(other, 'DELETE', '/api/status-lists/shared')).statusCode).to.equal(404);
            expect((await inject(reader, 'POST', '/api/status-lists', { id: 'r' })).statusCode).to.equal(403);
            expect((await inject(offer, 'GET', '/api/status-lists')).statusCode).to.equal(403);
            expect((await inject(reader, 'DELETE', '/api/status-lists/shared')).statusCode).to.equal(403);
            expect((await inject(undefined, 'GET', '/api/status-lists')).statusCode).to.equal(401);
        });

        it('serves a signed statuslist+jwt with every entry 0, Cache-Control and an ETag', async () => {
            const res = await inject(undefined, 'GET', '/issuers/acme/status-management/status-list/shared');
            expect(res.statusCode).to.equal(200);
            expect(res.headers['content-type']).to.contain('application/statuslist+jwt');
            expect(res.headers['cache-control']).to.equal('max-age=600');
            expect(res.headers.etag).to.match(/^"[\w-]+"$/);
            const { payload, protectedHeader } = await verified(res.payload);
            expect(protectedHeader).to.include({ alg: 'ES256', typ: 'statuslist+jwt' });
            const chain = ((await inject(admin, 'GET', '/api/key-chain/status')).result as any).certificateChain as string[];
            expect(protectedHeader.x5c![0]).to.equal(chain[0]!.replace(/-----[A-Z ]+-----|\s/g, ''));
            expect(payload).to.include({ sub: `${BASE}/acme/status-management/status-list/shared`, ttl: 600 });
            expect(payload.exp! - payload.iat!).to.equal(1200);
            const statusList = payload.status_list as { bits: number; lst: string };
            expect(statusList.bits).to.equal(2);
            // 64 entries of 2 bits: 16 zero bytes, zlib-deflated.
            expect(Zlib.inflateSync(Buffer.from(statusList.lst, 'base64url'))).to.equal(Buffer.alloc(16));
            const decoded = getListFromStatusListJWT(res.payload);
            expect(decoded.getBitsPerStatus()).to.equal(2);
            expect(Array.from({ length: 64 }, (_, i) => decoded.getStatus(i))).to.equal(new Array(64).fill(0));
        });

        it('keeps the signed token while it is valid and answers 304 to its ETag', async () => {
            const url = '/issuers/acme/status-management/status-list/shared';
            const first = await inject(undefined, 'GET', url);
            const second = await inject(undefined, 'GET', url);
            expect(second.payload).to.equal(first.payload);
            expect(second.headers.etag).to.equal(first.headers.etag);
            expect((await inject(undefined, 'GET', url, undefined, { 'if-none-match': first.headers.etag as string })).statusCode).to.equal(304);
        });

        it('serves the same token as a COSE_Sign1 CWT when Accept asks for application/statuslist+cwt', async () => {
            const url = '/issuers/acme/status-management/status-list/shared';
            const jwt = await verified((await inject(undefined, 'GET', url)).payload);
            const res = await inject(undefined, 'GET', url, undefined, CWT);
            expect(res.statusCode).to.equal(200);
            expect(res.headers['content-type']).to.equal('application/statuslist+cwt');
            expect(res.headers['cache-control']).to.equal('max-age=600');
            expect(res.headers.vary).to.contain('accept');
            const { header, leaf, claims } = verifiedCwt(res.rawPayload);
            expect(header.get(1)).to.equal(-7);
            expect(header.get(16)).to.equal('application/statuslist+cwt');
            const chain = ((await inject(admin, 'GET', '/api/key-chain/status')).result as any).certificateChain as string[];
            expect(leaf.raw.toString('base64')).to.equal(chain[0]!.replace(/-----[A-Z ]+-----|\s/g, ''));
            expect(claims.get(2)).to.equal(`${BASE}/acme/status-management/status-list/shared`);
            // Signed with the JWT at one publish: the same iat, exp and ttl.
            expect(claims.get(6)).to.equal(jwt.payload.iat);
            expect(claims.get(4)).to.equal(jwt.payload.exp);
            expect(claims.get(65534)).to.equal(600);
            const { bits, entries } = cwtEntries(claims);
            expect(bits).to.equal(2);
            expect(entries).to.equal(Buffer.alloc(16));
        });

        it('negotiates the form by Accept (q-values, wildcards), keeps an ETag per form and answers 304 to each', async () => {
            const url = '/issuers/acme/status-management/status-list/shared';
            const typeFor = async (accept?: string) => (await inject(undefined, 'GET', url, undefined, accept === undefined ? {} : { accept })).headers['content-type'];
            expect(await typeFor()).to.contain('application/statuslist+jwt');
            expect(await typeFor('*/*')).to.contain('application/statuslist+jwt');
            expect(await typeFor('application/json')).to.contain('application/statuslist+jwt');
            expect(await typeFor('application/statuslist+cwt')).to.equal('application/statuslist+cwt');
            expect(await typeFor('application/statuslist+jwt;q=0.5, application/statuslist+cwt')).to.equal('application/statuslist+cwt');
            expect(await typeFor('application/statuslist+cwt;q=0.2, application/statuslist+jwt')).to.contain('application/statuslist+jwt');
            expect(await typeFor('application/statuslist+cwt;q=0, */*')).to.contain('application/statuslist+jwt');
            expect(await typeFor('application/*;q=0.1, application/statuslist+cwt;q=0.9')).to.equal('application/statuslist+cwt');
            // A malformed q-value counts as absent (q=1).
            expect(await typeFor('application/statuslist+jwt;q=0.9, application/statuslist+cwt;q=high')).to.equal('application/statuslist+cwt');

            const jwt = await inject(undefined, 'GET', url);
            const cwt = await inject(undefined, 'GET', url, undefined, CWT);
            expect(cwt.headers.etag).to.not.equal(jwt.headers.etag);
            expect((await inject(undefined, 'GET', url, undefined, { ...CWT, 'if-none-match': cwt.headers.etag as string })).statusCode).to.equal(304);
            // The JWT's ETag does not match the CWT representation, and the reverse.
            expect((await inject(undefined, 'GET', url, undefined, { ...CWT, 'if-none-match': jwt.headers.etag as string })).statusCode).to.equal(200);
            expect((await inject(undefined, 'GET', url, undefined, { 'if-none-match': cwt.headers.etag as string })).statusCode).to.equal(200);
            expect((await inject(undefined, 'GET', url, undefined, { 'if-none-match': jwt.headers.etag as string })).statusCode).to.equal(304);
        });

        it('reads the tenant\'s status list defaults (the service defaults when never set) for issuance:config and tenant:read', async () => {
            expect((await inject(reader, 'GET', '/api/status-list-config')).result).to.equal({ bits: 2, capacity: 64, ttlSeconds: 600, immediateUpdate: false });
            expect((await inject(other, 'GET', '/api/status-list-config')).result).to.equal({ bits: 1, capacity: 100_000, ttlSeconds: 3600, immediateUpdate: false });
            expect((await inject(offer, 'GET', '/api/status-list-config')).statusCode).to.equal(403);
            expect((await inject(undefined, 'GET', '/api/status-list-config')).statusCode).to.equal(401);
            // The root client manages the service and belongs to no tenant.
            expect((await inject(await rootToken(t.server), 'GET', '/api/status-list-config')).statusCode).to.equal(403);
        });

        it('sets the defaults through the Tenant document (audited), for the caller\'s tenant only; new lists follow them', async () => {
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'umbrella');
            const config = (await clientWithToken(t.server, root, { clientId: 'umbrella-config', roles: ['issuance:config'], tenantId: 'umbrella' })).token;
            const umbrellaReader = (await clientWithToken(t.server, root, { clientId: 'umbrella-reader', roles: ['tenant:read'], tenantId: 'umbrella' })).token;
            const chosen = { bits: 4, capacity: 1000, ttlSeconds: 120, immediateUpdate: true };
            const res = await inject(config, 'PUT', '/api/status-list-config', chosen);
            expect(res.statusCode, res.payload).to.equal(200);
            expect(res.result).to.equal(chosen);
            expect((await inject(umbrellaReader, 'GET', '/api/status-list-config')).result).to.equal(chosen);
            expect(((await inject(root, 'GET', '/api/tenants/umbrella')).result as any).statusListConfig).to.equal(chosen);
            const audit = await t.server.db.knex('audit_logs').where({ tenantId: 'umbrella', kind: 'Tenant', resourceId: 'umbrella', action: 'update' });
            expect(audit.length).to.equal(1);
            expect(audit[0].changes).to.contain('statusListConfig');
            // Other tenants keep theirs.
            expect((await inject(reader, 'GET', '/api/status-list-config')).result).to.include({ bits: 2, capacity: 64 });
            expect((await inject(other, 'GET', '/api/status-list-config')).result).to.include({ bits: 1 });
            // tenant:admin writes too; tenant:read does not.
            expect((await inject(umbrellaReader, 'PUT', '/api/status-list-config', chosen)).statusCode).to.equal(403);
            expect((await inject(other, 'PUT', '/api/status-list-config', { ...chosen, bits: 8 })).statusCode).to.equal(200);
            expect((await inject(other, 'GET', '/api/status-list-config')).result).to.include({ bits: 8 });
            expect((await inject(config, 'GET', '/api/status-list-config')).result).to.include({ bits: 4 });
            await inject(other, 'PUT', '/api/status-list-config', { bits: 1, capacity: 100_000, ttlSeconds: 3600, immediateUpdate: false });
            // A list made now takes the new layout.
            await inject(config, 'POST', '/api/key-chain', { id: 'k', usageType: 'attestation' });
            expect((await inject(config, 'POST', '/api/status-lists', { id: 'u1' })).result).to.include({ bits: 4, capacity: 1000 });
        });

        it('refuses status list defaults with unknown fields, wrong types, missing fields or values out of range', async () => {
            const valid = { bits: 2, capacity: 64, ttlSeconds: 600, immediateUpdate: false };
            const bad: unknown[] = [
                { ...valid, extra: 1 },
                { ...valid, bits: 3 },
                { ...valid, bits: 'two' },
                { ...valid, capacity: 15 },
                { ...valid, capacity: 10_000_001 },
                { ...valid, capacity: 100.5 },
                { ...valid, ttlSeconds: 0 },
                { ...valid, ttlSeconds: -5 },
                { ...valid, ttlSeconds: 'soon' },
                { ...valid, immediateUpdate: 'sometimes' },
                { ...valid, immediateUpdate: null },
                { bits: 2, capacity: 64, ttlSeconds: 600 },
                {},
                [valid],
                'bits=2'
            ];
            for (const payload of bad) {
                const res = await inject(admin, 'PUT', '/api/status-list-config', payload as object);
                expect(res.statusCode, JSON.stringify(payload)).to.equal(400);
            }
            const res = await inject(admin, 'PUT', '/api/status-list-config', { ...valid, extra: 1 });
            expect((res.result as any).details).to.exist();
            // Nothing was stored.
            expect((await inject(reader, 'GET', '/api/status-list-config')).result).to.equal(valid);
        });

        it('signs with the tenant default chain (1-bit lists of another tenant) and answers 404 for an unknown list or tenant', async () => {
            const res = await inject(undefined, 'GET', '/issuers/globex/status-management/status-list/g1');
            expect(res.headers['cache-control']).to.equal('max-age=3600');
            const list = getListFromStatusListJWT(res.payload);
            expect(list.getBitsPerStatus()).to.equal(1);
            expect(list.getStatus(99_999)).to.equal(0);
            await verified(res.payload);
            expect((await inject(undefined, 'GET', '/issuers/acme/status-management/status-list/g1')).statusCode).to.equal(404);
            expect((await inject(undefined, 'GET', '/issuers/acme/status-management/status-list/none')).statusCode).to.equal(404);
            expect((await inject(undefined, 'GET', '/issuers/nobody/status-management/status-list/shared')).statusCode).to.equal(404);
        });

        it('creates a list in a tenant without key chains, whose token is unavailable until it has one', async () => {
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'initech');
            const initech = (await clientWithToken(t.server, root, { clientId: 'initech-admin', roles: ['issuance:config'], tenantId: 'initech' })).token;
            const created = await inject(initech, 'POST', '/api/status-lists', { id: 'l' });
            expect(created.statusCode).to.equal(201);
            expect((created.result as any).keyChainId).to.not.exist();
            expect((await inject(undefined, 'GET', '/issuers/initech/status-management/status-list/l')).statusCode).to.equal(503);
        });

        it('deletes a list with no allocated entry; the token goes with it', async () => {
            expect((await inject(admin, 'DELETE', '/api/status-lists/shared')).statusCode).to.equal(204);
            expect((await inject(admin, 'GET', '/api/status-lists/shared')).statusCode).to.equal(404);
            expect((await inject(undefined, 'GET', '/issuers/acme/status-management/status-list/shared')).statusCode).to.equal(404);
        });
    });
}
