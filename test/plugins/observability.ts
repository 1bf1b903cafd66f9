import { AsyncResource } from 'node:async_hooks';
import type Hapi from '@hapi/hapi';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { DataPointType, MetricReader } from '@opentelemetry/sdk-metrics';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import * as Jose from 'jose';
import type { Manifest } from '../../lib/compose';
import type { Config } from '../../manifests/environment';
import * as observability from '../../plugins/observability';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
/** Runs `fn` in the asynchronous context this module was loaded in, before any request. */
const outsideAnyRequest = AsyncResource.bind(<T>(fn: () => T): T => fn());

const { describe, it, before, after, beforeEach } = lab;

const ISSUER = 'http://hallmark.test/issuers/acme';
const PRE_AUTH = 'urn:ietf:params:oauth:grant-type:pre-authorized_code';

/** A metric reader that keeps nothing and collects on demand. */
class TestMetricReader extends MetricReader {
    protected override async onForceFlush(): Promise<void> {}
    protected override async onShutdown(): Promise<void> {}
}

/** A route whose query fails (a secret in its bindings), to see how a failed query is traced. */
const badQueryProbe: Hapi.Plugin<Record<string, never>> = {
    name: 'test-bad-query',
    register(server) {
        server.route({
            method: 'GET',
            path: '/test/active-span',
            options: { auth: false },
            handler: async () => {
                await new Promise((resolve) => setTimeout(resolve, 5));
                return { spanId: trace.getActiveSpan()?.spanContext().spanId ?? null };
            }
        });
        server.route({
            method: 'GET',
            path: '/test/bad-query',
            options: { auth: false },
            handler: async (request) => {
                const failed = await request.server.db.knex.raw('select * from no_such_table where secret = ?', ['s3cret-binding']).then(() => false, () => true);
                return { failed };
            }
        });
    }
};

/** The observability plugin, given a test exporter and reader as well, and the issuance it observes. */
const testManifest = (options: observability.ObservabilityOptions) => (config: Config): Manifest => {
    const base = manifestFor('hallmark-observability', 'hallmark-oid4vci', 'hallmark-kms-db', 'hallmark-tenancy')(config);
    const plugins = base.plugins.map((e) => (e.plugin === observability.plugin ? { plugin: observability.plugin, options: { ...e.options, ...options } } : e));
    return { ...base, name: 'observability-test', plugins: [...plugins, { plugin: badQueryProbe }] };
};

const pid = {
    id: 'pid',
    config: { format: 'dc+sd-jwt', display: [{ locale: 'en', name: 'PID' }], scope: 'pid' },
    vct: 'urn:eudi:pid:1',
    fields: [{ path: ['given_name'], type: 'string', mandatory: true, disclosable: true }],
    lifeTime: 3600
};

const sessionsMetric = async (reader: TestMetricReader) => {
    const { resourceMetrics } = await reader.collect();
    const metric = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).find((m) => m.descriptor.name === observability.SESSIONS_METRIC);
    return metric;
};

