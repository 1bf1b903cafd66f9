import * as Lab from '@hapi/lab';
import { expect } from '@hapi/code';
import Pino from 'pino';
import { KeycloakAdmin } from '../../plugins/oauth2/oidc/keycloak-admin';
import { FakeKeycloak } from '../fixtures/fake-keycloak';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const log = Pino({ level: 'silent' });
const ADMIN = { clientId: 'hallmark-service', clientSecret: 'admin-secret-0123456789abcdef' };
const ROOT = { clientId: 'hallmark-root', secret: 'root-secret-0123456789abcdef' };

describe('KeycloakAdmin', () => {
    describe('root client bootstrap', () => {
        const kc = new FakeKeycloak({ realm: 'hallmark', adminClientId: ADMIN.clientId, adminClientSecret: ADMIN.clientSecret });
        before(() => kc.start());
        after(() => kc.stop());

        const admin = () => new KeycloakAdmin({ issuer: kc.issuer, ...ADMIN, log });

        it('derives the token and admin URLs from the issuer', () => {
            const a = admin();
            expect(a.realmUrl).to.equal(kc.issuer);
            expect(a.adminUrl).to.equal(`${kc.origin}/admin/realms/hallmark`);
        });

        it('creates the client with its secret, creates the role and maps it on first start', async () => {
            expect(await kc.tokenFor(ROOT.clientId, ROOT.secret)).to.equal(401);
            kc.clearRequests();

            const changes = await admin().ensureRootClient(ROOT);
            expect(changes).to.equal({ created: true, secretUpdated: false, rolesCreated: ['tenant:manage'], rolesMapped: ['tenant:manage'] });

            const token = kc.requests[0];
            expect(token).to.include({ method: 'POST', url: '/realms/hallmark/protocol/openid-connect/token', admin: false });
            expect(token.body).to.equal({ grant_type: 'client_credentials', client_id: ADMIN.clientId, client_secret: ADMIN.clientSecret });

            const writes = kc.writes().map((r) => `${r.method} ${r.url}`);
            const client = kc.client(ROOT.clientId)!;
            const userPath = `/admin/realms/hallmark/users/${client.serviceAccountUserId}/role-mappings/realm`;
            expect(writes).to.equal(['POST /admin/realms/hallmark/clients', 'POST /admin/realms/hallmark/roles', `POST ${userPath}`]);
            expect(kc.writes()[0].body).to.equal({
                clientId: ROOT.clientId,
                secret: ROOT.secret,
                serviceAccountsEnabled: true,
                publicClient: false,
                standardFlowEnabled: false,
                directAccessGrantsEnabled: false,
                protocol: 'openid-connect'
            });
            expect(kc.writes()[1].body).to.equal({ name: 'tenant:manage' });
            const mapped = kc.writes()[2].body as { id: string; name: string }[];
            expect(mapped).to.have.length(1);
            expect(mapped[0]).to.equal({ id: mapped[0].id, name: 'tenant:manage' });

            expect(client.secret).to.equal(ROOT.secret);
            expect(client.serviceAccountsEnabled).to.be.true();
            expect(client.publicClient).to.be.false();
            expect(kc.serviceAccountRoles(ROOT.clientId)).to.equal(['default-roles-hallmark', 'tenant:manage']);
            expect(kc.requests.some((r) => r.url === '/admin/realms/hallmark/roles/tenant%3Amanage' && r.method === 'GET')).to.be.true();
            // The root client can now get its initial admin token.
            expect(await kc.tokenFor(ROOT.clientId, ROOT.secret)).to.equal(200);
        });

        it('makes no writes when started again with the same values', async () => {
            kc.clearRequests();
            const changes = await admin().ensureRootClient(ROOT);
            expect(changes).to.equal({ created: false, secretUpdated: false, rolesCreated: [], rolesMapped: [] });
            expect(kc.writes()).to.equal([]);
            expect(kc.requests.filter((r) => r.method !== 'GET').map((r) => r.url)).to.equal(['/realms/hallmark/protocol/openid-connect/token']);
            expect(kc.requests.some((r) => r.url.endsWith('/client-secret'))).to.be.true();
        });

        it('updates only the secret when it changed', async () => {
            kc.clearRequests();
            const id = kc.client(ROOT.clientId)!.id;
            const changes = await admin().ensureRootClient({ ...ROOT, secret: 'rotated-secret-0123456789abcdef' });
            expect(changes).to.equal({ created: false, secretUpdated: true, rolesCreated: [], rolesMapped: [] });
            const writes = kc.writes();
            expect(writes.map((r) => `${r.method} ${r.url}`)).to.equal([`PUT /admin/realms/hallmark/clients/${id}`]);
            // The full representation goes back, so no setting of the client is lost.
            expect(writes[0].body).to.include({ id, clientId: ROOT.clientId, secret: 'rotated-secret-0123456789abcdef', serviceAccountsEnabled: true, standardFlowEnabled: false });
            expect(kc.client(ROOT.clientId)!.secret).to.equal('rotated-secret-0123456789abcdef');
            expect(await kc.tokenFor(ROOT.clientId, ROOT.secret)).to.equal(401);
            expect(await kc.tokenFor(ROOT.clientId, 'rotated-secret-0123456789abcdef')).to.equal(200);

            kc.clearRequests();
            await admin().ensureRootClient(ROOT);
            expect(kc.writes().map((r) => r.method)).to.equal(['PUT']);
        });

        it('maps a role again when it was removed, and writes nothing else', async () => {
            kc.unmapRole(ROOT.clientId, 'tenant:manage');
            kc.clearRequests();
            const changes = await admin().ensureRootClient(ROOT);
            expect(changes).to.equal({ created: false, secretUpdated: false, rolesCreated: [], rolesMapped: ['tenant:manage'] });
            expect(kc.writes().map((r) => r.method + ' ' + r.url.replace(/[0-9a-f-]{36}/, 'ID'))).to.equal(['POST /admin/realms/hallmark/users/ID/role-mappings/realm']);
            expect(kc.serviceAccountRoles(ROOT.clientId)).to.include('tenant:manage');
        });

        it('uses a role that already exists instead of creating it', async () => {
            await admin().ensureRootClient({ clientId: 'second-root', secret: 'second-secret-0123456789abcdef', roles: ['tenant:manage', 'metrics:read'] });
            kc.clearRequests();
            const changes = await admin().ensureRootClient({ clientId: 'third-root', secret: 'third-secret-0123456789abcdef', roles: ['tenant:manage', 'metrics:read'] });
            expect(changes).to.equal({ created: true, secretUpdated: false, rolesCreated: [], rolesMapped: ['tenant:manage', 'metrics:read'] });
            expect(kc.writes().some((r) => r.url.endsWith('/roles'))).to.be.false();
            expect(kc.roleNames().filter((n) => n === 'tenant:manage')).to.have.length(1);
        });

        it('fails at the token step with the status and without any secret for wrong admin credentials', async () => {
            kc.clearRequests();
            const wrong = new KeycloakAdmin({ issuer: kc.issuer, clientId: ADMIN.clientId, clientSecret: 'wrong-admin-secret-0123456789', log });
            const err = await expect(wrong.ensureRootClient(ROOT)).to.reject(Error);
            expect(err.message).to.contain('token');
            expect(err.message).to.contain('401');
            expect(err.message).to.not.contain('wrong-admin-secret-0123456789');
            expect(err.message).to.not.contain(ROOT.secret);
            expect(kc.requests.filter((r) => r.admin)).to.equal([]);

            const unknown = new KeycloakAdmin({ issuer: kc.issuer, clientId: 'nobody', clientSecret: 'nobody-secret-0123456789', log });
            const err2 = await expect(unknown.token()).to.reject(Error);
            expect(err2.message).to.contain('admin token request failed: HTTP 401');
            expect(err2.message).to.not.contain('nobody-secret-0123456789');
        });

        it('names the step and status when the admin client lacks rights', async () => {
            // The root client authenticates but holds no realm-management rights: Keycloak answers 403.
            const weak = new KeycloakAdmin({ issuer: kc.issuer, clientId: ROOT.clientId, clientSecret: ROOT.secret, log });
            const err = await expect(weak.ensureRootClient({ clientId: 'x', secret: 'x-secret-0123456789abcdef', roles: [] })).to.reject(Error);
            expect(err.message).to.equal('Keycloak admin: find client failed: HTTP 403 (HTTP 403 Forbidden)');
        });

        it('fails with a clear message when Keycloak cannot be reached', async () => {
            const closed = new FakeKeycloak({ realm: 'hallmark', adminClientId: 'a', adminClientSecret: 'b' });
            await closed.start();
            const issuer = closed.issuer;
            await closed.stop();
            const err = await expect(new KeycloakAdmin({ issuer, ...ADMIN, log, fetchTimeoutMs: 2000 }).ensureRootClient(ROOT)).to.reject(Error);
            expect(err.message).to.contain('admin token request failed');
            expect(err.message).to.contain('ECONNREFUSED');
            expect(err.message).to.not.contain(ADMIN.clientSecret);
        });

        it('refuses an issuer that does not name a realm', () => {
            expect(() => new KeycloakAdmin({ issuer: 'http://127.0.0.1:1/oauth', ...ADMIN, log })).to.throw(/does not end in \/realms\/<realm>/);
        });
    });

    describe('with a base path and an internal address', () => {
        const kc = new FakeKeycloak({ realm: 'x', basePath: '/auth', adminClientId: ADMIN.clientId, adminClientSecret: ADMIN.clientSecret });
        before(() => kc.start());
        after(() => kc.stop());

        it('keeps the path before /realms/ for the admin API', async () => {
            const admin = new KeycloakAdmin({ issuer: kc.issuer, ...ADMIN, log });
            expect(admin.adminUrl).to.equal(`${kc.origin}/auth/admin/realms/x`);
            const changes = await admin.ensureRootClient(ROOT);
            expect(changes.created).to.be.true();
            expect(kc.requests[0].url).to.equal('/auth/realms/x/protocol/openid-connect/token');
            expect(kc.writes().every((r) => r.url.startsWith('/auth/admin/realms/x/'))).to.be.true();
            expect(kc.serviceAccountRoles(ROOT.clientId)).to.include('tenant:manage');
        });

        it('sends every request to the internal issuer, never to the public one', async () => {
            kc.clearRequests();
            // Never contacted: the internal address is the only one used.
            const admin = new KeycloakAdmin({ issuer: 'http://keycloak.hallmark.test/auth/realms/x', internalIssuer: kc.issuer, ...ADMIN, log });
            expect(admin.adminUrl).to.equal(`${kc.origin}/auth/admin/realms/x`);
            const changes = await admin.ensureRootClient(ROOT);
            expect(changes).to.equal({ created: false, secretUpdated: false, rolesCreated: [], rolesMapped: [] });
            expect(kc.writes()).to.equal([]);
        });
    });
});
