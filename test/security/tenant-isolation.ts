import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import type Hapi from '@hapi/hapi';
import * as Lab from '@hapi/lab';
import { bearer, clientWithToken, createClient, createTenant, rootToken, tenantSnapshot, type CreatedClient } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { startTestServer, type TestServer } from '../helpers/server';
import { BundleOperationModel } from '../../plugins/bundles/models';
import { newTransactionId, transactionHash } from '../../plugins/oid4vci/services/deferred';
import { trustListKind } from '../../resources/trust-list';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

/**
 * Tenant B's most powerful client (tenant:admin) calls every management route that names a resource in its path,
 * with tenant A's resource ids. Each must answer 404 (never reveal or touch another tenant's resource), and A's rows
 * must be exactly as before. The route list comes from the live route table: a new route with a path parameter
 * fails this test until it is added to TARGETS (and, when it takes a body, to BODIES).
 */

/** Routes that need no token (see route-protection.ts); they are not tenant-scoped. */
const PUBLIC = (route: Hapi.RequestRoute) => {
    const key = `${route.method.toUpperCase()} ${route.path}`;
    return ['POST /api/oauth2/token', 'GET /api/oauth2/jwks', 'GET /api/health', 'GET /api', 'GET /api/docs', 'GET /api/docs-json'].includes(key)
        || key.startsWith('GET /api/swaggerui/') || key.startsWith('GET /api/schemas/');
};

/** What a tenant owns that a path can name. Extend it when a route names a new kind of resource. */
interface Fixtures {
    tenantId: string;
    /** A client of the tenant that is not the caller. */
    clientId: string;
    keyChainId: string;
    signingKeyChainId: string;
    credentialConfigId: string;
    attributeProviderId: string;
    webhookEndpointId: string;
    trustListId: string;
    statusListId: string;
    presentationConfigId: string;
    sessionId: string;
    /** A bundle import whose process died: still running, holding no process. */
    runningImportId: string;
    /** A pending deferred issuance of a live session, for its credential configuration. */
    deferredTransactionId: string;
}

