import Crypto from 'node:crypto';
import Dns from 'node:dns';
import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import Pino from 'pino';
import { KmsUnavailableError, type KeyStore, type KmsOpenContext, type PublicJwk } from '../../lib/kms/types';
import { vaultKmsProvider, type VaultKmsOptions } from '../../plugins/kms-vault/provider';
import { jcs, sha256Hex, type JsonBundle } from '../../plugins/bundles/bundle';
import { VaultServer } from '../fixtures/vault-server';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { issueSdJwtWithKeyChain } from '../helpers/kms-issuance';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after, afterEach } = lab;

const context = (providerId: string, timeoutMs = 5000): KmsOpenContext => ({ tenantId: 'acme', providerId, log: Pino({ level: 'silent' }), timeoutMs, services: {} });

const validated = (raw: unknown): VaultKmsOptions => {
    const { error, value } = vaultKmsProvider.optionsSchema.validate(raw);
    if (error) {
        throw error;
    }
    return value;
};

/** node:crypto's own verification of an ES256 (raw r || s) signature. */
const verifies = (publicJwk: PublicJwk, data: Buffer, signature: Uint8Array): boolean =>
    Crypto.verify('sha256', data, { key: Crypto.createPublicKey({ key: publicJwk as Crypto.JsonWebKey, format: 'jwk' }), dsaEncoding: 'ieee-p1363' }, signature);

