import { expect } from '@hapi/code';
import type Hapi from '@hapi/hapi';
import * as Lab from '@hapi/lab';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const TENANT = 'nul-t';
const PARAM = /\{(\w+)(\*\d*|\?)?\}/g;

const scopesOf = (route: Hapi.RequestRoute): string[] => {
    const auth = (route.settings as { auth?: false | { access?: Array<{ scope?: false | { selection?: string[]; required?: string[] } }> } }).auth;
    return auth ? (auth.access ?? []).flatMap((a) => (a.scope ? [...a.scope.selection ?? [], ...a.scope.required ?? []] : [])) : [];
};

/** A URL for a route path: every parameter a plausible value, except `broken`, which carries a NUL. */
const urlOf = (path: string, broken?: string) => path.replace(PARAM, (_m, name: string) =>
    name === broken ? 'a%00b' : name === 'tenant' ? TENANT : name === 'version' ? '1' : `probe-${name}`);

for (const dialect of DIALECTS) {
    describe(`NUL characters in requests (${dialect})`, () => {
        let t: TestServer;
        let root: string;
        let admin: string;

        before(async () => {
            t = await startTestServer(dialect);
            root = await rootToken(t.server);
            await createTenant(t.server, root, TENANT);
            admin = (await clientWithToken(t.server, root, { clientId: 'nul-admin', roles: ['tenant:admin'], tenantId: TENANT })).token;
        });
        after(() => t.stop());

        const headersFor = (route: Hapi.RequestRoute) => {
            const scopes = scopesOf(route);
            return scopes.length === 0 ? {} : bearer(scopes.every((s) => s === 'tenant:manage') ? root : admin);
        };

        it('refuses a NUL in any path parameter and in the query of every route with 400 (never 500)', async () => {
            const wrong: string[] = [];
            for (const route of t.server.table()) {
                const params = [...route.path.matchAll(PARAM)].map((m) => m[1]!);
                const urls = [...params.map((p) => urlOf(route.path, p)), `${urlOf(route.path)}?probe=a%00b`];
                for (const url of urls) {
                    const res = await t.server.inject({ method: route.method, url, headers: headersFor(route) });
                    const body = String(res.headers['content-type']).startsWith('application/json') ? JSON.parse(res.payload) : {};
                    const protocol = !!(route.settings.app as { protocol?: boolean } | undefined)?.protocol;
                    const shaped = protocol
                        ? body.error === 'invalid_request' && /NUL/.test(body.error_description)
                        : body.statusCode === 400 && /NUL/.test(body.message) && body.details?.length === 1;
                    if (res.statusCode !== 400 || !shaped) {
                        wrong.push(`${route.method.toUpperCase()} ${url}: ${res.statusCode} ${res.payload.slice(0, 200)}`);
                    }
                }
            }
            expect(wrong, wrong.join('\n')).to.equal([]);
        });

        it('names the field of a NUL anywhere in a management payload: strings, nested values, array items and keys', async () => {
            const cases: Array<[string, string, object, string]> = [
                ['POST', '/api/tenants', { id: 'nul-name', name: 'a\u0000b' }, 'name'],
                ['POST', '/api/clients', { clientId: 'nul-c', roles: ['key:read'], tenantId: TENANT, description: 'x\u0000' }, 'description'],
                ['POST', '/api/clients', { clientId: 'nul-d', roles: ['key:read', 'a\u0000'], tenantId: TENANT }, 'roles.1'],
                ['POST', '/api/tenants', { id: 'nul-key', name: 'ok', ['bad\u0000key']: 1 }, '']
            ];
            for (const [method, url, payload, path] of cases) {
                const res = await t.server.inject({ method, url, headers: bearer(root), payload });
                expect(res.statusCode, res.payload).to.equal(400);
                expect((res.result as { details: unknown }).details).to.equal([{ path, message: path
                    ? `payload field "${path}" must not contain a NUL character`
                    : 'payload field must not have a key with a NUL character' }]);
            }
            expect((await t.server.inject({ method: 'GET', url: '/api/tenants/nul-name', headers: bearer(root) })).statusCode).to.equal(404);

            const nested = await t.server.inject({ method: 'POST', url: '/api/verifier/offer', headers: bearer(admin),
                payload: { requestId: 'x', reference: 'ref\u0000', webhook: { url: 'https://example.org', auth: { type: 'apiKey', config: { headerName: 'x', value: 'v\u0000' } } } } });
            expect(nested.statusCode, nested.payload).to.equal(400);
            expect((nested.result as { details: Array<{ path: string }> }).details.map((d) => d.path).sort()).to.equal(['reference', 'webhook.auth.config.value']);
        });

        it('answers a NUL in a wallet payload with invalid_request', async () => {
            const cases: Array<{ url: string; payload: string | object; type?: string }> = [
                { url: `/issuers/${TENANT}/authorize/token`, payload: 'grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Apre-authorized_code&pre-authorized_code=a%00b', type: 'application/x-www-form-urlencoded' },
                { url: `/issuers/${TENANT}/vci/credential`, payload: { credential_configuration_id: 'pid', proofs: { jwt: ['a\u0000'] } } },
                { url: `/issuers/${TENANT}/vci/notification`, payload: { notification_id: 'n', event: 'credential_accepted', ['k\u0000']: true } },
                { url: '/presentations/probe/oid4vp', payload: 'state=a%00b&response=x', type: 'application/x-www-form-urlencoded' }
            ];
            for (const { url, payload, type } of cases) {
                const res = await t.server.inject({ method: 'POST', url, payload, headers: type ? { 'content-type': type } : {} });
                expect(res.statusCode, `${url}: ${res.payload}`).to.equal(400);
                expect(res.result).to.only.include(['error', 'error_description']);
                expect((res.result as { error: string }).error).to.equal('invalid_request');
                expect((res.result as { error_description: string }).error_description).to.contain('NUL');
            }
        });
    });
}
