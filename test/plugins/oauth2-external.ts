import { expect } from '@hapi/code';
import { Writable } from 'node:stream';
import * as Lab from '@hapi/lab';
import Pino from 'pino';
import { FakeKeycloak } from '../fixtures/fake-keycloak';
import { AUDIENCE, Idp, signingKey } from '../fixtures/oidc-idp';
import { DIALECTS } from '../helpers/databases';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

/** The whole service in external OIDC mode, with tokens from a real oidc-provider. */
for (const dialect of DIALECTS) {
    describe(`external OIDC mode (${dialect})`, () => {
        let idp: Idp;
        let t: TestServer;
        const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

        before(async () => {
            idp = await Idp.start([await signingKey('k1')]);
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-oauth2', 'hallmark-tenancy'), env: { OIDC: idp.issuer, OIDC_AUDIENCE: AUDIENCE, AUTH_CLIENT_ID: '', AUTH_CLIENT_SECRET: '' } });
        });
        after(async () => {
            await t.stop();
            await idp.stop();
        });

        it('does not serve the integrated token endpoint, JWKS or client management', async () => {
            for (const url of ['/api/oauth2/token', '/api/oauth2/jwks', '/api/clients']) {
                const res = await t.server.inject({ method: url.endsWith('token') ? 'POST' : 'GET', url });
                expect(res.statusCode, url).to.equal(404);
            }
        });

        it('accepts the provider\'s tokens, with roles and tenant from their claims', async () => {
            const root = await idp.token('root-client');
            const created = await t.server.inject({ method: 'POST', url: '/api/tenants', payload: { id: 'acme', name: 'Acme' }, headers: bearer(root) });
            expect(created.statusCode).to.equal(201);
            const audit = await t.server.db.knex('audit_logs').where({ tenant_id: 'acme', kind: 'Tenant' }).first();
            expect(audit.actor).to.equal('root-client');

            // tenant-client: tenant acme, roles issuance:offer and key:read
            const tenantToken = await idp.token('tenant-client');
            expect((await t.server.inject({ url: '/api/tenants', headers: bearer(tenantToken) })).statusCode).to.equal(403);
            expect((await t.server.inject({ method: 'PUT', url: '/api/session-config', payload: { ttlSeconds: 600, cleanupMode: 'full' }, headers: bearer(tenantToken) })).statusCode).to.equal(403);
        });

        it('rejects tokens the provider did not sign', async () => {
            const stranger = await signingKey('k1');
            const { SignJWT } = await import('jose');
            const forged = await new SignJWT({ roles: ['tenant:manage'] }).setProtectedHeader({ alg: 'ES256', kid: 'k1' }).setIssuer(idp.issuer)
                .setAudience(AUDIENCE).setSubject('root-client').setIssuedAt().setExpirationTime('5m').sign(stranger.privateKey);
            const res = await t.server.inject({ url: '/api/tenants', headers: bearer(forged) });
            expect(res.statusCode).to.equal(401);
            expect(res.headers['www-authenticate']).to.contain('invalid_token');
        });
    });
}

describe('external OIDC mode with Keycloak', () => {
    it('creates the root client in the provider at start, idempotently', async () => {
        const kc = new FakeKeycloak({ realm: 'hallmark', adminClientId: 'hallmark-service', adminClientSecret: 'service-secret-0123456789' });
        await kc.start();
        const env = { OIDC: kc.issuer, OIDC_CLIENT_ID: 'hallmark-service', OIDC_CLIENT_SECRET: 'service-secret-0123456789', AUTH_CLIENT_ID: 'hallmark-root', AUTH_CLIENT_SECRET: 'root-secret-in-keycloak-0123' };
        try {
            const first = await startTestServer('sqlite', { manifest: manifestFor('hallmark-oauth2', 'hallmark-tenancy'), env });
            await first.stop();
            expect(kc.client('hallmark-root')!.secret).to.equal('root-secret-in-keycloak-0123');
            expect(kc.serviceAccountRoles('hallmark-root')).to.include('tenant:manage');
            kc.clearRequests();
            const second = await startTestServer('sqlite', { manifest: manifestFor('hallmark-oauth2', 'hallmark-tenancy'), env });
            await second.stop();
            expect(kc.writes()).to.equal([]);
        }
        finally {
            await kc.stop();
        }
    });
});

describe('external OIDC mode without an audience', () => {
    const startLogging = async (idp: Idp, env: Record<string, string>) => {
        const lines: Array<{ level: number; msg: string }> = [];
        const sink = new Writable({ write(chunk, _enc, done) { lines.push(JSON.parse(chunk.toString())); done(); } });
        const t = await startTestServer('sqlite', { manifest: manifestFor('hallmark-oauth2', 'hallmark-tenancy'), env: { OIDC: idp.issuer, AUTH_CLIENT_ID: '', AUTH_CLIENT_SECRET: '', ...env }, logger: Pino({ level: 'warn' }, sink) });
        await t.stop();
        return lines.filter((l) => l.msg.includes('OIDC_AUDIENCE'));
    };

    it('warns at start that tokens for any audience are accepted, and not when one is set', async () => {
        const idp = await Idp.start([await signingKey('k1')]);
        try {
            const warnings = await startLogging(idp, {});
            expect(warnings).to.have.length(1);
            expect(warnings[0]!.level).to.equal(40);
            expect(await startLogging(idp, { OIDC_AUDIENCE: AUDIENCE })).to.equal([]);
        }
        finally {
            await idp.stop();
        }
    });
});
