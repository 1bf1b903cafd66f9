import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import Pino from 'pino';
import { ecdsaDerToRaw, ecP256JwkFromSpki } from '../../lib/kms/jwk';
import { KmsUnavailableError, type KeyStore, type KmsOpenContext, type PublicJwk } from '../../lib/kms/types';
import { cloudKmsProvider, type CloudKmsOptions } from '../../plugins/kms-cloud/provider';
import { AwsKmsServer } from '../fixtures/aws-kms-server';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { issueSdJwtWithKeyChain } from '../helpers/kms-issuance';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';
import { jcs, sha256Hex } from '../../lib/config-import/plan';
import type { JsonBundle } from '../../plugins/bundles/bundle';

export const lab = Lab.script();
const { describe, it, before, after, afterEach } = lab;

const ACCESS_KEY_ID = 'AKIAHALLMARKTEST0001';
const SECRET = 'cloud-kms-test-secret-access-key-0123456789';

const context = (providerId: string, timeoutMs = 5000): KmsOpenContext => ({ tenantId: 'acme', providerId, log: Pino({ level: 'silent' }), timeoutMs, services: {} });

const validated = (raw: unknown): CloudKmsOptions => {
    const { error, value } = cloudKmsProvider.optionsSchema.validate(raw);
    if (error) {
        throw error;
    }
    return value;
};

const verifies = (publicJwk: PublicJwk, data: Buffer, signature: Uint8Array): boolean =>
    Crypto.verify('sha256', data, { key: Crypto.createPublicKey({ key: publicJwk as Crypto.JsonWebKey, format: 'jwk' }), dsaEncoding: 'ieee-p1363' }, signature);

/** The SDK's own endpoint setting (AWS_ENDPOINT_URL_KMS) points it at the test server; no instance metadata probes. */
const useEndpoint = (origin: string | undefined): void => {
    if (origin) {
        process.env.AWS_ENDPOINT_URL_KMS = origin;
    }
    else {
        delete process.env.AWS_ENDPOINT_URL_KMS;
    }
};
process.env.AWS_EC2_METADATA_DISABLED = 'true';