const makeFixtures = async (server: Hapi.Server, adminToken: string, tenantId: string, suffix: string): Promise<Fixtures> => {
    const { clientId } = await createClient(server, adminToken, { clientId: `${tenantId}-worker${suffix}`, roles: ['issuance:offer'], allowedIssuanceConfigs: ['pid'] });
    const keyChainId = `${tenantId}-signer${suffix}`;
    const create = async (url: string, payload: object) => {
        const res = await server.inject({ method: 'POST', url, headers: bearer(adminToken), payload });
        expect(res.statusCode, `${url}: ${res.payload}`).to.equal(201);
        return res.result as Record<string, any>;
    };
    const chain = await create('/api/key-chain', { id: keyChainId, usageType: 'attestation' });
    // The chain the key-chain routes act on; the one above is referenced by the credential configuration.
    const spareKeyChainId = `${tenantId}-spare${suffix}`;
    await create('/api/key-chain', { id: spareKeyChainId, usageType: 'access' });
    const ids = {
        credentialConfigId: `${tenantId}-pid${suffix}`,
        attributeProviderId: `${tenantId}-ap${suffix}`,
        webhookEndpointId: `${tenantId}-wh${suffix}`,
        trustListId: `${tenantId}-tl${suffix}`,
        statusListId: `${tenantId}-sl${suffix}`,
        presentationConfigId: `${tenantId}-pc${suffix}`
    };
    await create('/api/issuer/credentials', { id: ids.credentialConfigId, config: { format: 'dc+sd-jwt', display: [{ locale: 'en', name: 'PID' }] }, vct: 'urn:eudi:pid:1', keyChainId, fields: [{ path: ['given_name'], type: 'string' }] });
    await create('/api/issuer/attribute-providers', { id: ids.attributeProviderId, url: 'https://attributes.example.com/claims', auth: { type: 'none' } });
    await create('/api/issuer/webhook-endpoints', { id: ids.webhookEndpointId, name: 'Backend', url: 'https://hooks.example.com/in', auth: { type: 'apiKey', config: { headerName: 'X-Key', value: 'secret-value' } } });
    await create('/api/trust-lists', { id: ids.trustListId, entities: [{ serviceType: 'pid-issuance', certificates: [chain.rootCertificate] }] });
    await create('/api/status-lists', { id: ids.statusListId, capacity: 16 });
    // An imported registration certificate and a registrar configuration, so the reissue route has something to do.
    const registrationJwt = ['{"alg":"ES256","typ":"rc-wrp+jwt"}', `{"sub":"${tenantId}"}`, 'sig'].map((part) => Buffer.from(part).toString('base64url')).join('.');
    await create('/api/verifier/config', { id: ids.presentationConfigId, dcql_query: { credentials: [{ id: 'pid', format: 'dc+sd-jwt', meta: { vct_values: ['urn:eudi:pid:1'] } }] }, registration_cert: { jwt: registrationJwt } });
    expect((await server.inject({ method: 'PUT', url: '/api/registrar/config', headers: bearer(adminToken), payload: { registrarUrl: 'https://registrar.example.com/api', auth: { type: 'none' } } })).statusCode).to.equal(200);
    // A finished session: its event stream answers one event and closes, so inject returns.
    const session = await server.sessions.create({ tenantId, type: 'issuance', status: 'completed' });
    // The bundle routes: a file-managed resource to detach, an interrupted import to acknowledge.
    const trustList = await server.registry.get({ tenantId, clientId: 'system:test', roles: [] }, trustListKind, ids.trustListId);
    await server.registry.write({ tenantId, clientId: 'system:test', roles: [] }, trustListKind, trustList!.spec, { ownership: 'file-managed' });
    const runningImportId = Crypto.randomUUID();
    await server.db.model(BundleOperationModel).query().insert({ id: runningImportId, tenantId, type: 'import', mode: 'upsert', status: 'running', actor: 'system:test', startedAt: new Date().toISOString(), finishedAt: null, summary: {} });
    // A credential request deferred by an attribute provider (what the credential endpoint stores), holder key and all.
    const live = await server.sessions.create({ tenantId, type: 'issuance', credentialConfigurationIds: [ids.credentialConfigId], data: { offer: {}, claims: {}, issued: [], events: [] } });
    const deferredTransactionId = newTransactionId();
    const holderJwk = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' });
    const now = new Date().toISOString();
    await server.db.knex('deferred_issuances').insert({
        id: transactionHash(deferredTransactionId), tenantId, sessionId: live.id, credentialConfigurationId: ids.credentialConfigId, state: 'pending', interval: 5,
        data: server.db.cipher.encrypt(JSON.stringify({ holderKeys: [holderJwk] })), createdAt: now, updatedAt: now
    });
    return { tenantId, clientId, keyChainId: spareKeyChainId, signingKeyChainId: keyChainId, ...ids, sessionId: session.id, runningImportId, deferredTransactionId };
};

/** Path → the values of its parameters, taken from a tenant's fixtures. Every parameterised route must be here. */
const TARGETS: Record<string, (f: Fixtures) => Record<string, string>> = {
    '/api/clients/{clientId}': (f) => ({ clientId: f.clientId }),
    '/api/clients/{clientId}/rotate-secret': (f) => ({ clientId: f.clientId }),
    '/api/key-chain/{id}': (f) => ({ id: f.keyChainId }),
    '/api/key-chain/{id}/rotate': (f) => ({ id: f.keyChainId }),
    '/api/issuer/credentials/{id}': (f) => ({ id: f.credentialConfigId }),
    '/api/issuer/attribute-providers/{id}': (f) => ({ id: f.attributeProviderId }),
    '/api/issuer/webhook-endpoints/{id}': (f) => ({ id: f.webhookEndpointId }),
    '/api/trust-lists/{id}': (f) => ({ id: f.trustListId }),
    '/api/status-lists/{id}': (f) => ({ id: f.statusListId }),
    '/api/verifier/config/{id}': (f) => ({ id: f.presentationConfigId }),
    '/api/verifier/config/{id}/registration-cert/reissue': (f) => ({ id: f.presentationConfigId }),
    '/api/session/{id}': (f) => ({ id: f.sessionId }),
    '/api/session/{id}/events': (f) => ({ id: f.sessionId }),
    '/api/session/{id}/logs': (f) => ({ id: f.sessionId }),
    '/api/issuer/deferred/{transactionId}/complete': (f) => ({ transactionId: f.deferredTransactionId }),
    '/api/issuer/deferred/{transactionId}/fail': (f) => ({ transactionId: f.deferredTransactionId }),
    '/api/config-bundles/operations/{id}': (f) => ({ id: f.runningImportId }),
    '/api/config-bundles/operations/{id}/acknowledge-interruption': (f) => ({ id: f.runningImportId }),
    '/api/config-bundles/resources/{kind}/{id}/detach': (f) => ({ kind: 'TrustList', id: f.trustListId })
};