describe('vault KMS provider against the Vault test server', () => {
    let vault: VaultServer;
    let store: KeyStore;
    before(async () => {
        vault = await VaultServer.start();
        store = await vaultKmsProvider.open(validated({ vaultUrl: vault.origin, vaultToken: vault.token }), context('vault'));
    });
    after(async () => {
        await store.close?.();
        await vault.stop();
    });
    afterEach(() => {
        vault.sealed = false;
        vault.delayMs = 0;
        vault.override = undefined;
    });

    it('creates an ecdsa-p256 key, signs (verified by node:crypto), reads the public key back', async () => {
        const publicJwk = await store.create('issuer-1', 'ES256');
        expect(publicJwk).to.only.include(['kty', 'crv', 'x', 'y']);
        expect(vault.keys.get('issuer-1')!.type).to.equal('ecdsa-p256');
        const data = Buffer.from('header.payload');
        const signature = await store.sign('issuer-1', data, 'ES256');
        expect(signature.length).to.equal(64);
        expect(verifies(publicJwk, data, signature)).to.be.true();
        expect(verifies(publicJwk, Buffer.from('other'), signature)).to.be.false();
        expect(await store.publicJwk('issuer-1')).to.equal(publicJwk);
    });

    it('signs with the latest version after a rotation in Vault, and reads that version\'s public key', async () => {
        await store.create('rotated', 'ES256');
        vault.rotate('rotated');
        const publicJwk = await store.publicJwk('rotated');
        expect(verifies(publicJwk, Buffer.from('x'), await store.sign('rotated', Buffer.from('x'), 'ES256'))).to.be.true();
    });

    it('deletes a key by allowing its deletion first; deleting it again is fine', async () => {
        await store.create('doomed', 'ES256');
        expect(vault.keys.get('doomed')!.deletionAllowed).to.be.false();
        await store.delete('doomed');
        expect(vault.keys.has('doomed')).to.be.false();
        await store.delete('doomed');
        await expect(store.sign('doomed', Buffer.from('x'), 'ES256')).to.reject('Key doomed not found in KMS provider vault');
        await expect(store.publicJwk('doomed')).to.reject('Key doomed not found in KMS provider vault');
    });

    it('reports health, and a sealed Vault as unavailable naming the provider', async () => {
        await store.health();
        vault.sealed = true;
        const health = await expect(store.health()).to.reject(KmsUnavailableError);
        expect(health.message).to.equal('KMS provider "vault" is unavailable: health check failed (Vault is sealed)');
        const sign = await expect(store.sign('issuer-1', Buffer.from('x'), 'ES256')).to.reject(KmsUnavailableError);
        expect(sign.message).to.equal('KMS provider "vault" is unavailable: sign with key "issuer-1" failed (Vault is sealed)');
    });

    it('refuses a key of another type and algorithms other than ES256', async () => {
        vault.createKey('rsa', 'rsa-2048');
        await expect(store.publicJwk('rsa')).to.reject('Key rsa in KMS provider vault is not an ecdsa-p256 key');
        await expect(store.create('k', 'RS256' as 'ES256')).to.reject(/Algorithm RS256 is not supported/);
        await expect(store.sign('..', Buffer.from('x'), 'ES256')).to.reject(/invalid kid/);
    });

    it('answers a refused token as unavailable, without the token', async () => {
        const wrong = await vaultKmsProvider.open(validated({ vaultUrl: vault.origin, vaultToken: 'hvs.wrong-token-value' }), context('vault-a'));
        const err = await expect(wrong.create('k', 'ES256')).to.reject(KmsUnavailableError);
        expect(err.message).to.equal('KMS provider "vault-a" is unavailable: Vault refused the token for create of key "k" (HTTP 403, permission denied); check vaultToken and its policy');
        const health = await expect(wrong.health()).to.reject(KmsUnavailableError);
        expect(health.message).to.contain('Vault refused the token for health check');
        expect(health.message).to.not.contain('wrong-token-value');
        await wrong.close?.();
    });

    it('gives up on a slow Vault after timeoutMs, and fails fast when it is down', async () => {
        const slow = await vaultKmsProvider.open(validated({ vaultUrl: vault.origin, vaultToken: vault.token }), context('slow-vault', 300));
        vault.delayMs = 3000;
        const started = Date.now();
        const err = await expect(slow.sign('issuer-1', Buffer.from('x'), 'ES256')).to.reject(KmsUnavailableError);
        expect(Date.now() - started).to.be.below(2000);
        expect(err.message).to.equal('KMS provider "slow-vault" is unavailable: sign with key "issuer-1" failed (no answer within 300 ms)');
        await slow.close?.();
        const down = await vaultKmsProvider.open(validated({ vaultUrl: 'http://127.0.0.1:1', vaultToken: vault.token }), context('down-vault'));
        const refused = await expect(down.health()).to.reject(KmsUnavailableError);
        expect(refused.message).to.equal('KMS provider "down-vault" is unavailable: health check failed (connection refused)');
        await down.close?.();
    });

    it('refuses malformed, refused and failing answers with clear errors', async () => {
        const on = (method: string, prefix: string, answer: { status: number; body?: unknown }) => {
            vault.override = (req) => (req.method === method && req.path.startsWith(prefix) ? answer : undefined);
        };
        const signing = (body: unknown) => on('POST', '/v1/transit/sign/', { status: 200, body });
        signing({ data: { signature: 'not-a-vault-signature' } });
        await expect(store.sign('issuer-1', Buffer.from('x'), 'ES256')).to.reject('KMS provider "vault" gave an invalid answer to sign with key "issuer-1": no vault:v<n>:<signature> value');
        signing({ data: { signature: 'vault:v1:AAAA' } });
        await expect(store.sign('issuer-1', Buffer.from('x'), 'ES256')).to.reject(/signature has 3 bytes, expected 64/);
        signing('a JSON string');
        await expect(store.sign('issuer-1', Buffer.from('x'), 'ES256')).to.reject(/the body is not a JSON object/);
        on('GET', '/v1/transit/keys/', { status: 200, body: { data: { type: 'ecdsa-p256', latest_version: 2, keys: { 1: {} } } } });
        await expect(store.publicJwk('issuer-1')).to.reject(/no public key for the latest version/);
        on('GET', '/v1/transit/keys/', { status: 200, body: { data: { type: 'ecdsa-p256', latest_version: 1, keys: { 1: { public_key: 'not a PEM' } } } } });
        await expect(store.publicJwk('issuer-1')).to.reject(/public key is not a valid SPKI key/);
        on('POST', '/v1/transit/keys/', { status: 400, body: { errors: ['invalid request'] } });
        await expect(store.create('k', 'ES256')).to.reject('KMS provider "vault" refused create of key "k" (HTTP 400, invalid request)');
        on('POST', '/v1/transit/keys/', { status: 500, body: { errors: ['internal error\nwith a stack'] } });
        const failed = await expect(store.create('k', 'ES256')).to.reject(KmsUnavailableError);
        expect(failed.message).to.equal('KMS provider "vault" is unavailable: create of key "k" failed (HTTP 500)');
        on('GET', '/v1/sys/health', { status: 501, body: { initialized: false, sealed: true } });
        await expect(store.health()).to.reject('KMS provider "vault" is unavailable: health check failed (Vault is not initialized)');
        on('GET', '/v1/sys/health', { status: 502 });
        await expect(store.health()).to.reject('KMS provider "vault" is unavailable: health check failed (HTTP 502)');
        on('GET', '/v1/sys/health', { status: 429, body: { initialized: true, sealed: false, standby: true } });
        await store.health();
    });

    it('validates its options strictly and names the token as the secret', () => {
        expect(vaultKmsProvider.secretPaths).to.equal(['vaultToken']);
        expect(vaultKmsProvider.destinationPaths).to.equal(['vaultUrl']);
        const error = (raw: unknown) => vaultKmsProvider.optionsSchema.validate(raw).error?.message;
        expect(error({ vaultUrl: 'https://vault.example:8200' })).to.equal('"vaultToken" is required');
        expect(error({ vaultToken: 't' })).to.equal('"vaultUrl" is required');
        expect(error({ vaultUrl: 'https://vault.example:8200/', vaultToken: 't' })).to.contain('must not end with a slash');
        expect(error({ vaultUrl: 'https://user:pw@vault.example', vaultToken: 't' })).to.contain('must not contain credentials');
        expect(error({ vaultUrl: 'vault.example', vaultToken: 't' })).to.contain('must be a valid uri');
        expect(error({ vaultUrl: 'https://vault.example', vaultToken: 't', mount: 'transit' })).to.equal('"mount" is not allowed');
    });
});

