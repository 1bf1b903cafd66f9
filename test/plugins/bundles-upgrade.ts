import Fs from 'node:fs';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { bearer, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const schemaOf = (file: string, version: number) => `https://schemas.hallmark.dev/config/v${version}/${file}.schema.json`;
const demo = (path: string) => JSON.parse(Fs.readFileSync(Path.join(__dirname, '../../examples/config/demo', path), 'utf8')) as { $schema: string; spec: Record<string, any> };

const identify = demo('presentation/identify.json').spec;
const v1Body = { privacy_policy: 'https://shop.example.com/privacy', purpose: [{ lang: 'en', content: 'Age verification' }], provided_attestations: [{ format: 'dc+sd-jwt', meta: { vct_values: ['urn:eudi:pid:1'] } }] };

for (const dialect of DIALECTS) {
    describe(`POST /api/config-bundles/documents/upgrade (${dialect})`, () => {
        let t: TestServer;
        let token: string;

        before(async () => {
            t = await startTestServer(dialect);
            token = await rootToken(t.server);
        });

        after(() => t?.stop());

        const upgrade = (payload: unknown, auth = true) =>
            t.server.inject({ method: 'POST', url: '/api/config-bundles/documents/upgrade', headers: auth ? bearer(token) : {}, payload: payload as object });

        it('upgrades a PresentationConfig v1 document to v3, dropping provided_attestations with PROVIDED_ATTESTATIONS_REMOVED', async () => {
            const spec = { ...identify, registration_cert: { id: 'reg-1', body: v1Body } };
            const res = await upgrade({ $schema: schemaOf('PresentationConfigFile', 1), metadata: { generation: 4, ownership: 'file-managed' }, spec });
            expect(res.statusCode).to.equal(200);
            const body = res.result as any;
            expect(body.document.$schema).to.equal(schemaOf('PresentationConfigFile', 3));
            expect(body.document.metadata).to.equal({ generation: 4, ownership: 'file-managed' });
            expect(body.document.spec.registration_cert).to.equal({ id: 'reg-1', body: { privacy_policy: v1Body.privacy_policy, purpose: v1Body.purpose } });
            expect(body.document.spec.dcql_query).to.equal(identify.dcql_query);
            expect(body.warnings).to.have.length(1);
            expect(body.warnings[0].code).to.equal('PROVIDED_ATTESTATIONS_REMOVED');
        });

        it('answers a current document unchanged, without warnings, and without defaults filled in', async () => {
            const res = await upgrade({ $schema: schemaOf('PresentationConfigFile', 3), spec: identify });
            expect(res.statusCode).to.equal(200);
            expect(res.result).to.equal({ document: { $schema: schemaOf('PresentationConfigFile', 3), spec: identify }, warnings: [] });
        });

        it('upgrades an IssuanceConfig v1 document to v2 unchanged', async () => {
            const spec = { display: [{ locale: 'en', name: 'Old issuer' }], batchSize: 2 };
            const res = await upgrade({ $schema: schemaOf('IssuanceConfigFile', 1), spec });
            expect(res.statusCode).to.equal(200);
            expect(res.result).to.equal({ document: { $schema: schemaOf('IssuanceConfigFile', 2), spec }, warnings: [] });
        });

        it('stops a PresentationConfig v2 document with an empty values array with BUNDLE_INVALID naming the claim', async () => {
            const spec = structuredClone(identify);
            spec.dcql_query.credentials[0].claims[0].values = [];
            const res = await upgrade({ $schema: schemaOf('PresentationConfigFile', 2), spec });
            expect(res.statusCode).to.equal(400);
            const body = res.result as any;
            expect(body.code).to.equal('BUNDLE_INVALID');
            expect(body.details).to.equal([{ path: 'dcql_query.credentials.0.claims.0.values', message: 'is empty: version 3 requires at least one value (omit values to accept any value)' }]);
        });

        it('refuses an unknown $schema and a newer version with BUNDLE_INVALID', async () => {
            const unknown = await upgrade({ $schema: schemaOf('NoSuchFile', 1), spec: {} });
            expect(unknown.statusCode).to.equal(400);
            expect((unknown.result as any).code).to.equal('BUNDLE_INVALID');
            expect((unknown.result as any).details).to.equal([{ path: '$schema', message: 'is not a schema this service knows' }]);
            const newer = await upgrade({ $schema: schemaOf('PresentationConfigFile', 4), spec: identify });
            expect(newer.statusCode).to.equal(400);
            expect((newer.result as any).code).to.equal('BUNDLE_INVALID');
            expect((newer.result as any).message).to.contain('newer than this service supports (3)');
            const notUrl = await upgrade({ $schema: 'PresentationConfigFile', spec: identify });
            expect((notUrl.result as any).code).to.equal('BUNDLE_INVALID');
        });

        it('keeps ${VAR} placeholders, which only an import resolves, and still reports every other problem', async () => {
            const hook = { id: 'hook', name: 'Backend', url: '${HOOK_URL}', auth: { type: 'apiKey', config: { headerName: 'X-Key', value: '${HOOK_SECRET}' } } };
            const res = await upgrade({ $schema: schemaOf('WebhookEndpointConfigFile', 1), spec: hook });
            expect(res.statusCode).to.equal(200);
            expect(res.result).to.equal({ document: { $schema: schemaOf('WebhookEndpointConfigFile', 1), spec: hook }, warnings: [] });
            const broken = await upgrade({ $schema: schemaOf('WebhookEndpointConfigFile', 1), spec: { ...hook, name: 42 } });
            expect(broken.statusCode).to.equal(400);
            expect((broken.result as any).details.map((d: { path: string }) => d.path)).to.equal(['name']);
            const literal = await upgrade({ $schema: schemaOf('WebhookEndpointConfigFile', 1), spec: { ...hook, url: 'not a url' } });
            expect((literal.result as any).details.map((d: { path: string }) => d.path)).to.equal(['url']);
        });

        it('refuses an upgraded spec that does not validate, with every problem', async () => {
            const res = await upgrade({ $schema: schemaOf('PresentationConfigFile', 1), spec: { ...identify, lifeTime: 0, colour: 'red' } });
            expect(res.statusCode).to.equal(400);
            expect((res.result as any).code).to.equal('BUNDLE_INVALID');
            expect((res.result as any).details.map((d: { path: string }) => d.path).sort()).to.equal(['colour', 'lifeTime']);
        });

        it('refuses unknown document fields, wrong types and a missing spec before anything runs', async () => {
            for (const payload of [
                { $schema: schemaOf('PresentationConfigFile', 3), spec: identify, extra: true },
                { $schema: 42, spec: identify },
                { $schema: schemaOf('PresentationConfigFile', 3) },
                { $schema: schemaOf('PresentationConfigFile', 3), spec: [identify] },
                { $schema: schemaOf('PresentationConfigFile', 3), metadata: { generation: 0 }, spec: identify },
                { $schema: `${schemaOf('PresentationConfigFile', 3)}${'x'.repeat(600)}`, spec: identify }
            ]) {
                const res = await upgrade(payload);
                expect(res.statusCode, JSON.stringify(payload).slice(0, 80)).to.equal(400);
            }
            const large = await upgrade({ $schema: schemaOf('PresentationConfigFile', 3), spec: { ...identify, description: 'x'.repeat(2 * 1024 * 1024) } });
            expect(large.statusCode).to.equal(413);
        });

        it('needs a token and stores nothing', async () => {
            const rows = async () => {
                const counts: number[] = [];
                for (const table of ['resources', 'audit_logs', 'config_bundle_operations']) {
                    const [row] = await t.server.db.knex(table).count({ n: '*' });
                    counts.push(Number((row as { n: number | string }).n));
                }
                return counts;
            };
            const before = await rows();
            expect((await upgrade({ $schema: schemaOf('IssuanceConfigFile', 1), spec: {} }, false)).statusCode).to.equal(401);
            expect((await upgrade({ $schema: schemaOf('IssuanceConfigFile', 1), spec: {} })).statusCode).to.equal(200);
            expect(await rows()).to.equal(before);
        });
    });
}