/** "METHOD path" → the query a route needs beyond its path (a confirmation flag). */
const QUERIES: Record<string, string> = {
    'POST /api/config-bundles/operations/{id}/acknowledge-interruption': 'confirmWorkerStopped=true'
};

const withQuery = (url: string, ...parts: string[]) => {
    const query = parts.filter(Boolean).join('&');
    return query ? `${url}?${query}` : url;
};

/** "METHOD path" → a valid body (null: the route takes none). Every POST, PUT and PATCH route of TARGETS must be here. */
const BODIES: Record<string, unknown> = {
    'PATCH /api/clients/{clientId}': { roles: ['tenant:read'], description: 'taken over', allowedIssuanceConfigs: [] },
    'POST /api/clients/{clientId}/rotate-secret': null,
    'PUT /api/key-chain/{id}': { usageType: 'access', certValidityDays: 30 },
    'POST /api/key-chain/{id}/rotate': null,
    'PATCH /api/issuer/credentials/{id}': { description: 'taken over' },
    'PATCH /api/issuer/attribute-providers/{id}': { description: 'taken over' },
    'PATCH /api/issuer/webhook-endpoints/{id}': { name: 'taken over' },
    'PATCH /api/trust-lists/{id}': { description: 'taken over' },
    'PATCH /api/verifier/config/{id}': { description: 'taken over' },
    'POST /api/config-bundles/operations/{id}/acknowledge-interruption': null,
    'POST /api/config-bundles/resources/{kind}/{id}/detach': null,
    'POST /api/issuer/deferred/{transactionId}/complete': { claims: { given_name: 'taken over' } },
    'POST /api/issuer/deferred/{transactionId}/fail': { error: 'taken over' },
    'POST /api/verifier/config/{id}/registration-cert/reissue': null
};

const scopesOf = (route: Hapi.RequestRoute): string[] => {
    const auth = (route.settings as { auth?: false | { access?: Array<{ scope?: false | { selection?: string[]; required?: string[] } }> } }).auth;
    return auth ? (auth.access ?? []).flatMap((a) => (a.scope ? [...a.scope.selection ?? [], ...a.scope.required ?? []] : [])) : [];
};

const paramsOf = (path: string): string[] => [...path.matchAll(/\{(\w+)[*?\d]*\}/g)].map((m) => m[1]!);

const fill = (path: string, values: Record<string, string>) =>
    path.replace(/\{(\w+)[*?\d]*\}/g, (_m, name: string) => encodeURIComponent(values[name]!));

