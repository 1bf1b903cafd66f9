import Fs from 'node:fs';
import Path from 'node:path';
import { PassThrough } from 'node:stream';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as X509 from '@peculiar/x509';
import * as Jose from 'jose';
import { loadConfig } from '../../lib/config';
import { createLogger } from '../../lib/logging';
import { manifest as defaultManifest } from '../../manifests/default';
import { KmsServer } from '../fixtures/kms-server';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { startTestServer, type TestServer } from '../helpers/server';
import { createSoftHsmToken, type SoftHsmToken } from '../helpers/softhsm';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const KMS_TOKEN = 'kms-bearer-token-0123456789';

/** The default manifest plus one line: a provider plugin named by module path, as a third-party package would be. */
const manifest = { name: 'with-third-party-kms', plugins: [...defaultManifest.plugins, { plugin: Path.join(__dirname, '../fixtures/kms-third-party') }] };

for (const dialect of DIALECTS) {
    describe(`key chains on every provider (${dialect})`, () => {
        let t: TestServer;
        let hsm: SoftHsmToken;
        let kmsServer: KmsServer;
        let token: string;
        let logFile: string;
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
            t = await startTestServer(dialect, { manifest, logger, env: { ...logEnv, KMS_TIMEOUT_MS: '1500' } });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            token = (await clientWithToken(t.server, root, { clientId: 'acme-keys', roles: ['key:manage'], tenantId: 'acme' })).token;
        });
        after(async () => {
            await t.stop();
            await kmsServer.stop().catch(() => undefined);
            hsm.remove();
        });

        it('saves a configuration with http, pkcs11 and a third-party provider after checking each, secrets redacted', async () => {
            const res = await call('PUT', '/api/key-chain/providers/config', {
                providers: [
                    { id: 'remote', type: 'http', baseUrl: kmsServer.origin, auth: { type: 'bearer', token: KMS_TOKEN } },
                    { id: 'hsm', type: 'pkcs11', library: hsm.library, slot: hsm.label, pin: hsm.pin },
                    { id: 'mem', type: 'memory', label: 'in memory' }
                ]
            });
            expect(res.statusCode, res.payload).to.equal(200);
            const stored = (await call('GET', '/api/key-chain/providers/config')).result as any;
            expect(stored.providers[0].auth.token).to.equal('[redacted]');
            expect(stored.providers[1].pin).to.equal('[redacted]');
            const health = (await call('GET', '/api/key-chain/providers')).result as any[];
            expect(health.map((p) => [p.id, p.status])).to.equal([['db', 'up'], ['remote', 'up'], ['hsm', 'up'], ['mem', 'up']]);
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
            const res = await call('PUT', '/api/key-chain/providers/config', { providers: [{ id: 'hsm', type: 'pkcs11', library: hsm.library, slot: hsm.label, pin: 'not-the-pin-4711' }] });
            expect(res.statusCode).to.equal(400);
            expect((res.result as any).message).to.contain('hsm');
            expect((res.result as any).message).to.contain('PIN');
            expect(res.payload).to.not.contain('not-the-pin-4711');
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
