import { expect } from '@hapi/code';
import type Hapi from '@hapi/hapi';
import * as Lab from '@hapi/lab';
import { ROLES } from '../../lib/auth/roles';
import { manifest as probeManifest } from '../fixtures/probe-manifest';
import { startTestServer, ROOT_CLIENT, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

/**
 * Every management route needs a token and a role. Walks the real route table of the default manifest, so a route
 * added later without protection fails here. The only /api routes that need no token are these (spec 4.1,
 * contract "Further pinned details"), by method.
 */
const PUBLIC_EXACT = new Set([
    'POST /api/oauth2/token',
    'GET /api/oauth2/jwks',
    'GET /api/health',
    'GET /api',
    'GET /api/docs',
    'GET /api/docs-json'
]);
const PUBLIC_PREFIXES = ['GET /api/swaggerui/', 'GET /api/schemas/'];

const key = (route: Hapi.RequestRoute) => `${route.method.toUpperCase()} ${route.path}`;
const isApi = (route: Hapi.RequestRoute) => route.path === '/api' || route.path.startsWith('/api/');
const isPublic = (route: Hapi.RequestRoute) => PUBLIC_EXACT.has(key(route)) || PUBLIC_PREFIXES.some((p) => key(route).startsWith(p));

interface AuthSettings {
    strategies?: string[];
    mode?: string;
    access?: Array<{ scope?: false | { selection?: string[]; required?: string[]; forbidden?: string[] } }>;
}

const authOf = (route: Hapi.RequestRoute): AuthSettings | false | undefined => (route.settings as { auth?: AuthSettings | false }).auth;

/** Every scope a route accepts or requires; empty when it declares none. */
const scopesOf = (route: Hapi.RequestRoute): string[] => {
    const auth = authOf(route);
    if (!auth) {
        return [];
    }
    return (auth.access ?? []).flatMap((a) => (a.scope ? [...a.scope.selection ?? [], ...a.scope.required ?? []] : []));
};

/** A concrete URL for a route path: every parameter replaced by a harmless value. */
/** A concrete URL for a parameterised path: numbers for `version`, words elsewhere. */
const urlOf = (path: string) => path.replace(/\{(\w+)(\*\d*|\?)?\}/g, (_m, name: string) => (name === 'version' ? '1' : `probe${name}`));

/** Protected /api routes whose settings do not require a token, or declare no role scope. */
const unprotected = (routes: Hapi.RequestRoute[]): string[] => routes.filter((r) => !isPublic(r)).filter((r) => {
    const auth = authOf(r);
    return !auth || !auth.strategies?.length || auth.mode !== 'required' || scopesOf(r).length === 0;
}).map(key);

describe('route protection (default manifest)', () => {
    let t: TestServer;
    let routes: Hapi.RequestRoute[];
    before(async () => {
        t = await startTestServer('sqlite');
        routes = t.server.table().filter(isApi);
    });
    after(() => t.stop());

    it('finds the management routes it is meant to guard', () => {
        const keys = routes.map(key);
        // A sanity check on the walk itself: if these are missing, the table was not read correctly.
        expect(keys).to.include(['GET /api/tenants', 'POST /api/clients', 'GET /api/admin/audit-logs', 'PUT /api/session-config']);
        expect(routes.filter((r) => !isPublic(r)).length).to.be.at.least(10);
    });

    it('requires a token on every /api route except the public ones', () => {
        const offending = routes.filter((r) => !isPublic(r)).filter((r) => {
            const auth = authOf(r);
            return !auth || !auth.strategies?.length || auth.mode !== 'required';
        }).map((r) => `${key(r)} (auth: ${JSON.stringify(authOf(r))})`);
        expect(offending, `routes without required authentication:\n${offending.join('\n')}`).to.equal([]);
    });

    it('declares a non-empty role scope on every protected /api route', () => {
        const offending = routes.filter((r) => !isPublic(r)).filter((r) => scopesOf(r).length === 0).map(key);
        expect(offending, `routes without a role scope:\n${offending.join('\n')}`).to.equal([]);
    });

    it('declares only canonical roles as scopes (tokens carry canonical roles, so an alias or typo never matches)', () => {
        const known = new Set<string>(ROLES);
        const offending = routes.filter((r) => !isPublic(r))
            .flatMap((r) => scopesOf(r).filter((s) => !known.has(s)).map((s) => `${key(r)}: ${s}`));
        expect(offending, `routes with unknown scopes:\n${offending.join('\n')}`).to.equal([]);
    });

    it('answers 401 with a Bearer challenge on every protected route without a token or with a bad one', async () => {
        const offending: string[] = [];
        for (const route of routes.filter((r) => !isPublic(r))) {
            for (const headers of [{}, { authorization: 'Bearer not-a-jwt' }, { authorization: 'Basic cm9vdDpzZWNyZXQ=' }]) {
                const res = await t.server.inject({ method: route.method, url: urlOf(route.path), headers, payload: ['get', 'delete'].includes(route.method) ? undefined : {} });
                const challenge = String(res.headers['www-authenticate'] ?? '');
                if (res.statusCode !== 401 || !challenge.startsWith('Bearer')) {
                    offending.push(`${key(route)} with ${JSON.stringify(headers)}: ${res.statusCode} ${challenge}`);
                }
            }
        }
        expect(offending, offending.join('\n')).to.equal([]);
    });

    it('lets the public routes answer without a token', async () => {
        const publicRoutes = routes.filter(isPublic);
        expect(publicRoutes.map(key)).to.include([...PUBLIC_EXACT]);
        const offending: string[] = [];
        for (const route of publicRoutes) {
            if (authOf(route) !== false && (authOf(route) as AuthSettings | undefined)?.mode === 'required') {
                offending.push(`${key(route)}: auth is required (${JSON.stringify(authOf(route))})`);
                continue;
            }
            const res = key(route) === 'POST /api/oauth2/token'
                ? await t.server.inject({ method: 'POST', url: route.path, payload: { grant_type: 'client_credentials', client_id: ROOT_CLIENT.id, client_secret: ROOT_CLIENT.secret } })
                : await t.server.inject({ method: route.method, url: urlOf(route.path) });
            // Parameterised public routes (schemas) may not know the probe value: 404 is an answer, 401/403 are not.
            const ok = /\{/.test(route.path) ? res.statusCode < 400 || res.statusCode === 404 : res.statusCode < 400;
            if (!ok) {
                offending.push(`${key(route)}: ${res.statusCode}`);
            }
        }
        expect(offending, offending.join('\n')).to.equal([]);
    });
});

describe('route protection check', () => {
    it('reports a route added without authentication or scope', async () => {
        const t = await startTestServer('sqlite', { manifest: probeManifest });
        try {
            const found = unprotected(t.server.table().filter(isApi));
            expect(found).to.include(['POST /api/probe', 'GET /api/probe/conflict']);
            expect(found.every((k) => k.includes('/api/probe'))).to.be.true();
        }
        finally {
            await t.stop();
        }
    });
});
