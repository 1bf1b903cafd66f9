import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { KmsServer } from '../fixtures/kms-server';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const KMS_TOKEN = 'kms-bearer-token-for-outbound';

for (const dialect of DIALECTS) {
    describe(`http KMS providers and the outbound policy at use (${dialect})`, () => {
        let t: TestServer;
        let kms: KmsServer;
        let folder: string;
        let tenantToken: string;
        let operatorToken: string;

        before(async () => {
            kms = await KmsServer.start({ auth: { type: 'bearer', token: KMS_TOKEN } });
            // The operator's tenant folder names the same loopback KMS: its files are trusted.
            folder = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-kms-outbound-'));
            Fs.mkdirSync(Path.join(folder, 'ops'));
            Fs.writeFileSync(Path.join(folder, 'ops', 'info.json'), JSON.stringify({ name: 'Operations' }));
            Fs.writeFileSync(Path.join(folder, 'ops', 'kms.json'), JSON.stringify({ providers: [{ id: 'opkms', type: 'http', baseUrl: kms.origin, auth: { type: 'bearer', token: KMS_TOKEN } }] }));
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-kms-http', 'hallmark-kms-db', 'hallmark-tenancy'), env: { CONFIG_FOLDER: folder, OUTBOUND_URL_ALLOW_HTTP: 'true', OUTBOUND_URL_ALLOW_PRIVATE_NETWORK: 'true' } });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            tenantToken = (await clientWithToken(t.server, root, { clientId: 'acme-keys', roles: ['key:manage'], tenantId: 'acme' })).token;
            operatorToken = (await clientWithToken(t.server, root, { clientId: 'ops-keys', roles: ['key:manage'], tenantId: 'ops' })).token;
        });
        after(async () => {
            await t?.stop();
            await kms.stop().catch(() => undefined);
            Fs.rmSync(folder, { recursive: true, force: true });
        });

        it('checks every connection of a provider a tenant configured through the API against the policy; the operator\'s are trusted', async () => {
            const saved = await t.server.inject({ method: 'PUT', url: '/api/key-chain/providers/config', headers: bearer(tenantToken),
                payload: { providers: [{ id: 'remote', type: 'http', baseUrl: kms.origin, auth: { type: 'bearer', token: KMS_TOKEN } }] } });
            expect(saved.statusCode, saved.payload).to.equal(200);

            // The policy tightens after the save (as when the name behind a saved URL moves to a private address).
            t.server.outbound.allowPrivateNetwork = false;
            try {
                const keysBefore = kms.keys.size;
                const refused = await t.server.inject({ method: 'POST', url: '/api/key-chain', headers: bearer(tenantToken), payload: { id: 'k-remote', usageType: 'access', kmsProvider: 'remote' } });
                expect(refused.statusCode, refused.payload).to.equal(503);
                expect((refused.result as { message: string }).message).to.contain('refused by the outbound policy');
                expect((refused.result as { message: string }).message).to.contain('loopback address 127.0.0.1');
                expect(kms.keys.size).to.equal(keysBefore);

                const trusted = await t.server.inject({ method: 'POST', url: '/api/key-chain', headers: bearer(operatorToken), payload: { id: 'k-ops', usageType: 'access', kmsProvider: 'opkms' } });
                expect(trusted.statusCode, trusted.payload).to.equal(201);
                expect(kms.keys.size).to.equal(keysBefore + 1);
            }
            finally {
                t.server.outbound.allowPrivateNetwork = true;
            }
        });
    });
}
