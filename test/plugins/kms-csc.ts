import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import Pino from 'pino';
import { KmsUnavailableError, type KmsOpenContext, type PublicJwk } from '../../lib/kms/types';
import { checkTenantKmsConfig } from '../../plugins/kms/tenant-policy';
import { kmsConfigKind } from '../../resources/kms-config';
import { cscKmsProvider, type CscKeyStore, type CscKmsOptions } from '../../plugins/kms-csc/provider';
import { CscServer, type CscCredential } from '../fixtures/csc-server';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { issueSdJwtWithKeyChain } from '../helpers/kms-issuance';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after, afterEach } = lab;

const SECRET = 'csc-client-secret-0123456789';

const context = (providerId: string, timeoutMs = 5000): KmsOpenContext => ({ tenantId: 'acme', providerId, log: Pino({ level: 'silent' }), timeoutMs, services: {} });

const validated = (raw: unknown): CscKmsOptions => {
    const { error, value } = cscKmsProvider.optionsSchema.validate(raw);
    if (error) {
        throw error;
    }
    return value;
};

const verifies = (publicJwk: PublicJwk, data: Buffer, signature: Uint8Array): boolean =>
    Crypto.verify('sha256', data, { key: Crypto.createPublicKey({ key: publicJwk as Crypto.JsonWebKey, format: 'jwk' }), dsaEncoding: 'ieee-p1363' }, signature);

const publicOf = (credential: CscCredential): PublicJwk => {
    const { x, y } = Crypto.createPublicKey(credential.privateKey).export({ format: 'jwk' });
    return { kty: 'EC', crv: 'P-256', x: x!, y: y! };
};