for (const dialect of DIALECTS) {
    describe(`key chains on a vault provider (${dialect})`, () => {
        let t: TestServer;
        let vault: VaultServer;
        let admin: string;
        const call = (method: string, url: string, payload?: object) => t.server.inject({ method, url, payload, headers: bearer(admin) });

        let folder: string;

        before(async () => {
            vault = await VaultServer.start();
            // The operator's global kms.json names the same Vault, its token a placeholder.
            folder = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-kms-vault-'));
            Fs.writeFileSync(Path.join(folder, 'kms.json'), JSON.stringify({ providers: [{ id: 'opvault', type: 'vault', vaultUrl: vault.origin, vaultToken: '${TEST_VAULT_TOKEN}' }] }));
            // A tenant the operator's folder configures, with a vault provider of its own.
            Fs.mkdirSync(Path.join(folder, 'ops'));
            Fs.writeFileSync(Path.join(folder, 'ops', 'info.json'), JSON.stringify({ name: 'Operated' }));
            Fs.writeFileSync(Path.join(folder, 'ops', 'kms.json'), JSON.stringify({ providers: [{ id: 'opsvault', type: 'vault', vaultUrl: vault.origin, vaultToken: '${TEST_VAULT_TOKEN}' }] }));
            t = await startTestServer(dialect, {
                manifest: manifestFor('hallmark-kms-vault', 'hallmark-kms-db', 'hallmark-oid4vci', 'hallmark-tenancy', 'hallmark-bundles'),
                env: { KMS_TIMEOUT_MS: '1000', OUTBOUND_URL_ALLOW_HTTP: 'true', OUTBOUND_URL_ALLOW_PRIVATE_NETWORK: 'true', CONFIG_FOLDER: folder, TEST_VAULT_TOKEN: vault.token }
            });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
        });
        after(async () => {
            await t.stop();
            await vault.stop().catch(() => undefined);
            Fs.rmSync(folder, { recursive: true, force: true });
        });

        it('holds key chains on the operator\'s vault provider from kms.json', async () => {
            const res = await call('POST', '/api/key-chain', { id: 'operator', usageType: 'access', kmsProvider: 'opvault' });
            expect(res.statusCode, res.payload).to.equal(201);
            expect([...vault.keys.keys()].some((name) => name.startsWith('kc-operator-'))).to.be.true();
            const jws = await t.server.signing.jws('acme', 'operator', { payload: { by: 'file' } });
            const [h, p, sig] = jws.split('.');
            expect(verifies((res.result as any).publicJwk, Buffer.from(`${h}.${p}`), Buffer.from(sig!, 'base64url'))).to.be.true();
        });

        it('saves the provider after a health check, the token redacted', async () => {
            const wrong = await call('PUT', '/api/key-chain/providers/config', { providers: [{ id: 'vault', type: 'vault', vaultUrl: vault.origin, vaultToken: 'hvs.not-the-token' }] });
            expect(wrong.statusCode).to.equal(400);
            expect(wrong.payload).to.contain('Vault refused the token');
            expect(wrong.payload).to.not.contain('not-the-token');
            const res = await call('PUT', '/api/key-chain/providers/config', { providers: [{ id: 'vault', type: 'vault', vaultUrl: vault.origin, vaultToken: vault.token }] });
            expect(res.statusCode, res.payload).to.equal(200);
            expect((res.result as any).providers[0].vaultToken).to.equal('[redacted]');
            const health = (await call('GET', '/api/key-chain/providers')).result as any[];
            expect(health.find((p) => p.id === 'vault')).to.include({ type: 'vault', status: 'up' });
        });

        it('holds a tenant\'s vaultUrl to the outbound policy when it is saved', async () => {
            t.server.outbound.allowPrivateNetwork = false;
            try {
                const saved = await call('PUT', '/api/key-chain/providers/config', { providers: [{ id: 'other', type: 'vault', vaultUrl: vault.origin, vaultToken: vault.token }] });
                expect(saved.statusCode, saved.payload).to.equal(400);
                expect((saved.result as any).details[0].path).to.equal('providers.0.vaultUrl');
            }
            finally {
                t.server.outbound.allowPrivateNetwork = true;
            }
        });

        it('health-checks a tenant\'s vaultUrl at save under the outbound policy (a name that moves to a private address is refused)', async () => {
            t.server.outbound.allowPrivateNetwork = false;
            const lookup = Dns.promises.lookup;
            let asked = 0;
            // DNS rebinding: the save's policy checks see a public address, the health check's connection loopback.
            (Dns.promises as any).lookup = (hostname: string, options: any) => {
                if (hostname !== 'vault.rebind.test') {
                    return lookup(hostname, options);
                }
                return Promise.resolve([{ address: ++asked <= 2 ? '93.184.216.34' : '127.0.0.1', family: 4 }]);
            };
            try {
                const saved = await call('PUT', '/api/key-chain/providers/config', { providers: [{ id: 'rebound', type: 'vault', vaultUrl: vault.origin.replace('127.0.0.1', 'vault.rebind.test'), vaultToken: vault.token }] });
                expect(saved.statusCode, saved.payload).to.equal(400);
                expect((saved.result as any).message).to.contain('KMS provider rebound cannot be used');
                expect((saved.result as any).message).to.contain('refused by the outbound policy');
            }
            finally {
                (Dns.promises as any).lookup = lookup;
                t.server.outbound.allowPrivateNetwork = true;
            }
        });

        it('holds a provider of a tenant\'s bundle import to the outbound policy at use; a tenant folder\'s own stays trusted', async () => {
            // The tenant imports a kms.json (recorded file-managed, like the operator's folder import).
            const exported = (await call('GET', '/api/config-bundles/export')).result as JsonBundle;
            const bundle = structuredClone(exported);
            bundle.documents = bundle.documents.filter((d) => d.path === 'kms.json');
            expect(bundle.documents).to.have.length(1);
            // The providers it has (their tokens are placeholders in the export) and one more.
            const spec = bundle.documents[0]!.document.spec as { providers: Array<Record<string, unknown>> };
            spec.providers = [...spec.providers.map((p) => ({ ...p, vaultToken: vault.token })), { id: 'imported', type: 'vault', vaultUrl: vault.origin, vaultToken: vault.token }];
            bundle.manifest.resources = bundle.manifest.resources.filter((r) => r.path === 'kms.json').map((r) => ({ ...r, sha256: sha256Hex(jcs(bundle.documents[0]!.document)) }));
            const planned = await call('POST', '/api/config-bundles/plan', bundle);
            expect(planned.statusCode, planned.payload).to.equal(200);
            const imported = await call('POST', `/api/config-bundles/import?planFingerprint=${(planned.result as any).planFingerprint}`, bundle);
            expect(imported.statusCode, imported.payload).to.equal(200);
            const ops = (await clientWithToken(t.server, await rootToken(t.server), { clientId: 'ops-admin', roles: ['tenant:admin'], tenantId: 'ops' })).token;

            // The policy tightens after the import: the imported provider's connections are refused, the folder's are not.
            t.server.outbound.allowPrivateNetwork = false;
            try {
                const refused = await call('POST', '/api/key-chain', { id: 'k-imported', usageType: 'access', kmsProvider: 'imported' });
                expect(refused.statusCode, refused.payload).to.equal(503);
                expect((refused.result as { message: string }).message).to.contain('refused by the outbound policy');
                const trusted = await t.server.inject({ method: 'POST', url: '/api/key-chain', headers: bearer(ops), payload: { id: 'k-ops', usageType: 'access', kmsProvider: 'opsvault' } });
                expect(trusted.statusCode, trusted.payload).to.equal(201);
            }
            finally {
                t.server.outbound.allowPrivateNetwork = true;
            }
        });

        it('makes an internal chain in Vault and issues an SD-JWT VC signed there', async () => {
            const res = await call('POST', '/api/key-chain', { id: 'issuer', usageType: 'attestation', kmsProvider: 'vault', subject: { commonName: 'Acme', country: 'DE' } });
            expect(res.statusCode, res.payload).to.equal(201);
            expect((res.result as any).kmsProvider).to.equal('vault');
            expect([...vault.keys.keys()].some((name) => name.startsWith('kc-issuer-'))).to.be.true();
            const payload = await issueSdJwtWithKeyChain(t.server, admin, 'issuer');
            expect(payload.vct).to.equal('urn:eudi:pid:1');
        });

        it('references an existing Vault key, proven by a challenge signature; a wrong public key is refused', async () => {
            vault.createKey('operator-key');
            const pem = vault.keys.get('operator-key')!.versions[0]!.key;
            const { x, y } = Crypto.createPublicKey(pem).export({ format: 'jwk' });
            const other = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' });
            const wrong = await call('POST', '/api/key-chain', { id: 'ext-wrong', usageType: 'access', keySource: { type: 'external-reference', provider: 'vault', externalKeyId: 'operator-key', publicJwk: { kty: 'EC', crv: 'P-256', x: other.x, y: other.y } } });
            expect(wrong.statusCode, wrong.payload).to.equal(400);
            expect((wrong.result as any).message).to.contain('does not match the stated public key');
            const offCurve = await call('POST', '/api/key-chain', { id: 'ext-off-curve', usageType: 'access', keySource: { type: 'external-reference', provider: 'vault', externalKeyId: 'operator-key', publicJwk: { kty: 'EC', crv: 'P-256', x: 'AAAA', y: 'AAAA' } } });
            expect(offCurve.statusCode, offCurve.payload).to.equal(400);
            expect((offCurve.result as any).details[0].path).to.equal('keySource.publicJwk');
            const missing = await call('POST', '/api/key-chain', { id: 'ext-missing', usageType: 'access', keySource: { type: 'external-reference', provider: 'vault', externalKeyId: 'no-such-key', publicJwk: { kty: 'EC', crv: 'P-256', x, y } } });
            expect(missing.statusCode, missing.payload).to.equal(404);
            const res = await call('POST', '/api/key-chain', { id: 'ext', usageType: 'access', type: 'standalone', keySource: { type: 'external-reference', provider: 'vault', externalKeyId: 'operator-key', publicJwk: { kty: 'EC', crv: 'P-256', x, y } } });
            expect(res.statusCode, res.payload).to.equal(201);
            expect((res.result as any).publicJwk).to.include({ x, y });
            const jws = await t.server.signing.jws('acme', 'ext', { payload: { ok: true } });
            const [h, p, s] = jws.split('.');
            expect(verifies({ kty: 'EC', crv: 'P-256', x: x!, y: y! }, Buffer.from(`${h}.${p}`), Buffer.from(s!, 'base64url'))).to.be.true();
            // Deleting the chain leaves the referenced key to its owner.
            expect((await call('DELETE', '/api/key-chain/ext')).statusCode).to.equal(204);
            expect(vault.keys.has('operator-key')).to.be.true();
        });

        it('deletes a generated key only with its key chain, and rotates to a new Vault key', async () => {
            const res = await call('POST', '/api/key-chain', { id: 'temp', usageType: 'access', kmsProvider: 'vault' });
            expect(res.statusCode, res.payload).to.equal(201);
            const first = [...vault.keys.keys()].find((name) => name.startsWith('kc-temp-'))!;
            const rotated = await call('POST', '/api/key-chain/temp/rotate');
            expect(rotated.statusCode, rotated.payload).to.be.within(200, 201);
            const names = [...vault.keys.keys()].filter((name) => name.startsWith('kc-temp-'));
            expect(names).to.have.length(2);
            expect(vault.keys.get(first)!.deletionAllowed).to.be.false();
            expect((await call('DELETE', '/api/key-chain/temp')).statusCode).to.equal(204);
            expect([...vault.keys.keys()].filter((name) => name.startsWith('kc-temp-'))).to.equal([]);
        });

        it('leaves an exported key to its owner when the chain imported elsewhere from the export is deleted', async () => {
            const made = await call('POST', '/api/key-chain', { id: 'moved', usageType: 'access', kmsProvider: 'vault' });
            expect(made.statusCode, made.payload).to.equal(201);
            const exported = await t.server.registry.export({ tenantId: 'acme', clientId: 'system:test', roles: [] });
            const keySource = (exported.documents.find((d) => d.kind === 'KeyChain' && d.id === 'moved')!.document.spec as any).keySource;
            expect(keySource.externalKeyId).to.match(/^kc-moved-/);
            // A second tenant (a staging copy) holds the exported chain: a reference to acme's key in the same Vault.
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme-copy');
            const copyAdmin = (await clientWithToken(t.server, root, { clientId: 'acme-copy-admin', roles: ['tenant:admin'], tenantId: 'acme-copy' })).token;
            const copy = (method: string, url: string, payload?: object) => t.server.inject({ method, url, payload, headers: bearer(copyAdmin) });
            expect((await copy('PUT', '/api/key-chain/providers/config', { providers: [{ id: 'vault', type: 'vault', vaultUrl: vault.origin, vaultToken: vault.token }] })).statusCode).to.equal(200);
            const imported = await copy('POST', '/api/key-chain', { id: 'moved', usageType: 'access', type: 'standalone', keySource });
            expect(imported.statusCode, imported.payload).to.equal(201);
            // Exported again, the copy names the key as the provider knows it.
            const again = await t.server.registry.export({ tenantId: 'acme-copy', clientId: 'system:test', roles: [] });
            expect((again.documents.find((d) => d.kind === 'KeyChain' && d.id === 'moved')!.document.spec as any).keySource).to.equal(keySource);
            expect((await copy('DELETE', '/api/key-chain/moved')).statusCode).to.equal(204);
            expect(vault.keys.has(keySource.externalKeyId)).to.be.true();
            const jws = await t.server.signing.jws('acme', 'moved', { payload: { still: 'signing' } });
            const [h, p, s] = jws.split('.');
            expect(verifies((made.result as any).publicJwk, Buffer.from(`${h}.${p}`), Buffer.from(s!, 'base64url'))).to.be.true();
            // acme's own deletion still removes the key it generated.
            expect((await call('DELETE', '/api/key-chain/moved')).statusCode).to.equal(204);
            expect(vault.keys.has(keySource.externalKeyId)).to.be.false();
        });

        it('answers 503 naming the provider when Vault refuses the token, is sealed, slow or down, within KMS_TIMEOUT_MS', async () => {
            // The token is revoked in Vault after the configuration was saved.
            const token = vault.token;
            vault.token = 'hvs.another-token';
            const revoked = await call('POST', '/api/key-chain', { id: 'revoked', usageType: 'access', kmsProvider: 'vault' });
            expect(revoked.statusCode).to.equal(503);
            expect((revoked.result as any).message).to.contain('KMS provider vault is unavailable');
            expect((revoked.result as any).message).to.contain('Vault refused the token');
            expect(revoked.payload).to.not.contain(token);
            vault.token = token;
            vault.sealed = true;
            const sealed = await call('POST', '/api/key-chain', { id: 'sealed', usageType: 'access', kmsProvider: 'vault' });
            expect(sealed.statusCode).to.equal(503);
            expect((sealed.result as any).message).to.contain('vault');
            expect((sealed.result as any).message).to.contain('Vault is sealed');
            vault.sealed = false;
            vault.delayMs = 5000;
            const started = Date.now();
            const slow = await call('POST', '/api/key-chain', { id: 'slow', usageType: 'access', kmsProvider: 'vault' });
            expect(slow.statusCode).to.equal(503);
            expect((slow.result as any).message).to.contain('vault');
            expect(Date.now() - started).to.be.below(3000);
            vault.delayMs = 0;
            await vault.stop();
            const down = await call('POST', '/api/key-chain', { id: 'down', usageType: 'access', kmsProvider: 'vault' });
            expect(down.statusCode).to.equal(503);
            expect((down.result as any).message).to.contain('KMS provider vault is unavailable');
            const health = (await call('GET', '/api/key-chain/providers')).result as any[];
            expect(health.find((p) => p.id === 'vault').status).to.equal('down');
        });
    });
}
