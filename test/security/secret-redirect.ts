import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';
import { webhookEndpointKind } from '../../resources/webhook-endpoint';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

/**
 * Someone who may edit a webhook endpoint but never sees its secret (answers show "[redacted]") must not be able to
 * point the endpoint at their own server and have the service send the stored secret there.
 */
for (const dialect of DIALECTS) {
    describe(`stored secrets and changed destinations (${dialect})`, () => {
        let t: TestServer;
        let headers: { authorization: string };
        const url = '/api/issuer/webhook-endpoints';
        const storedValue = async (id: string) => {
            const found = await t.server.registry.get({ tenantId: 'redirect', roles: ['tenant:admin'] } as any, webhookEndpointKind, id);
            return found && (found.spec.auth as { config: { value: string } }).config.value;
        };

        before(async () => {
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-oid4vci', 'hallmark-tenancy') });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'redirect');
            headers = bearer((await clientWithToken(t.server, root, { clientId: 'redirect-admin', roles: ['tenant:admin'], tenantId: 'redirect' })).token);
        });

        after(() => t.stop());

        const create = async (id: string) => {
            const res = await t.server.inject({ method: 'POST', url, headers, payload: { id, name: 'Backend', url: 'https://hooks.example.com/in', auth: { type: 'apiKey', config: { headerName: 'X-Key', value: 'the-stored-secret' } } } });
            expect(res.statusCode, res.payload).to.equal(201);
            expect((res.result as any).auth.config.value).to.equal('[redacted]');
            return res.result as Record<string, any>;
        };

        it('PATCH of the URL alone is refused until the secret is given again', async () => {
            await create('wh-patch');
            const moved = await t.server.inject({ method: 'PATCH', url: `${url}/wh-patch`, headers, payload: { url: 'https://attacker.example.net/in' } });
            expect(moved.statusCode).to.equal(400);
            expect(moved.payload).to.contain('auth.config.value');
            expect(await storedValue('wh-patch')).to.equal('the-stored-secret');
            // With a new secret the move is fine; an unrelated PATCH keeps the secret.
            const withSecret = await t.server.inject({ method: 'PATCH', url: `${url}/wh-patch`, headers, payload: { url: 'https://hooks2.example.com/in', auth: { type: 'apiKey', config: { headerName: 'X-Key', value: 'a-new-secret' } } } });
            expect(withSecret.statusCode, withSecret.payload).to.equal(200);
            const renamed = await t.server.inject({ method: 'PATCH', url: `${url}/wh-patch`, headers, payload: { name: 'Renamed' } });
            expect(renamed.statusCode, renamed.payload).to.equal(200);
            expect(await storedValue('wh-patch')).to.equal('a-new-secret');
        });

        it('sending back the redacted document with another URL is refused; with the same URL it keeps the secret', async () => {
            const { name, auth } = await create('wh-put');
            const shown = { name, url: 'https://hooks.example.com/in', auth };
            const moved = await t.server.inject({ method: 'PATCH', url: `${url}/wh-put`, headers, payload: { ...shown, url: 'https://attacker.example.net/in' } });
            expect(moved.statusCode).to.equal(400);
            expect(moved.payload).to.contain('auth.config.value');
            expect(await storedValue('wh-put')).to.equal('the-stored-secret');
            const same = await t.server.inject({ method: 'PATCH', url: `${url}/wh-put`, headers, payload: { ...shown, name: 'Same place' } });
            expect(same.statusCode, same.payload).to.equal(200);
            expect(await storedValue('wh-put')).to.equal('the-stored-secret');
        });
    });
}