describe('observability (sqlite)', () => {
    const exporter = new InMemorySpanExporter();
    const reader = new TestMetricReader();
    let t: TestServer;
    let admin: string;

    const spans = async (): Promise<ReadableSpan[]> => {
        await t.server.plugins['hallmark-observability'].forceFlush();
        return exporter.getFinishedSpans();
    };
    const serverSpan = async (name: string): Promise<ReadableSpan> => {
        const found = (await spans()).filter((s) => s.kind === SpanKind.SERVER && s.name === name);
        expect(found, `no span ${name}`).to.have.length(1);
        return found[0]!;
    };
    const childrenOf = async (span: ReadableSpan): Promise<ReadableSpan[]> =>
        (await spans()).filter((s) => s.parentSpanContext?.spanId === span.spanContext().spanId);

    before(async () => {
        t = await startTestServer('sqlite', { manifest: testManifest({ traceExporter: exporter, simpleSpanProcessor: true, metricReaders: [reader] }) });
        const root = await rootToken(t.server);
        await createTenant(t.server, root, 'acme');
        admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
        expect((await t.server.inject({ method: 'POST', url: '/api/key-chain', headers: bearer(admin), payload: { id: 'issuer', usageType: 'attestation', subject: { commonName: 'Acme', country: 'DE' } } })).statusCode).to.equal(201);
        expect((await t.server.inject({ method: 'POST', url: '/api/issuer/credentials', headers: bearer(admin), payload: pid })).statusCode).to.equal(201);
    });
    after(() => t.stop());
    beforeEach(() => exporter.reset());

    it('makes a server span per HTTP request with method, path, route and status', async () => {
        expect((await t.server.inject('/health')).statusCode).to.equal(200);
        const span = await serverSpan('GET /health');
        expect(span.attributes).to.include({ 'http.request.method': 'GET', 'url.path': '/health', 'http.route': '/health', 'http.response.status_code': 200 });
        expect(span.attributes['url.query']).to.not.exist();
        expect(span.ended).to.be.true();

        const unknown = await t.server.inject('/no/such/route?x=1');
        expect(unknown.statusCode).to.equal(404);
        const notFound = (await spans()).find((s) => s.kind === SpanKind.SERVER && s.attributes['url.path'] === '/no/such/route')!;
        expect(notFound.name).to.equal('GET');
        expect(notFound.attributes).to.include({ 'http.response.status_code': 404, 'url.query': 'x=1' });
        expect(notFound.attributes['http.route']).to.not.exist();

        const session = await t.server.inject({ url: '/api/session/{x}', headers: bearer(admin) });
        expect(session.statusCode).to.equal(404);
        expect((await serverSpan('GET /api/session/{id}')).attributes).to.include({ 'http.route': '/api/session/{id}', 'http.response.status_code': 404 });
    });

    it('makes database spans, with the SQL text but no bindings, as children of the request span', async () => {
        const offer = await t.server.inject({ method: 'POST', url: '/api/issuer/offer', headers: bearer(admin), payload: { credentialConfigurationIds: ['pid'], credentialClaims: { pid: { type: 'inline', claims: { given_name: 'Erika' } } } } });
        expect(offer.statusCode, offer.payload).to.equal(201);
        const sessionId = (offer.result as { session: string }).session;
        exporter.reset();
        expect((await t.server.inject({ url: `/api/session/${sessionId}`, headers: bearer(admin) })).statusCode).to.equal(200);
        const request = await serverSpan('GET /api/session/{id}');
        const db = (await childrenOf(request)).filter((s) => s.kind === SpanKind.CLIENT);
        expect(db.length).to.be.at.least(1);
        for (const span of db) {
            expect(span.spanContext().traceId).to.equal(request.spanContext().traceId);
            expect(span.attributes['db.system']).to.equal('sqlite');
            expect(span.attributes['db.statement']).to.be.a.string();
            expect(span.attributes['db.statement']).to.not.contain(sessionId);
        }
        const select = db.find((s) => /from [`"]?sessions[`"]? /i.test(String(s.attributes['db.statement'])))!;
        expect(select.name).to.equal('SELECT');
        expect(select.attributes['db.statement']).to.match(/where [`"]?id[`"]? = \?/i);
        // Every span of this request belongs to its trace; nothing is left unparented.
        expect((await spans()).every((s) => s.spanContext().traceId === request.spanContext().traceId)).to.be.true();
    });

    it('marks a failed query on its span without recording the driver message or bindings', async () => {
        expect((await t.server.inject('/test/bad-query')).result).to.equal({ failed: true });
        const request = await serverSpan('GET /test/bad-query');
        const [failed] = (await childrenOf(request)).filter((s) => s.kind === SpanKind.CLIENT);
        expect(failed!.status.code).to.equal(SpanStatusCode.ERROR);
        expect(failed!.attributes['db.statement']).to.equal('select * from no_such_table where secret = ?');
        expect(failed!.attributes['error.type']).to.be.a.string();
        expect(JSON.stringify({ attributes: failed!.attributes, status: failed!.status, events: failed!.events })).to.not.contain('s3cret-binding');

        // Outside a request there is no parent: nothing is traced by default. (Under inject, a request's context can
        // reach the test's own continuation, which no served request shares: the query runs in the module's context.)
        exporter.reset();
        await outsideAnyRequest(() => expect(t.server.db.knex.raw('select * from no_such_table where secret = ?', ['s3cret'])).to.reject());
        expect((await spans()).filter((s) => s.kind === SpanKind.CLIENT)).to.have.length(0);
    });

    it('sets session.id on the wallet request spans and redacts codes in url.query', async () => {
        const holder = await Jose.generateKeyPair('ES256', { extractable: true });
        const offer = await t.server.inject({ method: 'POST', url: '/api/issuer/offer', headers: bearer(admin), payload: { credentialConfigurationIds: ['pid'], credentialClaims: { pid: { type: 'inline', claims: { given_name: 'Erika' } } } } });
        const { uri, session } = offer.result as { uri: string; session: string };
        const offerUrl = decodeURIComponent(new URL(uri.replace('openid-credential-offer://', 'https://x/')).searchParams.get('credential_offer_uri')!).replace('http://hallmark.test', '');
        const fetched = await t.server.inject(offerUrl);
        const code = (fetched.result as any).grants[PRE_AUTH]['pre-authorized_code'] as string;
        expect((await serverSpan('GET /issuers/{tenant}/vci/credential-offers/{id}')).attributes['session.id']).to.equal(session);

        // A wallet that (wrongly) sends the code in the query string: the trace never shows it.
        const token = await t.server.inject({
            method: 'POST',
            url: `/issuers/acme/authorize/token?pre-authorized_code=${code}&lang=en`,
            payload: `grant_type=${encodeURIComponent(PRE_AUTH)}&pre-authorized_code=${code}`,
            headers: { 'content-type': 'application/x-www-form-urlencoded' }
        });
        expect(token.statusCode, token.payload).to.equal(200);
        const tokenSpan = await serverSpan('POST /issuers/{tenant}/authorize/token');
        expect(tokenSpan.attributes).to.include({ 'url.query': 'pre-authorized_code=[redacted]&lang=en', 'session.id': session, 'http.response.status_code': 200 });
        const accessToken = (token.result as { access_token: string }).access_token;

        const nonce = ((await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/nonce' })).result as { c_nonce: string }).c_nonce;
        expect((await serverSpan('POST /issuers/{tenant}/vci/nonce')).attributes['session.id']).to.not.exist();
        const jwt = await new Jose.SignJWT({ nonce, aud: ISSUER }).setProtectedHeader({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: await Jose.exportJWK(holder.publicKey) }).setIssuedAt().sign(holder.privateKey);
        const credential = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/credential', headers: { authorization: `Bearer ${accessToken}` }, payload: { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt } } });
        expect(credential.statusCode, credential.payload).to.equal(200);
        const credentialSpan = await serverSpan('POST /issuers/{tenant}/vci/credential');
        expect(credentialSpan.attributes['session.id']).to.equal(session);
        expect((await childrenOf(credentialSpan)).some((s) => s.kind === SpanKind.CLIENT && /update [`"]?sessions[`"]? /i.test(String(s.attributes['db.statement'])))).to.be.true();

        // Search terms are redacted as a whole (q is a sensitive key of the service logger too), so a pasted code never shows.
        await t.server.inject({ url: `/api/session?q=${code}`, headers: bearer(admin) });
        await t.server.inject({ url: `/api/session?q=${encodeURIComponent(JSON.stringify(fetched.result))}&type=issuance`, headers: bearer(admin) });
        await t.server.inject({ url: `/api/session?q=${session}`, headers: bearer(admin) });
        const searches = (await spans()).filter((s) => s.kind === SpanKind.SERVER && s.attributes['url.path'] === '/api/session').map((s) => s.attributes['url.query']);
        expect(searches).to.equal(['q=[redacted]', 'q=[redacted]&type=issuance', 'q=[redacted]']);

        const everything = JSON.stringify(exporter.getFinishedSpans().map((s) => ({ name: s.name, attributes: s.attributes })));
        expect(everything).to.not.contain(code);
        expect(everything).to.not.contain(accessToken);
    });

    it('continues a trace from an incoming traceparent header and marks 5xx answers as errors', async () => {
        const traceId = '0af7651916cd43dd8448eb211c80319c';
        await t.server.inject({ url: '/health', headers: { traceparent: `00-${traceId}-b7ad6b7169203331-01` } });
        const span = await serverSpan('GET /health');
        expect(span.spanContext().traceId).to.equal(traceId);
        expect(span.parentSpanContext?.spanId).to.equal('b7ad6b7169203331');
        expect(span.status.code).to.not.equal(SpanStatusCode.ERROR);
    });

    it('counts sessions by tenant, type and status in hallmark.sessions', async () => {
        const before = await sessionsMetric(reader);
        const value = (metric: Awaited<ReturnType<typeof sessionsMetric>>, status: string): number =>
            Number(metric?.dataPoints.find((p) => p.attributes.tenant === 'acme' && p.attributes.type === 'issuance' && p.attributes.status === status)?.value ?? 0);
        const offer = await t.server.inject({ method: 'POST', url: '/api/issuer/offer', headers: bearer(admin), payload: { credentialConfigurationIds: ['pid'], credentialClaims: { pid: { type: 'inline', claims: { given_name: 'Erika' } } }, byReference: false } });
        expect(offer.statusCode).to.equal(201);
        await t.server.plugins['hallmark-observability'].forceFlush();
        const afterOffer = await sessionsMetric(reader);
        expect(afterOffer!.dataPointType).to.equal(DataPointType.SUM);
        expect((afterOffer as { isMonotonic?: boolean }).isMonotonic).to.be.false();
        expect(value(afterOffer, 'active') - value(before, 'active')).to.equal(1);

        // Move it to fetched and completed through the wallet endpoints.
        const { uri } = offer.result as { uri: string };
        const code = JSON.parse(new URL(uri.replace('openid-credential-offer://', 'https://x/')).searchParams.get('credential_offer')!).grants[PRE_AUTH]['pre-authorized_code'];
        const token = await t.server.inject({ method: 'POST', url: '/issuers/acme/authorize/token', payload: { grant_type: PRE_AUTH, 'pre-authorized_code': code } });
        const accessToken = (token.result as { access_token: string }).access_token;
        const holder = await Jose.generateKeyPair('ES256', { extractable: true });
        const nonce = ((await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/nonce' })).result as { c_nonce: string }).c_nonce;
        const jwt = await new Jose.SignJWT({ nonce, aud: ISSUER }).setProtectedHeader({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: await Jose.exportJWK(holder.publicKey) }).setIssuedAt().sign(holder.privateKey);
        const credential = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/credential', headers: { authorization: `Bearer ${accessToken}` }, payload: { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt } } });
        expect(credential.statusCode).to.equal(200);
        await t.server.plugins['hallmark-observability'].forceFlush();
        const afterCredential = await sessionsMetric(reader);
        expect(value(afterCredential, 'active') - value(before, 'active')).to.equal(0);
        expect(value(afterCredential, 'fetched') - value(before, 'fetched')).to.equal(1);

        const notified = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/notification', headers: { authorization: `Bearer ${accessToken}` }, payload: { notification_id: (credential.result as { notification_id: string }).notification_id, event: 'credential_accepted' } });
        expect(notified.statusCode).to.equal(204);
        await t.server.plugins['hallmark-observability'].forceFlush();
        const done = await sessionsMetric(reader);
        expect(value(done, 'active') - value(before, 'active')).to.equal(0);
        expect(value(done, 'fetched') - value(before, 'fetched')).to.equal(0);
        expect(value(done, 'completed') - value(before, 'completed')).to.equal(1);
    });
});

describe('observability registered with the global OpenTelemetry API', () => {
    it('makes the request span the active one for code that uses the API, and lets go when stopped', async () => {
        const exporter = new InMemorySpanExporter();
        const t = await startTestServer('sqlite', { manifest: testManifest({ traceExporter: exporter, simpleSpanProcessor: true, registerGlobal: true }) });
        try {
            const res = await t.server.inject('/test/active-span');
            await t.server.plugins['hallmark-observability'].forceFlush();
            const span = exporter.getFinishedSpans().find((s) => s.name === 'GET /test/active-span')!;
            expect((res.result as { spanId: string }).spanId).to.equal(span.spanContext().spanId);
        }
        finally {
            await t.stop();
        }
        expect(trace.getActiveSpan()).to.not.exist();
        expect(trace.getTracerProvider().getTracer('x').startSpan('after').isRecording()).to.be.false();
    });
});

describe('observability with OTEL_SDK_DISABLED', () => {
    it('registers nothing: no spans, no metrics', async () => {
        const exporter = new InMemorySpanExporter();
        const reader = new TestMetricReader();
        const t = await startTestServer('sqlite', { env: { OTEL_SDK_DISABLED: 'true' }, manifest: testManifest({ traceExporter: exporter, simpleSpanProcessor: true, metricReaders: [reader] }) });
        try {
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            expect((await t.server.inject('/health')).statusCode).to.equal(200);
            await t.server.plugins['hallmark-observability'].forceFlush();
            expect(t.server.plugins['hallmark-observability'].enabled).to.be.false();
            expect(exporter.getFinishedSpans()).to.have.length(0);
            await expect(reader.collect()).to.reject();
        }
        finally {
            await t.stop();
        }
    });
});

describe('redactUrlQuery', () => {
    it('redacts sensitive parameters, search terms, and parameters that cannot be decoded', () => {
        const { redactUrlQuery } = observability;
        expect(redactUrlQuery('')).to.equal('');
        expect(redactUrlQuery('?pre-authorized_code=abc&tx_code=123456&state=s')).to.equal('pre-authorized_code=[redacted]&tx_code=[redacted]&state=s');
        expect(redactUrlQuery('pre-authorized%5Fcode=abc')).to.equal('pre-authorized%5Fcode=[redacted]');
        expect(redactUrlQuery('q=openid-credential-offer%3A%2F%2F%3Fcredential_offer%3D%257B%2522grants%2522%253A%257B%2522pre-authorized_code%2522%7D')).to.equal('q=[redacted]');
        expect(redactUrlQuery('q=ref-42&sortBy=id')).to.equal('q=[redacted]&sortBy=id');
        expect(redactUrlQuery('%E0%A4%A=1&ok')).to.equal('%E0%A4%A=[redacted]&ok');
    });
});