describe('csc KMS provider against the CSC API v2 test server', () => {
    let csc: CscServer;
    let seal: CscCredential;
    let explicit: CscCredential;
    const stores: CscKeyStore[] = [];
    const open = async (extra: Record<string, unknown> = {}, providerId = 'qtsp', timeoutMs?: number) => {
        const store = await cscKmsProvider.open(validated({ baseUrl: csc.origin, tokenUrl: csc.tokenUrl, clientId: 'hallmark', clientSecret: SECRET, ...extra }), context(providerId, timeoutMs)) as CscKeyStore;
        stores.push(store);
        return store;
    };
    before(async () => {
        csc = await CscServer.start('hallmark', SECRET);
        seal = await csc.addCredential('seal-1');
        explicit = await csc.addCredential('seal-pin', 'explicit');
    });
    after(async () => {
        for (const store of stores) {
            await store.close();
        }
        await csc.stop();
    });
    afterEach(() => {
        csc.delayMs = 0;
        csc.rawSignatures = false;
        csc.override = undefined;
    });

    it('takes the first listed credential, reads its certificate chain and key, signs with signHash (verified by node:crypto)', async () => {
        const store = await open({ scope: 'service' });
        await store.health();
        expect(csc.calls.slice(0, 2)).to.equal(['credentials/list', 'credentials/info']);
        const publicJwk = await store.publicJwk('seal-1');
        expect(publicJwk).to.equal(publicOf(seal));
        expect(await store.certificates('seal-1')).to.equal(seal.certificates);
        const data = Buffer.from('header.payload');
        for (const raw of [false, true]) {
            csc.rawSignatures = raw;
            const signature = await store.sign('seal-1', data, 'ES256');
            expect(signature.length).to.equal(64);
            expect(verifies(publicJwk, data, signature)).to.be.true();
            expect(verifies(publicJwk, Buffer.from('other'), signature)).to.be.false();
        }
        expect(csc.tokenRequests).to.equal(1);
    });

    it('never creates keys, never deletes the credential, and signs only with its own credential', async () => {
        const store = await open({ credentialId: 'seal-1' });
        await expect(store.create('k', 'ES256')).to.reject(/never creates keys/);
        await store.delete('seal-1');
        expect(csc.credentials.has('seal-1')).to.be.true();
        await expect(store.sign('seal-pin', Buffer.from('x'), 'ES256')).to.reject('Key seal-pin not found in KMS provider qtsp: it signs with the credential seal-1 only');
        await expect(store.sign('seal-1', Buffer.from('x'), 'RS256' as 'ES256')).to.reject(/Algorithm RS256 is not supported/);
        const unknown = await open({ credentialId: 'no-such-credential' });
        await expect(unknown.publicJwk('no-such-credential')).to.reject('Credential no-such-credential not found at KMS provider qtsp');
    });

    it('authorizes each signature with credentials/authorize and the PIN, or uses a static SAD', async () => {
        const authorizing = await open({ credentialId: 'seal-pin', useAuthorizeEndpoint: true, authorizeAuthData: [{ id: 'PIN', value: csc.pin }] });
        const data = Buffer.from('needs a SAD');
        csc.calls.length = 0;
        expect(verifies(publicOf(explicit), data, await authorizing.sign('seal-pin', data, 'ES256'))).to.be.true();
        expect(csc.calls).to.equal(['credentials/authorize', 'signatures/signHash']);
        const staticSad = await open({ credentialId: 'seal-pin', sad: csc.staticSad });
        expect(verifies(publicOf(explicit), data, await staticSad.sign('seal-pin', data, 'ES256'))).to.be.true();
        // Without any SAD an explicit credential refuses; a wrong PIN is refused at authorize: the provider is unusable.
        const none = await open({ credentialId: 'seal-pin' }, 'qtsp-nosad');
        const refused = await expect(none.sign('seal-pin', data, 'ES256')).to.reject(KmsUnavailableError);
        expect(refused.message).to.equal('KMS provider "qtsp-nosad" is unavailable: the signing service refused the authorization for sign with credential "seal-pin" (HTTP 400, invalid_request: Invalid parameter SAD); check sad or authorizeAuthData');
        const wrongPin = await open({ credentialId: 'seal-pin', useAuthorizeEndpoint: true, authorizeAuthData: [{ id: 'PIN', value: '000000' }] }, 'qtsp-pin');
        const pin = await expect(wrongPin.sign('seal-pin', data, 'ES256')).to.reject(KmsUnavailableError);
        expect(pin.message).to.contain('refused the authorization for authorization of credential "seal-pin"');
        expect(pin.message).to.not.contain('000000');
    });

    it('fetches the token again once when the service forgets it; refused client credentials are unavailable without the secret', async () => {
        const store = await open({ credentialId: 'seal-1' });
        await store.sign('seal-1', Buffer.from('a'), 'ES256');
        const before = csc.tokenRequests;
        csc.revokeTokens();
        await store.sign('seal-1', Buffer.from('b'), 'ES256');
        expect(csc.tokenRequests).to.equal(before + 1);
        const wrong = await open({ credentialId: 'seal-1', clientSecret: 'not-the-client-secret' }, 'qtsp-a');
        const err = await expect(wrong.health()).to.reject(KmsUnavailableError);
        expect(err.message).to.equal('KMS provider "qtsp-a": the token endpoint refused the client credentials (HTTP 401, invalid_client)');
        expect(err.message).to.not.contain('not-the-client-secret');
    });

    it('refuses malformed, refused and failing answers with clear errors', async () => {
        const on = (method: string, answer: { status: number; body?: unknown }) => {
            csc.override = (req) => (req.path === `/csc/v2/${method}` ? answer : undefined);
        };
        const store = await open({ credentialId: 'seal-1' });
        on('signatures/signHash', { status: 200, body: { signatures: ['not base64!'] } });
        await expect(store.sign('seal-1', Buffer.from('x'), 'ES256')).to.reject('KMS provider "qtsp" gave an invalid answer to sign with credential "seal-1": no base64 signature');
        on('signatures/signHash', { status: 200, body: { signatures: [Buffer.alloc(10, 1).toString('base64')] } });
        await expect(store.sign('seal-1', Buffer.from('x'), 'ES256')).to.reject(/signature is not a DER ECDSA signature/);
        on('signatures/signHash', { status: 200, body: ['not', 'an', 'object'] });
        await expect(store.sign('seal-1', Buffer.from('x'), 'ES256')).to.reject(/the body is not a JSON object/);
        on('signatures/signHash', { status: 403, body: { error: 'access_denied', error_description: 'Scope insufficient' } });
        await expect(store.sign('seal-1', Buffer.from('x'), 'ES256')).to.reject(KmsUnavailableError, 'KMS provider "qtsp" is unavailable: the signing service refused the access token for sign with credential "seal-1" (HTTP 403, access_denied: Scope insufficient)');
        on('signatures/signHash', { status: 502 });
        await expect(store.sign('seal-1', Buffer.from('x'), 'ES256')).to.reject(KmsUnavailableError, 'KMS provider "qtsp" is unavailable: sign with credential "seal-1" failed (HTTP 502)');
        on('signatures/signHash', { status: 400, body: { error: 'invalid_request', error_description: 'Invalid parameter hashes' } });
        await expect(store.sign('seal-1', Buffer.from('x'), 'ES256')).to.reject('KMS provider "qtsp" refused sign with credential "seal-1" (HTTP 400, invalid_request: Invalid parameter hashes)');
        on('credentials/info', { status: 200, body: { key: { status: 'enabled' }, cert: { certificates: [] } } });
        await expect(store.health()).to.reject('KMS provider "qtsp" gave an invalid answer to info of credential "seal-1": no certificates');
        on('credentials/info', { status: 200, body: { key: { status: 'enabled' }, cert: { certificates: [Buffer.from('not a certificate').toString('base64')] } } });
        await expect(store.health()).to.reject(/Credential seal-1 of KMS provider qtsp cannot sign ES256/);
        const listing = await open({ userId: 'erika' });
        on('credentials/list', { status: 200, body: { credentialIDs: [] } });
        await expect(listing.health()).to.reject(KmsUnavailableError, 'KMS provider "qtsp" is unavailable: the signing service lists no credential for the userId');
        csc.override = undefined;
        await listing.health();
        const authorizing = await open({ credentialId: 'seal-pin', useAuthorizeEndpoint: true, authorizeAuthData: [{ id: 'PIN', value: csc.pin }] });
        on('credentials/authorize', { status: 200, body: { expiresIn: 300 } });
        await expect(authorizing.sign('seal-pin', Buffer.from('x'), 'ES256')).to.reject(/gave an invalid answer to authorization: no SAD/);
    });

    it('reports a disabled credential as unavailable', async () => {
        const store = await open({ credentialId: 'seal-1' });
        seal.status = 'disabled';
        try {
            const err = await expect(store.health()).to.reject(KmsUnavailableError);
            expect(err.message).to.equal('KMS provider "qtsp" is unavailable: the key of credential "seal-1" is disabled');
        }
        finally {
            seal.status = 'enabled';
        }
    });

    it('gives up on a slow service after timeoutMs, and fails fast when it is down', async () => {
        const slow = await open({ credentialId: 'seal-1' }, 'slow-qtsp', 300);
        await slow.health();
        csc.delayMs = 3000;
        const started = Date.now();
        const err = await expect(slow.sign('seal-1', Buffer.from('x'), 'ES256')).to.reject(KmsUnavailableError);
        expect(Date.now() - started).to.be.below(2000);
        expect(err.message).to.equal('KMS provider "slow-qtsp" is unavailable: sign with credential "seal-1" failed (no answer within 300 ms)');
        csc.delayMs = 0;
        const down = await cscKmsProvider.open(validated({ baseUrl: 'http://127.0.0.1:1', tokenUrl: 'http://127.0.0.1:1/token', clientId: 'c', clientSecret: SECRET }), context('down-qtsp')) as CscKeyStore;
        stores.push(down);
        const refused = await expect(down.health()).to.reject(KmsUnavailableError);
        expect(refused.message).to.equal('KMS provider "down-qtsp" is unavailable: token request failed (connection refused)');
    });

    it('validates its options strictly, with the defaults of spec 2.5, and names the secrets', () => {
        expect(cscKmsProvider.secretPaths).to.equal(['clientSecret', 'sad', 'authorizeAuthData.*.value']);
        expect(cscKmsProvider.destinationPaths).to.equal(['baseUrl', 'tokenUrl']);
        const base = { baseUrl: 'https://qtsp.example', tokenUrl: 'https://qtsp.example/oauth2/token', clientId: 'c', clientSecret: 's' };
        expect(validated(base)).to.equal({ ...base, apiPath: '/csc/v2', hashAlgorithmOid: '2.16.840.1.101.3.4.2.1', signAlgorithmOid: '1.2.840.10045.4.3.2', useAuthorizeEndpoint: false });
        const error = (raw: unknown) => cscKmsProvider.optionsSchema.validate(raw).error?.message;
        expect(error({ ...base, clientSecret: undefined })).to.equal('"clientSecret" is required');
        expect(error({ ...base, hashAlgorithmOid: '2.16.840.1.101.3.4.2.2' })).to.contain('must be the SHA-256 OID');
        expect(error({ ...base, signAlgorithmOid: '1.2.840.113549.1.1.11' })).to.contain('the service signs ES256 only');
        expect(error({ ...base, authorizeAuthData: [{ id: 'PIN', value: '1' }] })).to.contain('needs useAuthorizeEndpoint true and no sad');
        expect(error({ ...base, useAuthorizeEndpoint: true, authorizeAuthData: [{ id: 'PIN' }] })).to.contain('"authorizeAuthData[0].value" is required');
        expect(error({ ...base, apiPath: 'csc/v2' })).to.contain('"apiPath" must start with a slash');
        expect(error({ ...base, baseUrl: 'https://qtsp.example/' })).to.contain('must not end with a slash');
        expect(error({ ...base, keysPath: '/keys' })).to.equal('"keysPath" is not allowed');
        // Credentials in a URL would be answered and exported in clear, and are never sent (clientSecret is).
        expect(error({ ...base, tokenUrl: 'https://hallmark:client-secret@qtsp.example/oauth2/token' })).to.contain('"tokenUrl" must not contain credentials');
    });
});