describe('cloud-kms provider against the AWS KMS test server', () => {
    let aws: AwsKmsServer;
    let store: KeyStore;
    const stores: KeyStore[] = [];
    const open = async (options: Record<string, unknown>, providerId = 'aws', timeoutMs?: number) => {
        const opened = await cloudKmsProvider.open(validated({ region: 'eu-central-1', ...options }), context(providerId, timeoutMs));
        stores.push(opened);
        return opened;
    };
    before(async () => {
        aws = await AwsKmsServer.start('eu-central-1', ACCESS_KEY_ID, SECRET);
        useEndpoint(aws.origin);
        store = await open({ accessKeyId: ACCESS_KEY_ID, secretAccessKey: SECRET });
    });
    after(async () => {
        for (const s of stores) {
            await s.close?.();
        }
        useEndpoint(undefined);
        await aws.stop();
    });
    afterEach(() => {
        aws.delayMs = 0;
        aws.failWith = undefined;
        aws.override = undefined;
    });

    it('creates an ECC_NIST_P256 key under an alias, signs (DER turned into r || s, verified by node:crypto), reads the public key', async () => {
        const publicJwk = await store.create('kc-issuer-1', 'ES256');
        expect(publicJwk).to.only.include(['kty', 'crv', 'x', 'y']);
        const keyId = aws.aliases.get('alias/hallmark/kc-issuer-1')!;
        expect(aws.keys.get(keyId)).to.include({ spec: 'ECC_NIST_P256', usage: 'SIGN_VERIFY', state: 'Enabled' });
        const data = Buffer.from('header.payload');
        const signature = await store.sign('kc-issuer-1', data, 'ES256');
        expect(signature.length).to.equal(64);
        expect(verifies(publicJwk, data, signature)).to.be.true();
        expect(verifies(publicJwk, Buffer.from('other'), signature)).to.be.false();
        expect(await store.publicJwk('kc-issuer-1')).to.equal(publicJwk);
        // By key id and by ARN the same key answers.
        expect(await store.publicJwk(keyId)).to.equal(publicJwk);
        expect(await store.publicJwk(aws.keys.get(keyId)!.arn)).to.equal(publicJwk);
    });

    it('signs messages over 4096 bytes as their SHA-256 digest', async () => {
        const publicJwk = await store.create('big', 'ES256');
        const data = Crypto.randomBytes(6000);
        expect(verifies(publicJwk, data, await store.sign('big', data, 'ES256'))).to.be.true();
    });

    it('schedules the deletion of a key and frees its alias; deleting it again is fine', async () => {
        await store.create('doomed', 'ES256');
        const keyId = aws.aliases.get('alias/hallmark/doomed')!;
        await store.delete('doomed');
        expect(aws.aliases.has('alias/hallmark/doomed')).to.be.false();
        expect(aws.keys.get(keyId)!.state).to.equal('PendingDeletion');
        await store.delete('doomed');
        await expect(store.sign('doomed', Buffer.from('x'), 'ES256')).to.reject('Key doomed not found in KMS provider aws');
        await expect(store.sign(keyId, Buffer.from('x'), 'ES256')).to.reject(`Key ${keyId} of KMS provider aws is disabled or pending deletion`);
    });

    it('reports health; AWS-side failures are unavailable', async () => {
        await store.health();
        aws.failWith = 'KMSInternalException';
        const err = await expect(store.health()).to.reject(KmsUnavailableError);
        expect(err.message).to.equal('KMS provider "aws" is unavailable: health check failed (KMSInternalException)');
    });

    it('refuses keys of another kind and algorithms other than ES256', async () => {
        const symmetric = aws.createKey('SYMMETRIC_DEFAULT', 'ENCRYPT_DECRYPT');
        await expect(store.sign(symmetric, Buffer.from('x'), 'ES256')).to.reject(`Key ${symmetric} in KMS provider aws is not an ECC_NIST_P256 SIGN_VERIFY key`);
        await expect(store.create('k', 'RS256' as 'ES256')).to.reject(/Algorithm RS256 is not supported/);
        await expect(store.create(symmetric, 'ES256')).to.reject(/needs a name, not an AWS key id/);
    });

    it('answers refused credentials as unavailable, without the secret', async () => {
        const wrongSecret = await open({ accessKeyId: ACCESS_KEY_ID, secretAccessKey: 'not-the-secret-access-key-value' }, 'aws-a');
        const err = await expect(wrongSecret.create('k', 'ES256')).to.reject(KmsUnavailableError);
        expect(err.message).to.equal('KMS provider "aws-a" is unavailable: AWS KMS refused the credentials for create of key "k" (InvalidSignatureException); check accessKeyId, secretAccessKey and the key policy');
        const unknownKey = await open({ accessKeyId: 'AKIAUNKNOWNKEY000001', secretAccessKey: SECRET }, 'aws-b');
        const health = await expect(unknownKey.health()).to.reject(KmsUnavailableError);
        expect(health.message).to.contain('(UnrecognizedClientException)');
        expect(health.message).to.not.contain(SECRET);
    });

    it('refuses malformed answers, a taken alias and other refusals with clear errors; denied ListKeys is still healthy', async () => {
        const on = (operation: string, answer: { status: number; body?: unknown; headers?: Record<string, string> }) => {
            aws.override = (req) => (req.headers['x-amz-target'] === `TrentService.${operation}` ? answer : undefined);
        };
        on('Sign', { status: 200, body: { KeyId: 'x', Signature: Crypto.randomBytes(64).toString('base64'), SigningAlgorithm: 'ECDSA_SHA_256' } });
        await expect(store.sign('kc-issuer-1', Buffer.from('x'), 'ES256')).to.reject('KMS provider "aws" gave an invalid answer to sign with key "kc-issuer-1": signature is not a DER ECDSA signature');
        on('GetPublicKey', { status: 200, body: { KeyId: 'x', KeySpec: 'ECC_NIST_P256', KeyUsage: 'SIGN_VERIFY', PublicKey: 'AAAA' } });
        await expect(store.publicJwk('kc-issuer-1')).to.reject(/gave an invalid answer to read of key "kc-issuer-1": public key is not a valid SPKI key/);
        const denied = { status: 400, body: { __type: 'AccessDeniedException', message: 'not authorized' }, headers: { 'x-amzn-errortype': 'AccessDeniedException:' } };
        on('ListKeys', denied);
        await store.health();
        on('Sign', denied);
        await expect(store.sign('kc-issuer-1', Buffer.from('x'), 'ES256')).to.reject(KmsUnavailableError, /refused the credentials for sign with key "kc-issuer-1" \(AccessDeniedException\)/);
        on('CreateKey', { status: 400, body: { __type: 'TagException', message: 'bad tag' }, headers: { 'x-amzn-errortype': 'TagException:' } });
        await expect(store.create('tagged', 'ES256')).to.reject('KMS provider "aws" refused create of key "tagged" (TagException, HTTP 400)');
        aws.override = undefined;
        // A taken alias: the new key is not left behind.
        await store.create('twice', 'ES256');
        const keys = aws.keys.size;
        await expect(store.create('twice', 'ES256')).to.reject(/refused create of key "twice" \(AlreadyExistsException, HTTP 400\)/);
        expect(aws.keys.size).to.equal(keys + 1);
        expect([...aws.keys.values()].at(-1)!.state).to.equal('PendingDeletion');
        // Deleting by key id twice: the second finds it pending deletion already.
        const keyId = aws.createKey();
        await store.delete(keyId);
        await store.delete(keyId);
        expect(aws.keys.get(keyId)!.state).to.equal('PendingDeletion');
        await expect(store.sign('', Buffer.from('x'), 'ES256')).to.reject(/invalid kid/);
    });

    it('uses the SDK credential chain without static credentials', async () => {
        const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };
        process.env.AWS_ACCESS_KEY_ID = ACCESS_KEY_ID;
        process.env.AWS_SECRET_ACCESS_KEY = SECRET;
        try {
            const chained = await open({}, 'aws-chain');
            const publicJwk = await chained.create('chained', 'ES256');
            expect(verifies(publicJwk, Buffer.from('x'), await chained.sign('chained', Buffer.from('x'), 'ES256'))).to.be.true();
        }
        finally {
            for (const [name, value] of [['AWS_ACCESS_KEY_ID', saved.id], ['AWS_SECRET_ACCESS_KEY', saved.secret]] as const) {
                if (value === undefined) {
                    delete process.env[name];
                }
                else {
                    process.env[name] = value;
                }
            }
        }
    });

    it('gives up on a slow KMS after timeoutMs, and fails fast when it is down', async () => {
        const slow = await open({ accessKeyId: ACCESS_KEY_ID, secretAccessKey: SECRET }, 'slow-aws', 300);
        aws.delayMs = 3000;
        const started = Date.now();
        const err = await expect(slow.sign('kc-issuer-1', Buffer.from('x'), 'ES256')).to.reject(KmsUnavailableError);
        expect(Date.now() - started).to.be.below(2000);
        expect(err.message).to.equal('KMS provider "slow-aws" is unavailable: sign with key "kc-issuer-1" failed (no answer within 300 ms)');
        aws.delayMs = 0;
        useEndpoint('http://127.0.0.1:1');
        try {
            const down = await open({ accessKeyId: ACCESS_KEY_ID, secretAccessKey: SECRET }, 'down-aws');
            const refused = await expect(down.health()).to.reject(KmsUnavailableError);
            expect(refused.message).to.equal('KMS provider "down-aws" is unavailable: health check failed (network error ECONNREFUSED)');
        }
        finally {
            useEndpoint(aws.origin);
        }
    });

    it('validates its options strictly and names the secret access key as the secret', () => {
        expect(cloudKmsProvider.secretPaths).to.equal(['secretAccessKey']);
        const error = (raw: unknown) => cloudKmsProvider.optionsSchema.validate(raw).error?.message;
        expect(error({})).to.equal('"region" is required');
        expect(error({ region: 'eu-central-1.evil.example' })).to.contain('AWS region');
        expect(error({ region: 'eu-central-1', accessKeyId: ACCESS_KEY_ID })).to.contain('"value" contains [accessKeyId] without its required peers [secretAccessKey]');
        expect(error({ region: 'eu-central-1', secretAccessKey: SECRET })).to.contain('without its required peers [accessKeyId]');
        expect(error({ region: 'eu-central-1', endpoint: 'http://x' })).to.equal('"endpoint" is not allowed');
        expect(error({ region: 'us-gov-west-1', accessKeyId: ACCESS_KEY_ID, secretAccessKey: SECRET })).to.be.undefined();
    });

    it('turns DER ECDSA signatures into r || s and refuses anything else', () => {
        const { privateKey } = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
        for (let i = 0; i < 20; i++) {
            const data = Crypto.randomBytes(16);
            const der = Crypto.sign('sha256', data, { key: privateKey, dsaEncoding: 'der' });
            expect(Crypto.verify('sha256', data, { key: privateKey, dsaEncoding: 'ieee-p1363' }, ecdsaDerToRaw(der))).to.be.true();
        }
        expect(() => ecdsaDerToRaw(Buffer.alloc(64, 1))).to.throw('signature is not a DER ECDSA signature');
        // Known vectors: r with its DER sign byte (33 bytes, high bit set), s short (31 bytes) and r a single byte.
        const r = Buffer.concat([Buffer.from([0x80]), Buffer.alloc(31, 0x11)]);
        const shortS = Buffer.alloc(31, 0x22);
        const der = Buffer.concat([Buffer.from([0x30, 2 + 33 + 2 + 31, 0x02, 33, 0x00]), r, Buffer.from([0x02, 31]), shortS]);
        expect(Buffer.from(ecdsaDerToRaw(der)).toString('hex')).to.equal(`${r.toString('hex')}00${shortS.toString('hex')}`);
        const fullS = Buffer.concat([Buffer.from([0x7f]), Buffer.alloc(31, 0x33)]);
        const tiny = Buffer.concat([Buffer.from([0x30, 2 + 1 + 2 + 32, 0x02, 0x01, 0x01, 0x02, 32]), fullS]);
        expect(Buffer.from(ecdsaDerToRaw(tiny)).toString('hex')).to.equal(`${'00'.repeat(31)}01${fullS.toString('hex')}`);
        const spki = (key: Crypto.KeyObject) => Crypto.createPublicKey(key).export({ format: 'der', type: 'spki' });
        expect(() => ecP256JwkFromSpki(spki(Crypto.generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey))).to.throw('public key is not an EC P-256 key');
        expect(() => ecP256JwkFromSpki(spki(Crypto.generateKeyPairSync('ed25519').privateKey))).to.throw('public key is not an EC P-256 key');
        expect(() => ecP256JwkFromSpki(Buffer.from('junk'))).to.throw('public key is not a valid SPKI key');
        expect(ecP256JwkFromSpki(spki(privateKey))).to.include({ kty: 'EC', crv: 'P-256' });
        expect(() => ecdsaDerToRaw(Buffer.from('3006020101020101ff', 'hex'))).to.throw('signature is not a DER ECDSA signature');
        expect(() => ecdsaDerToRaw(Buffer.concat([Buffer.from('30260221', 'hex'), Buffer.alloc(33, 1), Buffer.from('020101', 'hex')]))).to.throw('signature is not a P-256 ECDSA signature');
    });
});

