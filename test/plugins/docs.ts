import { expect } from '@hapi/code';
import type Hapi from '@hapi/hapi';
import * as Lab from '@hapi/lab';
import { DIALECTS } from '../helpers/databases';
import { ROOT_CLIENT, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

interface Operation {
    tags?: string[];
    security?: object[];
}

/** The API description as Swagger UI reads it: every operation by "METHOD path". */
const operations = (doc: { paths: Record<string, Record<string, Operation>> }) => new Map<string, Operation>(Object.entries(doc.paths)
    .flatMap(([path, methods]) => Object.entries(methods).map(([method, op]) => [`${method.toUpperCase()} ${path}`, op] as const)));

const takesNoToken = (route: Hapi.RequestRoute) => (route.settings as { auth?: unknown }).auth === false;

for (const dialect of DIALECTS) {
    describe(`API docs (${dialect})`, () => {
        let t: TestServer;
        let doc: { paths: Record<string, Record<string, Operation>>; tags?: Array<{ name: string; description?: string }>; securityDefinitions: Record<string, { tokenUrl?: string }>; security: object[] };
        before(async () => {
            t = await startTestServer(dialect);
            doc = JSON.parse((await t.server.inject('/api/docs-json')).payload);
        });
        after(() => t.stop());

        it('marks routes that need no token with an empty security list, and only those', () => {
            const ops = operations(doc);
            const routes = t.server.table().filter((r) => ops.has(`${r.method.toUpperCase()} ${r.path}`));
            const open = routes.filter(takesNoToken).map((r) => `${r.method.toUpperCase()} ${r.path}`);
            expect(open).to.include(['GET /api/health', 'POST /api/oauth2/token', 'GET /api/oauth2/jwks', 'GET /api/schemas/v{version}/{file}.schema.json']);
            for (const key of open) {
                expect(ops.get(key)!.security, key).to.equal([]);
            }
            const protectedOps = routes.filter((r) => !takesNoToken(r)).map((r) => `${r.method.toUpperCase()} ${r.path}`);
            expect(protectedOps.length).to.be.at.least(10);
            for (const key of protectedOps) {
                expect(ops.get(key)!.security, key).to.not.equal([]);
            }
            expect(doc.security).to.equal([{ oauth2: [] }]);
        });

        it('describes every tag in one line', () => {
            const used = new Set([...operations(doc).values()].flatMap((op) => op.tags ?? []));
            expect(used.size).to.be.at.least(5);
            const described = new Map((doc.tags ?? []).map((tag) => [tag.name, tag.description]));
            for (const tag of used) {
                expect(described.get(tag), tag).to.be.a.string();
                expect(described.get(tag)!.length, tag).to.be.at.least(10);
                expect(described.get(tag), tag).to.not.contain('\n');
            }
        });

        it('gives Swagger UI a relative token URL, so Authorize works from any host name of the service', () => {
            expect(doc.securityDefinitions.oauth2).to.include({ type: 'oauth2', flow: 'application', tokenUrl: '/api/oauth2/token' });
        });

        it('answers a CORS preflight of the token endpoint, and the token POST from another origin', async () => {
            const preflight = await t.server.inject({
                method: 'OPTIONS',
                url: '/api/oauth2/token',
                headers: { origin: 'https://docs.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type, x-requested-with' }
            });
            expect(preflight.statusCode).to.be.within(200, 204);
            expect(preflight.headers['access-control-allow-origin']).to.equal('https://docs.example');
            expect(preflight.headers['access-control-allow-methods']).to.contain('POST');
            expect(String(preflight.headers['access-control-allow-headers']).toLowerCase()).to.contain('authorization');
            expect(String(preflight.headers['access-control-allow-headers']).toLowerCase()).to.contain('content-type');
            expect(String(preflight.headers['access-control-allow-headers']).toLowerCase()).to.contain('x-requested-with');

            const basic = Buffer.from(`${ROOT_CLIENT.id}:${ROOT_CLIENT.secret}`).toString('base64');
            const token = await t.server.inject({
                method: 'POST',
                url: '/api/oauth2/token',
                headers: { origin: 'https://docs.example', authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded', 'x-requested-with': 'XMLHttpRequest' },
                payload: 'grant_type=client_credentials'
            });
            expect(token.statusCode).to.equal(200);
            expect(token.headers['access-control-allow-origin']).to.equal('https://docs.example');
        });
    });
}
