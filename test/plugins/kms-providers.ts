import Fs from 'node:fs';
import Path from 'node:path';
import { PassThrough } from 'node:stream';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as X509 from '@peculiar/x509';
import * as Jose from 'jose';
import { loadConfig } from '../../manifests/environment';
import { createLogger } from '../../lib/logging';
import { KmsServer } from '../fixtures/kms-server';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';
import { createSoftHsmToken, type SoftHsmToken } from '../helpers/softhsm';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const KMS_TOKEN = 'kms-bearer-token-0123456789';

/** A provider plugin named by module path, as a third-party package would be, beside the built-in providers. */
const manifest = manifestFor({ plugin: Path.join(__dirname, '../fixtures/kms-third-party') }, 'hallmark-kms-db', 'hallmark-kms-http', 'hallmark-kms-pkcs11', 'hallmark-tenancy');

for (const dialect of DIALECTS) {
    describe(`key chains on every provider (${dialect})`, () => {
        let t: TestServer;
        let hsm: SoftHsmToken;
        let kmsServer: KmsServer;
        let token: string;
        let logFile: string;
        let configFolder: string;
        const answers: string[] = [];
        const call = async (method: string, url: string, payload?: object) => {
            const res = await t.server.inject({ method, url, payload, headers: bearer(token) });
            answers.push(res.payload);
            return res;
        };

        before({ timeout: 600_000 }, async () => {
            hsm = createSoftHsmToken();
            kmsServer = await KmsServer.start({ auth: { type: 'bearer', token: KMS_TOKEN } });
            logFile = Path.join(Fs.mkdtempSync(Path.join(require('node:os').tmpdir(), 'hallmark-log-')), 'hallmark.log');
            const logEnv = { LOG_LEVEL: 'debug', LOG_TO_FILE: 'true', LOG_FILE_PATH: logFile, LOG_ENABLE_HTTP_LOGGER: 'true', LOG_HTTP_RESPONSE_BODY: 'true', LOG_HTTP_RESPONSE_BODY_MAX_LENGTH: '0' };
            const logger = createLogger(loadConfig({ PUBLIC_URL: 'http://x', MASTER_SECRET: 'm'.repeat(32), AUTH_CLIENT_ID: 'r', AUTH_CLIENT_SECRET: 'a-long-enough-secret', ...logEnv }), { destination: new PassThrough().resume() });
            // pkcs11 is operator-only: the HSM comes from the global kms.json; a tenant folder with a wrong PIN fails.
            configFolder = Fs.mkdtempSync(Path.join(require('node:os').tmpdir(), 'hallmark-kms-config-'));
            Fs.writeFileSync(Path.join(configFolder, 'kms.json'), JSON.stringify({ providers: [{ id: 'hsm', type: 'pkcs11', library: hsm.library, slot: hsm.label, pin: '${TEST_HSM_PIN}' }] }));
            Fs.mkdirSync(Path.join(configFolder, 'badpin'));
            Fs.writeFileSync(Path.join(configFolder, 'badpin', 'info.json'), JSON.stringify({ name: 'Wrong PIN' }));
            Fs.writeFileSync(Path.join(configFolder, 'badpin', 'kms.json'), JSON.stringify({ providers: [{ id: 'hsm2', type: 'pkcs11', library: hsm.library, slot: hsm.label, pin: 'not-the-pin-4711' }] }));
            t = await startTestServer(dialect, {
                manifest,
                logger,
                env: { ...logEnv, KMS_TIMEOUT_MS: '1500', CONFIG_FOLDER: configFolder, TEST_HSM_PIN: hsm.pin, OUTBOUND_URL_ALLOW_HTTP: 'true', OUTBOUND_URL_ALLOW_PRIVATE_NETWORK: 'true' }
            });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            token = (await clientWithToken(t.server, root, { clientId: 'acme-keys', roles: ['key:manage'], tenantId: 'acme' })).token;
        });
        after(async () => {
            await t.stop();
            await kmsServer.stop().catch(() => undefined);
            hsm.remove();
            Fs.rmSync(configFolder, { recursive: true, force: true });
        });

        it('saves a configuration with http and a third-party provider after checking each, secrets redacted, over the operator\'s pkcs11 provider', async () => {
            const res = await call('PUT', '/api/key-chain/providers/config', {
                providers: [
                    { id: 'remote', type: 'http', baseUrl: kmsServer.origin, auth: { type: 'bearer', token: KMS_TOKEN } },
                    { id: 'mem', type: 'memory', label: 'in memory' }
                ]
            });
            expect(res.statusCode, res.payload).to.equal(200);
            const stored = (await call('GET', '/api/key-chain/providers/config')).result as any;
            expect(stored.providers[0].auth.token).to.equal('[redacted]');
            const health = (await call('GET', '/api/key-chain/providers')).result as any[];
            expect(health.map((p) => [p.id, p.status])).to.equal([['db', 'up'], ['hsm', 'up'], ['remote', 'up'], ['mem', 'up']]);
            // Sending the redacted configuration back, reordered, keeps the stored secrets.
            const again = await call('PUT', '/api/key-chain/providers/config', { providers: [...stored.providers].reverse() });
            expect(again.statusCode, again.payload).to.equal(200);
            const after = (await call('GET', '/api/key-chain/providers')).result as any[];
            expect(after.every((p) => p.status === 'up')).to.be.true();
        });

        it('makes a verifiable certificate chain and ES256 signatures on each provider', async () => {
            for (const provider of ['db', 'remote', 'hsm', 'mem']) {
                const res = await call('POST', '/api/key-chain', { id: `chain-${provider}`, usageType: 'attestation', kmsProvider: provider });
                expect(res.statusCode, `${provider}: ${res.payload}`).to.equal(201);
                const body = res.result as any;
                expect(body.kmsProvider).to.equal(provider);
                const leaf = new X509.X509Certificate(body.certificateChain[0]);
                const root = new X509.X509Certificate(body.rootCertificate);
                expect(await leaf.verify({ publicKey: root.publicKey, signatureOnly: true }), provider).to.be.true();
                const jws = await t.server.signing.jws('acme', `chain-${provider}`, { payload: { provider } });
                const { payload } = await Jose.jwtVerify(jws, await Jose.importJWK(body.publicJwk, 'ES256'));
                expect(payload.provider).to.equal(provider);
            }
            expect(kmsServer.keys.size).to.equal(1);
        });

        it('refuses a PKCS#11 configuration with a wrong PIN when it is saved, without echoing the PIN', async () => {
            // The operator's tenant folder with a wrong PIN: that tenant's import failed as a whole.
            const root = await rootToken(t.server);
            expect((await t.server.inject({ url: '/api/tenants/badpin', headers: bearer(root) })).statusCode).to.equal(404);
            const log = Fs.readFileSync(logFile, 'utf8');
            expect(log).to.contain('hsm2');
            expect(log).to.contain('PIN');
            expect(log).to.not.contain('not-the-pin-4711');
        });

        it('keeps native libraries, key files, private addresses and the environment out of a tenant\'s reach', async () => {
            const pkcs11 = await call('PUT', '/api/key-chain/providers/config', { providers: [{ id: 'x', type: 'pkcs11', library: hsm.library, slot: hsm.label, pin: 'x' }] });
            expect(pkcs11.statusCode).to.equal(403);
            const mtls = await call('PUT', '/api/key-chain/providers/config', { providers: [{ id: 'x', type: 'http', baseUrl: 'https://kms.example.com', auth: { type: 'mtls', certFile: '/etc/ssl/cert.pem', keyFile: '/etc/ssl/key.pem' } }] });
            expect(mtls.statusCode).to.equal(403);
            // Placeholders from the API are taken literally: the environment never reaches a provider.
            const strict = await startTestServer(dialect, { manifest, env: { KMS_TIMEOUT_MS: '1500' } });
            try {
                const root = await rootToken(strict.server);
                await createTenant(strict.server, root, 'acme');
                const admin = (await clientWithToken(strict.server, root, { clientId: 'acme-keys', roles: ['key:manage'], tenantId: 'acme' })).token;
                const put = (payload: object) => strict.server.inject({ method: 'PUT', url: '/api/key-chain/providers/config', payload, headers: bearer(admin) });
                const loopback = await put({ providers: [{ id: 'x', type: 'http', baseUrl: kmsServer.origin, auth: { type: 'bearer', token: '${MASTER_SECRET}' } }] });
                expect(loopback.statusCode).to.equal(400);
                expect((loopback.result as any).message).to.contain('x');
                const before = kmsServer.requests.length;
                const secretUrl = await put({ providers: [{ id: 'x', type: 'http', baseUrl: 'https://${MASTER_SECRET}.example.com', auth: { type: 'bearer', token: '${MASTER_SECRET}' } }] });
                expect(secretUrl.statusCode).to.equal(400);
                expect(secretUrl.payload).to.not.contain('test-master-secret');
                expect(kmsServer.requests.length).to.equal(before);
            }
            finally {
                await strict.stop();
            }
        });

        it('answers 503 naming a provider that is slow or down, within the configured timeout', async () => {
            kmsServer.delayMs = 5000;
            const started = Date.now();
            const slow = await call('POST', '/api/key-chain', { id: 'slow', usageType: 'access', kmsProvider: 'remote' });
            expect(slow.statusCode).to.equal(503);
            expect((slow.result as any).message).to.contain('remote');
            expect(Date.now() - started).to.be.below(4000);
            kmsServer.delayMs = 0;
            await kmsServer.stop();
            const down = await call('POST', '/api/key-chain', { id: 'down', usageType: 'access', kmsProvider: 'remote' });
            expect(down.statusCode).to.equal(503);
            expect((down.result as any).message).to.contain('remote');
            const health = (await call('GET', '/api/key-chain/providers')).result as any[];
            expect(health.find((p) => p.id === 'remote').status).to.equal('down');
            await expect(t.server.signing.jws('acme', 'chain-remote', { payload: {} })).to.reject(/remote/);
        });

        it('never shows a private key in an answer or the log', async () => {
            const rows = await t.server.db.knex('kms_db_keys').where({ tenant_id: 'acme' });
            expect(rows.length > 0).to.be.true();
            const secrets = rows.map((r) => JSON.parse(t.server.db.cipher.decrypt(r.privateJwk)).d as string);
            const log = Fs.readFileSync(logFile, 'utf8');
            expect(log.length > 0).to.be.true();
            for (const d of secrets) {
                expect(log).to.not.contain(d);
                for (const answer of answers) {
                    expect(answer).to.not.contain(d);
                }
            }
            expect(log).to.not.contain(hsm.pin);
            expect(log).to.not.contain(KMS_TOKEN);
        });
    });
}