for (const dialect of DIALECTS) {
    describe(`tenant isolation (${dialect})`, () => {
        let t: TestServer;
        let routes: Hapi.RequestRoute[];
        let adminA: CreatedClient & { token: string };
        let adminB: CreatedClient & { token: string };
        let fixturesA: Fixtures;

        before(async () => {
            t = await startTestServer(dialect);
            const root = await rootToken(t.server);
            for (const id of ['iso-a', 'iso-b']) {
                await createTenant(t.server, root, id, { description: `tenant ${id}`, sessionConfig: { ttlSeconds: 600, cleanupMode: 'full' } });
            }
            adminA = await clientWithToken(t.server, root, { clientId: 'iso-a-admin', roles: ['tenant:admin'], tenantId: 'iso-a' });
            adminB = await clientWithToken(t.server, root, { clientId: 'iso-b-admin', roles: ['tenant:admin'], tenantId: 'iso-b' });
            fixturesA = await makeFixtures(t.server, adminA.token, 'iso-a', '');
            await makeFixtures(t.server, adminB.token, 'iso-b', '');
            expect((await t.server.inject({ method: 'PUT', url: '/api/session-config', headers: bearer(adminA.token), payload: { ttlSeconds: 7200, cleanupMode: 'anonymize' } })).statusCode).to.equal(200);

            routes = t.server.table()
                .filter((r) => r.path.startsWith('/api/') && paramsOf(r.path).length > 0 && !PUBLIC(r))
                .filter((r) => scopesOf(r).some((s) => s !== 'tenant:manage'));
        });
        after(() => t.stop());

        it('knows how to target every tenant-scoped route with a path parameter', () => {
            expect(routes.length).to.be.at.least(4);
            const missing = routes.filter((r) => !TARGETS[r.path] || paramsOf(r.path).some((p) => TARGETS[r.path]!(fixturesA)[p] === undefined))
                .map((r) => `${r.method.toUpperCase()} ${r.path}`);
            expect(missing, `add these routes to TARGETS in test/security/tenant-isolation.ts:\n${missing.join('\n')}`).to.equal([]);
            const noBody = routes.filter((r) => ['post', 'put', 'patch'].includes(r.method) && !(`${r.method.toUpperCase()} ${r.path}` in BODIES))
                .map((r) => `${r.method.toUpperCase()} ${r.path}`);
            expect(noBody, `add a valid body for these routes to BODIES in test/security/tenant-isolation.ts:\n${noBody.join('\n')}`).to.equal([]);
        });

        it('answers 404 to tenant B on every route naming tenant A\'s resources, and changes nothing of A', async () => {
            const snapshotBefore = await tenantSnapshot(t.server, 'iso-a');
            expect(snapshotBefore.clients!.length).to.equal(2);
            expect(snapshotBefore.audit_logs!.length).to.be.at.least(4);

            const offending: string[] = [];
            for (const route of routes) {
                const target = TARGETS[route.path];
                if (!target) {
                    continue; // reported by the test above
                }
                const key = `${route.method.toUpperCase()} ${route.path}`;
                const payload = BODIES[key] ?? undefined;
                const url = fill(route.path, target(fixturesA));
                for (const query of ['', `tenantId=${fixturesA.tenantId}`]) {
                    const res = await t.server.inject({ method: route.method, url: withQuery(url, QUERIES[key] ?? '', query), headers: bearer(adminB.token), ...(payload ? { payload: payload as object } : {}) });
                    // With ?tenantId a route that does not take it may refuse the query (400); never anything else.
                    const allowed = query ? [400, 404] : [404];
                    if (!allowed.includes(res.statusCode)) {
                        offending.push(`${key}${query}: ${res.statusCode} ${res.payload.slice(0, 200)}`);
                    }
                }
            }
            expect(offending, `tenant B reached tenant A's resources:\n${offending.join('\n')}`).to.equal([]);
            expect(await tenantSnapshot(t.server, 'iso-a')).to.equal(snapshotBefore);
        });

        it('lets each tenant use those routes on its own resources with the same bodies (the 404s are not validation errors)', async () => {
            const offending: string[] = [];
            let n = 0;
            for (const route of routes) {
                const target = TARGETS[route.path];
                if (!target) {
                    continue;
                }
                const key = `${route.method.toUpperCase()} ${route.path}`;
                const own = await makeFixtures(t.server, adminB.token, 'iso-b', `-${++n}`);
                const payload = BODIES[key] ?? undefined;
                const res = await t.server.inject({ method: route.method, url: withQuery(fill(route.path, target(own)), QUERIES[key] ?? ''), headers: bearer(adminB.token), ...(payload ? { payload: payload as object } : {}) });
                if (res.statusCode < 200 || res.statusCode > 204) {
                    offending.push(`${key}: ${res.statusCode} ${res.payload.slice(0, 200)}`);
                }
            }
            expect(offending, offending.join('\n')).to.equal([]);
        });
    });
}
