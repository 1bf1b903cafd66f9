import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as probe from '../fixtures/probe-plugin';
import { DIALECTS } from '../helpers/databases';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';
import { tenantKind } from '../../resources/tenant';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

for (const dialect of DIALECTS) {
    describe(`core plugin (${dialect})`, () => {
        let t: TestServer;
        before(async () => {
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-core', 'hallmark-docs') });
        });
        after(() => t.stop());

        it('serves GET / without version information and the version header on every response', async () => {
            const res = await t.server.inject('/');
            expect(res.statusCode).to.equal(200);
            expect(res.headers['x-hallmark-version']).to.equal(t.config.version);
            expect(res.payload).to.not.contain(t.config.version);
            const missing = await t.server.inject('/nowhere');
            expect(missing.headers['x-hallmark-version']).to.equal(t.config.version);
        });

        it('reports the database up on /health and /api/health', async () => {
            for (const url of ['/health', '/api/health']) {
                const res = await t.server.inject(url);
                expect(res.statusCode).to.equal(200);
                expect(res.result).to.equal({ status: 'ok', database: { status: 'up' } });
            }
        });

        it('offers the OAuth2 client-credentials flow in the API docs', async () => {
            const doc = JSON.parse((await t.server.inject('/api/docs-json')).payload);
            expect(doc.securityDefinitions.oauth2).to.include({ type: 'oauth2', flow: 'application', tokenUrl: '/api/oauth2/token' });
            expect(doc.security).to.equal([{ oauth2: [] }]);
        });

        it('answers an unknown route with a Boom-shaped 404', async () => {
            const res = await t.server.inject('/api/nothing-here');
            expect(res.statusCode).to.equal(404);
            expect(res.result).to.equal({ statusCode: 404, error: 'Not Found', message: 'Not Found' });
        });

        it('serves the API docs and an OpenAPI description of the /api routes', async () => {
            const ui = await t.server.inject('/api/docs');
            expect(ui.statusCode).to.equal(200);
            expect(ui.headers['content-type']).to.contain('text/html');
            const api = await t.server.inject('/api');
            expect(api.statusCode).to.equal(302);
            expect(api.headers.location).to.equal('/api/docs');
            const json = await t.server.inject('/api/docs-json');
            expect(json.statusCode).to.equal(200);
            const doc = JSON.parse(json.payload);
            expect(doc.info.title).to.equal('Hallmark management API');
            expect(Object.keys(doc.paths)).to.include('/api/health');
            expect(Object.keys(doc.paths).every((p: string) => p.startsWith('/api'))).to.be.true();
            const asset = await t.server.inject('/api/swaggerui/swagger-ui-bundle.js');
            expect(asset.statusCode).to.equal(200);
        });
    });
}

describe('health with the database down', () => {
    it('answers 503 with database down', async () => {
        const t = await startTestServer('sqlite', { manifest: manifestFor('hallmark-core') });
        try {
            await t.server.db.knex.destroy();
            for (const url of ['/health', '/api/health']) {
                const res = await t.server.inject(url);
                expect(res.statusCode).to.equal(503);
                expect(res.result).to.equal({ status: 'error', database: { status: 'down' } });
            }
        }
        finally {
            await t.database.drop();
        }
    });
});