for (const dialect of DIALECTS) {
    describe(`key chains on a cloud-kms provider (${dialect})`, () => {
        let t: TestServer;
        let aws: AwsKmsServer;
        let admin: string;
        const provider = { id: 'aws', type: 'cloud-kms', region: 'eu-central-1', accessKeyId: ACCESS_KEY_ID, secretAccessKey: SECRET };
        const call = (method: string, url: string, payload?: object) => t.server.inject({ method, url, payload, headers: bearer(admin) });

        before(async () => {
            aws = await AwsKmsServer.start('eu-central-1', ACCESS_KEY_ID, SECRET);
            useEndpoint(aws.origin);
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-kms-cloud', 'hallmark-kms-db', 'hallmark-oid4vci', 'hallmark-tenancy', 'hallmark-bundles'), env: { KMS_TIMEOUT_MS: '1000' } });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
        });
        after(async () => {
            await t.stop();
            useEndpoint(undefined);
            await aws.stop().catch(() => undefined);
        });

        it('saves the provider after a health check, the secret redacted; the service\'s own AWS identity stays the operator\'s', async () => {
            const chain = await call('PUT', '/api/key-chain/providers/config', { providers: [{ id: 'aws', type: 'cloud-kms', region: 'eu-central-1' }] });
            expect(chain.statusCode).to.equal(403);
            const wrong = await call('PUT', '/api/key-chain/providers/config', { providers: [{ ...provider, secretAccessKey: 'not-the-secret-access-key-value' }] });
            expect(wrong.statusCode).to.equal(400);
            expect(wrong.payload).to.contain('refused the credentials');
            expect(wrong.payload).to.not.contain('not-the-secret');
            const res = await call('PUT', '/api/key-chain/providers/config', { providers: [provider] });
            expect(res.statusCode, res.payload).to.equal(200);
            expect((res.result as any).providers[0].secretAccessKey).to.equal('[redacted]');
            const health = (await call('GET', '/api/key-chain/providers')).result as any[];
            expect(health.find((p) => p.id === 'aws')).to.include({ type: 'cloud-kms', status: 'up' });
        });

        it('refuses a bundle import by the tenant that would sign with the service\'s own AWS identity', async () => {
            const exported = (await call('GET', '/api/config-bundles/export')).result as JsonBundle;
            const bundle = structuredClone(exported);
            bundle.documents = bundle.documents.filter((d) => d.path === 'kms.json');
            (bundle.documents[0]!.document.spec as any).providers = [{ id: 'aws-own', type: 'cloud-kms', region: 'eu-central-1' }];
            bundle.manifest.resources = bundle.manifest.resources.filter((r) => r.path === 'kms.json').map((r) => ({ ...r, sha256: sha256Hex(jcs(bundle.documents[0]!.document)) }));
            // The service runs with an AWS identity of its own (environment, instance role).
            process.env.AWS_ACCESS_KEY_ID = ACCESS_KEY_ID;
            process.env.AWS_SECRET_ACCESS_KEY = SECRET;
            // A client named like the operator's folder import is still an API client.
            const spoofed = (await clientWithToken(t.server, await rootToken(t.server), { clientId: 'system:config-import', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            try {
                for (const token of [admin, spoofed]) {
                    const as = (method: string, url: string, payload?: object) => t.server.inject({ method, url, payload, headers: bearer(token) });
                    const planned = await as('POST', '/api/config-bundles/plan', bundle);
                    const fingerprint = (planned.result as any).planFingerprint ?? '0'.repeat(64);
                    const imported = await as('POST', `/api/config-bundles/import?planFingerprint=${fingerprint}`, bundle);
                    expect(imported.statusCode, imported.payload).to.be.within(400, 499);
                }
            }
            finally {
                delete process.env.AWS_ACCESS_KEY_ID;
                delete process.env.AWS_SECRET_ACCESS_KEY;
            }
            const config = (await call('GET', '/api/key-chain/providers/config')).result as any;
            expect(config.providers.map((p: { id: string }) => p.id)).to.not.include('aws-own');
        });

        it('makes an internal chain in AWS KMS and issues an SD-JWT VC signed there', async () => {
            const res = await call('POST', '/api/key-chain', { id: 'issuer', usageType: 'attestation', kmsProvider: 'aws', subject: { commonName: 'Acme', country: 'DE' } });
            expect(res.statusCode, res.payload).to.equal(201);
            expect([...aws.aliases.keys()].some((alias) => alias.startsWith('alias/hallmark/kc-issuer-'))).to.be.true();
            const payload = await issueSdJwtWithKeyChain(t.server, admin, 'issuer');
            expect(payload.vct).to.equal('urn:eudi:pid:1');
        });

        it('references existing keys by key id and by ARN, proven by a challenge signature; a wrong public key is refused', async () => {
            const keyId = aws.createKey();
            const spki = Crypto.createPublicKey(aws.keys.get(keyId)!.privateKey!);
            const { x, y } = spki.export({ format: 'jwk' });
            const publicJwk = { kty: 'EC', crv: 'P-256', x, y };
            const other = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' });
            const wrong = await call('POST', '/api/key-chain', { id: 'ext-wrong', usageType: 'access', keySource: { type: 'external-reference', provider: 'aws', externalKeyId: keyId, publicJwk: { ...publicJwk, x: other.x, y: other.y } } });
            expect(wrong.statusCode, wrong.payload).to.equal(400);
            const missing = await call('POST', '/api/key-chain', { id: 'ext-missing', usageType: 'access', keySource: { type: 'external-reference', provider: 'aws', externalKeyId: Crypto.randomUUID(), publicJwk } });
            expect(missing.statusCode, missing.payload).to.equal(404);
            for (const [id, externalKeyId] of [['ext-id', keyId], ['ext-arn', aws.keys.get(keyId)!.arn]]) {
                const res = await call('POST', '/api/key-chain', { id, usageType: 'access', keySource: { type: 'external-reference', provider: 'aws', externalKeyId, publicJwk } });
                expect(res.statusCode, res.payload).to.equal(201);
                const jws = await t.server.signing.jws('acme', id!, { payload: { id } });
                const [h, p, s] = jws.split('.');
                expect(verifies(publicJwk as PublicJwk, Buffer.from(`${h}.${p}`), Buffer.from(s!, 'base64url'))).to.be.true();
                expect((await call('DELETE', `/api/key-chain/${id}`)).statusCode).to.equal(204);
            }
            // Referenced keys belong to their owner: deleting the chains scheduled nothing.
            expect(aws.keys.get(keyId)!.state).to.equal('Enabled');
        });

        it('rotates to a new AWS key, and schedules the deletion of both when the key chain is deleted', async () => {
            expect((await call('POST', '/api/key-chain', { id: 'temp', usageType: 'access', kmsProvider: 'aws' })).statusCode).to.equal(201);
            const rotated = await call('POST', '/api/key-chain/temp/rotate');
            expect(rotated.statusCode, rotated.payload).to.be.within(200, 201);
            const aliases = [...aws.aliases.keys()].filter((a) => a.startsWith('alias/hallmark/kc-temp-'));
            expect(aliases).to.have.length(2);
            const keyIds = aliases.map((a) => aws.aliases.get(a)!);
            expect((await call('DELETE', '/api/key-chain/temp')).statusCode).to.equal(204);
            expect(keyIds.map((id) => aws.keys.get(id)!.state)).to.equal(['PendingDeletion', 'PendingDeletion']);
            expect(aliases.some((a) => aws.aliases.has(a))).to.be.false();
        });

        it('answers 503 naming the provider when AWS KMS refuses the credentials, is slow or down, within KMS_TIMEOUT_MS', async () => {
            // The access key is deactivated in AWS after the configuration was saved.
            aws.credentials.delete(ACCESS_KEY_ID);
            const refused = await call('POST', '/api/key-chain', { id: 'refused', usageType: 'access', kmsProvider: 'aws' });
            expect(refused.statusCode).to.equal(503);
            expect((refused.result as any).message).to.contain('AWS KMS refused the credentials');
            expect(refused.payload).to.not.contain(SECRET);
            aws.credentials.set(ACCESS_KEY_ID, SECRET);
            aws.delayMs = 5000;
            const started = Date.now();
            const slow = await call('POST', '/api/key-chain', { id: 'slow', usageType: 'access', kmsProvider: 'aws' });
            expect(slow.statusCode).to.equal(503);
            expect((slow.result as any).message).to.contain('aws');
            expect(Date.now() - started).to.be.below(3000);
            aws.delayMs = 0;
            await aws.stop();
            const down = await call('POST', '/api/key-chain', { id: 'down', usageType: 'access', kmsProvider: 'aws' });
            expect(down.statusCode).to.equal(503);
            expect((down.result as any).message).to.contain('KMS provider aws is unavailable');
            const health = (await call('GET', '/api/key-chain/providers')).result as any[];
            expect(health.find((p) => p.id === 'aws').status).to.equal('down');
        });
    });
}
