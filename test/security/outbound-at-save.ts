import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import Pino from 'pino';
import { importConfigFolder } from '../../lib/config-import';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';
import { DEMO_ROOT_PEM } from '../helpers/pki';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

/** Every kind with an outbound URL: where the API creates it, and a valid body around the URL. */
const KINDS = [
    { kind: 'WebhookEndpoint', route: '/api/issuer/webhook-endpoints', dir: 'webhook-endpoints', body: (id: string, url: string) => ({ id, name: 'Hook', url, auth: { type: 'none' } }) },
    { kind: 'AttributeProvider', route: '/api/issuer/attribute-providers', dir: 'attribute-providers', body: (id: string, url: string) => ({ id, url, auth: { type: 'none' } }) },
    { kind: 'TrustList', route: '/api/trust-lists', dir: 'trust-lists', body: (id: string, url: string) => ({ id, url, signerCertificates: [DEMO_ROOT_PEM] }) }
];

const FORBIDDEN: Array<[string, string]> = [
    ['https://127.0.0.1:8443/hook', 'loopback address 127.0.0.1'],
    ['https://[::1]/hook', 'loopback address ::1'],
    ['https://10.20.30.40/hook', 'private address 10.20.30.40'],
    ['https://192.168.1.7/hook', 'private address 192.168.1.7'],
    ['https://169.254.169.254/latest/meta-data', 'link-local address 169.254.169.254']
];

const setUp = async (dialect: (typeof DIALECTS)[number], env: Record<string, string> = {}) => {
    const t = await startTestServer(dialect, { manifest: manifestFor('hallmark-oid4vci', 'hallmark-oid4vp', 'hallmark-tenancy'), env });
    const root = await rootToken(t.server);
    await createTenant(t.server, root, 'out-t');
    const { token } = await clientWithToken(t.server, root, { clientId: 'out-admin', roles: ['tenant:admin'], tenantId: 'out-t' });
    return { t, token };
};

for (const dialect of DIALECTS) {
    describe(`outbound URLs checked at save (${dialect})`, () => {
        let strict: { t: TestServer; token: string };
        let open: { t: TestServer; token: string };

        before(async () => {
            strict = await setUp(dialect);
            open = await setUp(dialect, { OUTBOUND_URL_ALLOW_PRIVATE_NETWORK: 'true' });
        });
        after(async () => {
            await strict?.t.stop();
            await open?.t.stop();
        });

        it('refuses loopback, private and link-local URLs of every kind with 400 naming the field and the address class', async () => {
            for (const { route, body } of KINDS) {
                for (const [url, what] of FORBIDDEN) {
                    const res = await strict.t.server.inject({ method: 'POST', url: route, headers: bearer(strict.token), payload: body('bad', url) });
                    expect(res.statusCode, `${route} ${url}: ${res.payload}`).to.equal(400);
                    expect((res.result as { details: unknown }).details).to.equal([{ path: 'url', message: `url: ${what} is not allowed by the outbound policy (OUTBOUND_URL_ALLOW_PRIVATE_NETWORK is off)` }]);
                }
                expect((await strict.t.server.inject({ method: 'GET', url: `${route}/bad`, headers: bearer(strict.token) })).statusCode).to.equal(404);

                // A saved resource cannot be moved to a forbidden address either.
                const created = await strict.t.server.inject({ method: 'POST', url: route, headers: bearer(strict.token), payload: body('good', 'https://93.184.216.34/in') });
                expect(created.statusCode, created.payload).to.equal(201);
                const moved = await strict.t.server.inject({ method: 'PATCH', url: `${route}/good`, headers: bearer(strict.token), payload: { url: 'https://127.0.0.1/in' } });
                expect(moved.statusCode, moved.payload).to.equal(400);
                expect((moved.result as { details: Array<{ path: string }> }).details[0]!.path).to.equal('url');
                const kept = await strict.t.server.inject({ method: 'GET', url: `${route}/good`, headers: bearer(strict.token) });
                expect((kept.result as { url: string }).url).to.equal('https://93.184.216.34/in');
            }
        });

        it('accepts the same URLs when OUTBOUND_URL_ALLOW_PRIVATE_NETWORK allows them', async () => {
            for (const { route, body } of KINDS) {
                for (const [index, [url]] of FORBIDDEN.entries()) {
                    const res = await open.t.server.inject({ method: 'POST', url: route, headers: bearer(open.token), payload: body(`ok-${index}`, url) });
                    expect(res.statusCode, `${route} ${url}: ${res.payload}`).to.equal(201);
                }
            }
        });

        it('refuses them in the configuration import too: the tenant is not imported and nothing is written', async () => {
            for (const { kind, dir, route, body } of KINDS) {
                const folder = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-outbound-'));
                try {
                    const file = Path.join(folder, 'out-t', dir, 'imported.json');
                    Fs.mkdirSync(Path.dirname(file), { recursive: true });
                    Fs.writeFileSync(file, JSON.stringify(body('imported', 'https://10.9.8.7/x')));
                    const report = await importConfigFolder({ folder, registry: strict.t.server.registry, log: Pino({ level: 'silent' }), variables: {}, unresolvedPlaceholders: 'fail-tenant' });
                    const [tenant] = report.tenants;
                    expect(tenant!.status, kind).to.equal('failed');
                    expect(tenant!.error).to.contain(`${dir}/imported.json`);
                    expect(tenant!.error).to.contain('url: private address 10.9.8.7 is not allowed by the outbound policy');
                    expect((await strict.t.server.inject({ method: 'GET', url: `${route}/imported`, headers: bearer(strict.token) })).statusCode).to.equal(404);

                    const allowed = await importConfigFolder({ folder, registry: open.t.server.registry, log: Pino({ level: 'silent' }), variables: {}, unresolvedPlaceholders: 'fail-tenant' });
                    expect(allowed.tenants[0]!.status, allowed.tenants[0]!.error).to.equal('imported');
                }
                finally {
                    Fs.rmSync(folder, { recursive: true, force: true });
                }
            }
        });
    });
}