describe('core error mapping', () => {
    let t: TestServer;
    before(async () => {
        t = await startTestServer('sqlite', { manifest: manifestFor('hallmark-core', { plugin: probe.plugin }) });
    });
    after(() => t.stop());

    it('rejects unknown fields on management routes with 400 naming the field', async () => {
        const res = await t.server.inject({ method: 'POST', url: '/api/probe', payload: { name: 'a', colour: 'red' } });
        expect(res.statusCode).to.equal(400);
        const body = res.result as any;
        expect(body.statusCode).to.equal(400);
        expect(body.error).to.equal('Bad Request');
        expect(body.message).to.contain('colour');
        expect(body.details).to.equal([{ path: 'colour', message: '"colour" is not allowed' }]);
    });

    it('rejects wrong types with 400 and details', async () => {
        const res = await t.server.inject({ method: 'POST', url: '/api/probe', payload: { name: 'a', count: 'many' } });
        expect(res.statusCode).to.equal(400);
        expect((res.result as any).details[0].path).to.equal('count');
    });

    it('answers malformed JSON with 400, a wrong content type with 415, an oversized body with 413', async () => {
        const malformed = await t.server.inject({ method: 'POST', url: '/api/probe', payload: '{"name": ', headers: { 'content-type': 'application/json' } });
        expect(malformed.statusCode).to.equal(400);
        expect((malformed.result as any).message).to.contain('Invalid request payload JSON format');
        const wrongType = await t.server.inject({ method: 'POST', url: '/api/probe', payload: 'name=a', headers: { 'content-type': 'application/x-unknown' } });
        expect(wrongType.statusCode).to.equal(415);
        const huge = await t.server.inject({ method: 'POST', url: '/api/probe', payload: JSON.stringify({ name: 'x'.repeat(2 * 1024 * 1024) }), headers: { 'content-type': 'application/json' } });
        expect(huge.statusCode).to.equal(413);
        expect((huge.result as any).statusCode).to.equal(413);
    });

    it('maps domain errors to their status', async () => {
        const res = await t.server.inject('/api/probe/conflict');
        expect(res.statusCode).to.equal(409);
        expect(res.result).to.equal({ statusCode: 409, error: 'Conflict', message: 'probe conflict' });
    });

    it('never leaks an internal error message or stack', async () => {
        const res = await t.server.inject('/api/probe/crash');
        expect(res.statusCode).to.equal(500);
        expect(res.payload).to.not.contain('secret internal detail');
        expect(res.payload).to.not.contain('at ');
        expect(res.result).to.equal({ statusCode: 500, error: 'Internal Server Error', message: 'An internal server error occurred' });
    });

    it('answers protocol routes with OAuth-style bodies and ignores unknown fields there', async () => {
        const ok = await t.server.inject({ method: 'POST', url: '/probe/protocol', payload: { grant: 'good', legacy_field: 1 } });
        expect(ok.statusCode).to.equal(200);
        const bad = await t.server.inject({ method: 'POST', url: '/probe/protocol', payload: { grant: 'bad' } });
        expect(bad.statusCode).to.equal(400);
        expect(bad.result).to.equal({ error: 'invalid_grant', error_description: 'the grant is not valid' });
        const missing = await t.server.inject({ method: 'POST', url: '/probe/protocol', payload: {} });
        expect(missing.statusCode).to.equal(400);
        expect((missing.result as any).error).to.equal('invalid_request');
        const malformed = await t.server.inject({ method: 'POST', url: '/probe/protocol', payload: '{', headers: { 'content-type': 'application/json' } });
        expect(malformed.statusCode).to.equal(400);
        expect((malformed.result as any).error).to.equal('invalid_request');
    });
});

for (const dialect of DIALECTS) {
    describe(`startup import of the demo configuration (${dialect})`, () => {
        it('creates the demo tenant through the registry at start, once', async () => {
            const folder = require('node:path').join(__dirname, '../../examples/config');
            const t = await startTestServer(dialect, { env: { CONFIG_FOLDER: folder } });
            try {
                const ctx = { clientId: 'test', roles: [] };
                const tenant = await t.server.registry.get(ctx, tenantKind, 'demo');
                expect(tenant!.spec.name).to.equal('Demo tenant');
                expect(tenant!.ownership).to.equal('file-managed');
                const audit = await t.server.db.knex('audit_logs').where({ tenant_id: 'demo', kind: 'Tenant' });
                expect(audit.length).to.equal(1);
                expect(audit[0].actor).to.equal('system:config-import');
            }
            finally {
                await t.stop();
            }
        });
    });
}