for (const dialect of DIALECTS) {
    describe(`key chains on a csc provider (${dialect})`, () => {
        let t: TestServer;
        let csc: CscServer;
        let seal: CscCredential;
        let admin: string;
        const call = (method: string, url: string, payload?: object) => t.server.inject({ method, url, payload, headers: bearer(admin) });
        const reference = (externalKeyId: string, publicJwk: PublicJwk, certificateChain?: string[]) =>
            ({ type: 'external-reference', provider: 'qtsp', externalKeyId, publicJwk, ...(certificateChain ? { certificateChain } : {}) });

        before(async () => {
            csc = await CscServer.start('hallmark', SECRET);
            seal = await csc.addCredential('seal-1');
            t = await startTestServer(dialect, {
                manifest: manifestFor('hallmark-kms-csc', 'hallmark-kms-db', 'hallmark-oid4vci', 'hallmark-tenancy'),
                env: { KMS_TIMEOUT_MS: '1000', OUTBOUND_URL_ALLOW_HTTP: 'true', OUTBOUND_URL_ALLOW_PRIVATE_NETWORK: 'true' }
            });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
        });
        after(async () => {
            await t.stop();
            await csc.stop().catch(() => undefined);
        });

        it('saves the provider after a health check, its secrets redacted', async () => {
            const provider = { id: 'qtsp', type: 'csc', baseUrl: csc.origin, tokenUrl: csc.tokenUrl, clientId: 'hallmark', clientSecret: SECRET, credentialId: 'seal-1', sad: 'unused-static-sad' };
            const wrong = await call('PUT', '/api/key-chain/providers/config', { providers: [{ ...provider, clientSecret: 'not-the-client-secret' }] });
            expect(wrong.statusCode).to.equal(400);
            expect(wrong.payload).to.contain('refused the client credentials');
            expect(wrong.payload).to.not.contain('not-the-client-secret');
            const res = await call('PUT', '/api/key-chain/providers/config', { providers: [provider] });
            expect(res.statusCode, res.payload).to.equal(200);
            expect((res.result as any).providers[0]).to.include({ clientSecret: '[redacted]', sad: '[redacted]' });
            const health = (await call('GET', '/api/key-chain/providers')).result as any[];
            expect(health.find((p) => p.id === 'qtsp')).to.include({ type: 'csc', status: 'up' });
        });

        it('redacts authorizeAuthData values in answers, audit entries and exports, and keeps them when sent back redacted', async () => {
            const before = (await call('GET', '/api/key-chain/providers/config')).result as any;
            const pinProvider = { id: 'qtsp-pin', type: 'csc', baseUrl: csc.origin, tokenUrl: csc.tokenUrl, clientId: 'hallmark', clientSecret: SECRET, credentialId: 'seal-1', useAuthorizeEndpoint: true, authorizeAuthData: [{ id: 'PIN', value: 'pin-value-4711' }, { id: 'OTP', value: 'otp-value-0815' }] };
            const res = await call('PUT', '/api/key-chain/providers/config', { providers: [...before.providers, pinProvider] });
            expect(res.statusCode, res.payload).to.equal(200);
            expect(res.payload).to.not.contain('pin-value-4711');
            expect((res.result as any).providers[1].authorizeAuthData).to.equal([{ id: 'PIN', value: '[redacted]' }, { id: 'OTP', value: '[redacted]' }]);
            // Sent back as answered (redacted), the stored values stay.
            expect((await call('PUT', '/api/key-chain/providers/config', res.result as object)).statusCode).to.equal(200);
            const stored = await t.server.registry.get({ tenantId: 'acme', clientId: 'system:test', roles: [] }, kmsConfigKind);
            expect((stored!.spec.providers[1] as any).authorizeAuthData.map((a: any) => a.value)).to.equal(['pin-value-4711', 'otp-value-0815']);
            const audit = await t.server.db.knex('audit_logs').where({ tenant_id: 'acme' });
            expect(audit.length).to.be.above(0);
            expect(JSON.stringify(audit)).to.not.contain('pin-value-4711');
            const exported = JSON.stringify(await t.server.registry.export({ tenantId: 'acme', clientId: 'system:test', roles: [] }));
            expect(exported).to.not.contain('pin-value-4711');
            expect(exported).to.not.contain('otp-value-0815');
            expect((await call('PUT', '/api/key-chain/providers/config', before)).statusCode).to.equal(200);
        });

        it('holds a tenant\'s baseUrl and tokenUrl to the outbound policy when they are saved', async () => {
            t.server.outbound.allowPrivateNetwork = false;
            try {
                const saved = await call('PUT', '/api/key-chain/providers/config', { providers: [{ id: 'other', type: 'csc', baseUrl: csc.origin, tokenUrl: csc.tokenUrl, clientId: 'hallmark', clientSecret: SECRET }] });
                expect(saved.statusCode, saved.payload).to.equal(400);
                expect((saved.result as any).details[0].path).to.equal('providers.0.baseUrl');
                // The policy check alone (no connection is made): a public IP literal passes, the loopback token URL not.
                const err = await expect(checkTenantKmsConfig({ providers: [{ id: 'other', type: 'csc', baseUrl: 'https://1.1.1.1', tokenUrl: csc.tokenUrl, clientId: 'c', clientSecret: 's' }] },
                    { allowHttp: true, allowPrivateNetwork: false, allowedHosts: [] })).to.reject();
                expect((err as any).details[0].path).to.equal('providers.0.tokenUrl');
            }
            finally {
                t.server.outbound.allowPrivateNetwork = true;
            }
        });

        it('refuses to generate a key in the signing service (400)', async () => {
            const res = await call('POST', '/api/key-chain', { id: 'generated', usageType: 'attestation', kmsProvider: 'qtsp' });
            expect(res.statusCode, res.payload).to.equal(400);
            expect((res.result as any).message).to.contain('never creates keys');
        });

        it('references the credential with its certificate chain, proven by a challenge signature, and issues an SD-JWT VC with it', async () => {
            const other = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' });
            const wrong = await call('POST', '/api/key-chain', { id: 'wrong', usageType: 'attestation', keySource: reference('seal-1', { kty: 'EC', crv: 'P-256', x: other.x!, y: other.y! }) });
            expect(wrong.statusCode, wrong.payload).to.equal(400);
            const res = await call('POST', '/api/key-chain', { id: 'seal', usageType: 'attestation', keySource: reference('seal-1', publicOf(seal), seal.pem) });
            expect(res.statusCode, res.payload).to.equal(201);
            const body = res.result as any;
            // The trust service's chain: its leaf, its CA as the root.
            expect(body.certificateChain).to.equal([seal.pem[0]]);
            expect(body.rootCertificate).to.equal(seal.pem[1]);
            await issueSdJwtWithKeyChain(t.server, admin, 'seal');
            // The credential stays at the trust service when the chain goes (after the configuration that uses it).
            expect((await call('DELETE', '/api/issuer/credentials/pid-seal')).statusCode).to.equal(204);
            expect((await call('DELETE', '/api/key-chain/seal')).statusCode).to.equal(204);
            expect(csc.credentials.has('seal-1')).to.be.true();
        });

        it('exports the provider\'s secrets as placeholders and the key chain as a reference to the credential', async () => {
            expect((await call('POST', '/api/key-chain', { id: 'exported', usageType: 'access', keySource: reference('seal-1', publicOf(seal), seal.pem) })).statusCode).to.equal(201);
            const exported = await t.server.registry.export({ tenantId: 'acme', clientId: 'system:test', roles: [] });
            const text = JSON.stringify(exported);
            expect(text).to.not.contain(SECRET);
            expect(text).to.not.contain('unused-static-sad');
            const kms = exported.documents.find((d) => d.kind === 'KmsConfig')!.document.spec as any;
            expect(kms.providers[0].clientSecret).to.match(/^\$\{[A-Z0-9_]+\}$/);
            expect(kms.providers[0].sad).to.match(/^\$\{[A-Z0-9_]+\}$/);
            expect(exported.requirements.filter((r) => r.code === 'SECRET_REQUIRED').map((r) => r.path).sort()).to.equal(['providers.0.clientSecret', 'providers.0.sad']);
            const chain = exported.documents.find((d) => d.kind === 'KeyChain' && d.id === 'exported')!.document.spec as any;
            expect(chain.keySource).to.equal({ type: 'external-reference', provider: 'qtsp', externalKeyId: 'seal-1', publicJwk: publicOf(seal) });
        });

        it('answers 503 naming the provider when the signing service refuses the client, is slow or down, within KMS_TIMEOUT_MS', async () => {
            expect((await call('POST', '/api/key-chain', { id: 'seal2', usageType: 'access', type: 'standalone', keySource: reference('seal-1', publicOf(seal), seal.pem) })).statusCode).to.equal(201);
            // The trust service revokes the client after the configuration was saved.
            csc.clientSecret = 'a-new-client-secret';
            csc.revokeTokens();
            const refused = await call('POST', '/api/key-chain', { id: 'refused', usageType: 'access', keySource: reference('seal-1', publicOf(seal), seal.pem) });
            expect(refused.statusCode).to.equal(503);
            expect((refused.result as any).message).to.contain('the token endpoint refused the client credentials');
            expect(refused.payload).to.not.contain(SECRET);
            csc.clientSecret = SECRET;
            csc.delayMs = 5000;
            const started = Date.now();
            // The service's deadline and the provider's own fire at the same time: either names the provider and the wait.
            await expect(t.server.signing.jws('acme', 'seal2', { payload: {} })).to.reject(/KMS provider qtsp (did not answer sign within 1000 ms|is unavailable: .*no answer within 1000 ms)/);
            expect(Date.now() - started).to.be.below(3000);
            csc.delayMs = 0;
            await csc.stop();
            const down = await call('POST', '/api/key-chain', { id: 'down', usageType: 'access', keySource: reference('seal-1', publicOf(seal), seal.pem) });
            expect(down.statusCode).to.equal(503);
            expect((down.result as any).message).to.contain('KMS provider qtsp is unavailable');
            const health = (await call('GET', '/api/key-chain/providers')).result as any[];
            expect(health.find((p) => p.id === 'qtsp').status).to.equal('down');
        });
    });
}
