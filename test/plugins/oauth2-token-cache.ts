import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { startTestServer, type TestServer } from '../helpers/server';

/**
 * Verified management tokens are kept until they expire (TokenService.verify): a token used again is not verified
 * again, but every use still checks its expiry, its client (deleted clients and removed roles act at once) and
 * its signing key.
 */

export const lab = Lab.script();
const { describe, it, before, after } = lab;

for (const dialect of DIALECTS) {
    describe(`management token cache (${dialect})`, () => {
        let t: TestServer;
        let root: string;

        before(async () => {
            t = await startTestServer(dialect);
            root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
        });

        after(async () => {
            await t?.stop();
        });

        const get = async (token: string, url = '/api/session') => t.server.inject({ url, headers: bearer(token) });

        it('accepts a token again and again, and refuses it once its client is deleted', async () => {
            const { token } = await clientWithToken(t.server, root, { clientId: 'cached-deleted', roles: ['tenant:admin'], tenantId: 'acme' });
            expect((await get(token)).statusCode).to.equal(200);
            expect((await get(token)).statusCode).to.equal(200);
            const removed = await t.server.inject({ method: 'DELETE', url: '/api/clients/cached-deleted', headers: bearer(root) });
            expect(removed.statusCode, removed.payload).to.equal(204);
            const refused = await get(token);
            expect(refused.statusCode).to.equal(401);
            expect(refused.headers['www-authenticate']).to.contain('invalid_token');
        });

        it('narrows a cached token to the roles its client still has', async () => {
            const { token } = await clientWithToken(t.server, root, { clientId: 'cached-roles', roles: ['presentation:config', 'presentation:request'], tenantId: 'acme' });
            expect((await get(token, '/api/trust-lists')).statusCode).to.equal(200);
            const changed = await t.server.inject({ method: 'PATCH', url: '/api/clients/cached-roles', headers: bearer(root), payload: { roles: ['presentation:request'] } });
            expect(changed.statusCode, changed.payload).to.equal(200);
            expect((await get(token, '/api/trust-lists')).statusCode).to.equal(403);
            expect((await get(token)).statusCode).to.equal(200);
        });

        it('refuses a cached token once it has expired', async () => {
            const { token } = await clientWithToken(t.server, root, { clientId: 'cached-expiry', roles: ['tenant:admin'], tenantId: 'acme' });
            expect((await get(token)).statusCode).to.equal(200);
            // Two hours later (tokens live AUTH_TOKEN_TTL seconds, an hour at most in tests' configuration).
            const now = Date.now;
            Date.now = () => now() + 2 * 3600 * 1000;
            try {
                const refused = await get(token);
                expect(refused.statusCode).to.equal(401);
                expect(refused.headers['www-authenticate']).to.contain('The token has expired');
            }
            finally {
                Date.now = now;
            }
        });

        it('refuses a token whose signature does not verify, every time', async () => {
            const { token } = await clientWithToken(t.server, root, { clientId: 'cached-forged', roles: ['tenant:admin'], tenantId: 'acme' });
            expect((await get(token)).statusCode).to.equal(200);
            const [header, payload, signature] = token.split('.');
            const forged = `${header}.${payload}.${signature!.slice(0, -4)}${signature!.slice(-4) === 'AAAA' ? 'BBBB' : 'AAAA'}`;
            expect((await get(forged)).statusCode).to.equal(401);
            expect((await get(forged)).statusCode).to.equal(401);
        });
    });
}
