import { execFileSync } from 'node:child_process';
import Crypto from 'node:crypto';
import Fs from 'node:fs';
import Https from 'node:https';
import Os from 'node:os';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as Jose from 'jose';
import Pino from 'pino';
import { KmsUnavailableError, type KeyStore, type KmsOpenContext, type PublicJwk } from '../../lib/kms/types';
import { HttpKeyStore, httpKmsProvider, type HttpKmsOptions } from '../../plugins/kms-http/provider';
import { toEcP256PublicJwk, verifyEs256 } from '../../plugins/kms-http/jwk';
import type { Resolver } from '../../lib/outbound';
import { KmsServer, type KmsServerAuth } from '../fixtures/kms-server';

export const lab = Lab.script();
const { describe, it, before, after, afterEach } = lab;

const HAS_OPENSSL = (() => {
    try {
        execFileSync('openssl', ['version'], { stdio: 'pipe' });
        return true;
    } catch {
        return false;
    }
})();

interface Pki {
    dir: string;
    caPem: Buffer;
    serverCert: Buffer;
    serverKey: Buffer;
    file(name: string): string;
}

/** A CA with a server certificate for 127.0.0.1, a client certificate, and a client certificate from a rogue CA. */
const makePki = (): Pki => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-kms-http-'));
    const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
    const key = (name: string) => openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', `${name}.key`);
    const ca = (name: string) => {
        key(name);
        openssl('req', '-x509', '-new', '-key', `${name}.key`, '-sha256', '-days', '2', '-subj', `/CN=${name}`,
            '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign', '-out', `${name}.pem`);
    };
    const leaf = (name: string, issuer: string, ext: string) => {
        key(name);
        openssl('req', '-new', '-key', `${name}.key`, '-subj', `/CN=${name}`, '-out', `${name}.csr`);
        Fs.writeFileSync(Path.join(dir, `${name}.ext`), `basicConstraints=CA:FALSE\n${ext}\n`);
        openssl('x509', '-req', '-in', `${name}.csr`, '-CA', `${issuer}.pem`, '-CAkey', `${issuer}.key`,
            '-set_serial', `0x${Crypto.randomBytes(8).toString('hex')}`, '-days', '2', '-sha256', '-extfile', `${name}.ext`, '-out', `${name}.pem`);
    };
    ca('ca');
    ca('rogue-ca');
    leaf('server', 'ca', 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth');
    leaf('client', 'ca', 'extendedKeyUsage=clientAuth');
    leaf('rogue-client', 'rogue-ca', 'extendedKeyUsage=clientAuth');
    const file = (name: string) => Path.join(dir, name);
    return { dir, file, caPem: Fs.readFileSync(file('ca.pem')), serverCert: Fs.readFileSync(file('server.pem')), serverKey: Fs.readFileSync(file('server.key')) };
};

const silent = Pino({ level: 'silent' });

const context = (providerId: string, timeoutMs = 5000): KmsOpenContext => ({ tenantId: 'acme', providerId, log: silent, timeoutMs, services: {} });

/** Goes through the schema as the kms layer does, so defaults apply and bad configs cannot sneak into open(). */
const validated = (raw: unknown): HttpKmsOptions => {
    const { error, value } = httpKmsProvider.optionsSchema.validate(raw);
    if (error) {
        throw error;
    }
    return value;
};

const schemaError = (raw: unknown): string => {
    const { error } = httpKmsProvider.optionsSchema.validate(raw);
    expect(error, JSON.stringify(raw)).to.exist();
    return error!.message;
};

const open = (raw: unknown, providerId = 'remote-hsm', timeoutMs?: number): Promise<KeyStore> =>
    httpKmsProvider.open(validated(raw), context(providerId, timeoutMs));

const b64url = (value: string | Uint8Array) => Buffer.from(value).toString('base64url');

/** A compact ES256 JWT whose signature comes from the key store, as the credential code will build it. */
const signJwt = async (store: KeyStore, kid: string, claims: Record<string, unknown>): Promise<string> => {
    const input = `${b64url(JSON.stringify({ alg: 'ES256', typ: 'JWT', kid }))}.${b64url(JSON.stringify(claims))}`;
    const signature = await store.sign(kid, new TextEncoder().encode(input), 'ES256');
    expect(signature).to.be.an.instanceof(Uint8Array);
    expect(signature.length).to.equal(64);
    return `${input}.${b64url(signature)}`;
};

const verifyJwt = async (jwt: string, publicJwk: PublicJwk) =>
    (await Jose.jwtVerify(jwt, await Jose.importJWK(publicJwk, 'ES256'), { algorithms: ['ES256'] })).payload;

const rejection = async (promise: Promise<unknown>): Promise<Error> => {
    const err = await expect(promise).to.reject();
    return err as Error;
};

interface Variant {
    name: string;
    skip?: boolean;
    /** Starts the KMS and answers the provider options that reach it. */
    setup(): Promise<{ kms: KmsServer; options: Record<string, unknown> }>;
    /** Checks that the KMS saw the expected credentials on its key endpoints. */
    checkAuth(kms: KmsServer): void;
}

let pki: Pki | undefined;
const getPki = (): Pki => pki ??= makePki();

const keyRequests = (kms: KmsServer) => kms.requests.filter((r) => !r.path.startsWith('/oauth/'));

const variants: Variant[] = [
    {
        name: 'none',
        async setup() {
            const kms = await KmsServer.start();
            return { kms, options: { baseUrl: kms.origin, auth: { type: 'none' } } };
        },
        checkAuth(kms) {
            expect(kms.requests.every((r) => r.authScheme === undefined)).to.be.true();
        }
    },
    {
        name: 'bearer',
        async setup() {
            // Also exercises a base path and non-default paths.
            const kms = await KmsServer.start({ auth: { type: 'bearer', token: 'bearer-s3cret' }, keysPath: '/kms/v1/keys', healthPath: '/kms/status' });
            return { kms, options: { baseUrl: `${kms.origin}/kms`, auth: { type: 'bearer', token: 'bearer-s3cret' }, keysPath: '/v1/keys', healthPath: '/status' } };
        },
        checkAuth(kms) {
            expect(kms.requests.every((r) => r.authScheme === 'Bearer' && r.status !== 401)).to.be.true();
            expect(kms.requests.every((r) => r.path.startsWith('/kms/'))).to.be.true();
        }
    },
    {
        name: 'oauth2-client-credentials',
        async setup() {
            const kms = await KmsServer.start({ auth: { type: 'oauth2', clientId: 'hallmark', clientSecret: 'client s3cret&=' } });
            return {
                kms,
                options: {
                    baseUrl: kms.origin,
                    auth: { type: 'oauth2-client-credentials', tokenUrl: kms.tokenUrl, clientId: 'hallmark', clientSecret: 'client s3cret&=', scope: 'kms:sign kms:admin' }
                }
            };
        },
        checkAuth(kms) {
            expect(keyRequests(kms).every((r) => r.authScheme === 'Bearer' && r.status !== 401)).to.be.true();
            const tokenRequest = kms.requests.find((r) => r.path === '/oauth/token')!;
            expect(tokenRequest.authScheme).to.equal('Basic');
            expect(tokenRequest.body).to.equal({ grant_type: 'client_credentials', scope: 'kms:sign kms:admin' });
        }
    },
    {
        name: 'mtls',
        skip: !HAS_OPENSSL,
        async setup() {
            const p = getPki();
            const kms = await KmsServer.start({ auth: { type: 'mtls', ca: p.caPem, cert: p.serverCert, key: p.serverKey } });
            return { kms, options: { baseUrl: kms.origin, auth: { type: 'mtls', certFile: p.file('client.pem'), keyFile: p.file('client.key'), caFile: p.file('ca.pem') } } };
        },
        checkAuth(kms) {
            expect(kms.requests.every((r) => r.clientCn === 'client')).to.be.true();
        }
    }
];

after(() => {
    if (pki) {
        Fs.rmSync(pki.dir, { recursive: true, force: true });
    }
});

for (const variant of variants) {
    describe(`http KMS provider, auth ${variant.name}`, { skip: variant.skip }, () => {
        let kms: KmsServer;
        let options: Record<string, unknown>;
        let store: KeyStore;
        before(async () => {
            ({ kms, options } = await variant.setup());
            store = await open({ ...options, canImport: true });
        });
        after(async () => {
            await store.close?.();
            await kms.stop();
        });

        it('creates a key and signs an ES256 JWT that verifies with the returned public key', async () => {
            const publicJwk = await store.create('issuer-1', 'ES256');
            expect(publicJwk).to.only.include(['kty', 'crv', 'x', 'y']);
            expect(publicJwk).to.include({ kty: 'EC', crv: 'P-256' });
            expect(await store.publicJwk('issuer-1')).to.equal(publicJwk);
            const jwt = await signJwt(store, 'issuer-1', { iss: 'https://issuer.example', n: 1 });
            expect(await verifyJwt(jwt, publicJwk)).to.equal({ iss: 'https://issuer.example', n: 1 });
            // A second signature over other data also verifies: the provider is not replaying.
            const again = await signJwt(store, 'issuer-1', { n: 2 });
            expect((await verifyJwt(again, publicJwk)).n).to.equal(2);
            const other = await store.create('issuer-2', 'ES256');
            await expect(verifyJwt(jwt, other)).to.reject();
            variant.checkAuth(kms);
        });

        it('imports a private key and signs with it', async () => {
            const { privateKey, publicKey } = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
            const privateJwk = privateKey.export({ format: 'jwk' }) as Jose.JWK;
            const expected = publicKey.export({ format: 'jwk' });
            const publicJwk = await store.import!('imported-1', privateJwk, 'ES256');
            expect(publicJwk).to.equal({ kty: 'EC', crv: 'P-256', x: expected.x, y: expected.y });
            const jwt = await signJwt(store, 'imported-1', { sub: 'holder' });
            expect((await verifyJwt(jwt, { kty: 'EC', crv: 'P-256', x: expected.x!, y: expected.y! })).sub).to.equal('holder');
            const importRequest = kms.requests.find((r) => r.path.endsWith('/imported-1/import'))!;
            expect(importRequest.body).to.equal({ privateJwk: '[redacted]', alg: 'ES256' });
            variant.checkAuth(kms);
        });

        it('deletes a key; deleting it again is fine', async () => {
            await store.create('doomed', 'ES256');
            await store.delete('doomed');
            expect(kms.keys.has('doomed')).to.be.false();
            await store.delete('doomed');
            const err = await rejection(store.sign('doomed', Buffer.from('x'), 'ES256'));
            expect(err).to.not.be.an.instanceof(KmsUnavailableError);
            expect(err.message).to.contain('HTTP 404');
            await expect(store.publicJwk('doomed')).to.reject(/cannot read back/);
            variant.checkAuth(kms);
        });

        it('reports health', async () => {
            await store.health();
            expect(kms.requests.at(-1)!.status).to.equal(200);
            variant.checkAuth(kms);
        });
    });
}

describe('http KMS provider options', () => {
    const base = { baseUrl: 'https://kms.example/api' };

    it('applies the defaults and names the secret fields', () => {
        expect(validated(base)).to.equal({ baseUrl: 'https://kms.example/api', keysPath: '/keys', healthPath: '/health', canImport: false });
        expect(httpKmsProvider.type).to.equal('http');
        expect(httpKmsProvider.secretPaths).to.equal(['auth.clientSecret', 'auth.token']);
        const auths: Array<Record<string, string>> = [
            { type: 'none' },
            { type: 'bearer', token: 't' },
            { type: 'oauth2-client-credentials', tokenUrl: 'https://idp.example/token', clientId: 'c', clientSecret: 's' },
            { type: 'oauth2-client-credentials', tokenUrl: 'https://idp.example/token', clientId: 'c', clientSecret: 's', scope: 'kms' },
            { type: 'mtls', certFile: '/etc/kms/client.pem', keyFile: '/etc/kms/client.key' },
            { type: 'mtls', certFile: '/etc/kms/client.pem', keyFile: '/etc/kms/client.key', caFile: '/etc/kms/ca.pem' }
        ];
        for (const auth of auths) {
            expect(validated({ ...base, auth }).auth).to.equal(auth);
        }
    });

    it('rejects unknown fields, at the top and inside auth', () => {
        expect(schemaError({ ...base, region: 'eu' })).to.contain('"region" is not allowed');
        expect(schemaError({ ...base, auth: { type: 'bearer', token: 't', extra: 1 } })).to.contain('"auth.extra" is not allowed');
        expect(schemaError({ ...base, auth: { type: 'none', token: 't' } })).to.contain('"auth.token" is not allowed');
        expect(schemaError({ ...base, auth: { type: 'mtls', certFile: '/a', keyFile: '/b', tokenUrl: 'https://x' } })).to.contain('"auth.tokenUrl" is not allowed');
    });

    it('rejects a bad baseUrl with a clear message', () => {
        expect(schemaError({ baseUrl: 'https://kms.example/api/' })).to.contain('"baseUrl" must not end with a slash');
        expect(schemaError({ baseUrl: 'https://kms.example/' })).to.contain('must not end with a slash');
        expect(schemaError({ baseUrl: 'ftp://kms.example' })).to.contain('"baseUrl" must be a valid uri');
        expect(schemaError({ baseUrl: 'kms.example' })).to.contain('"baseUrl" must be a valid uri');
        expect(schemaError({ baseUrl: 'https://kms.example?x=1' })).to.contain('query or fragment');
        expect(schemaError({ baseUrl: 'https://user:pw@kms.example' })).to.contain('must not contain credentials');
        expect(schemaError({})).to.contain('"baseUrl" is required');
    });

    it('rejects relative mTLS paths, an unknown or missing auth type, missing auth fields, mtls over http', () => {
        expect(schemaError({ ...base, auth: { type: 'mtls', certFile: 'client.pem', keyFile: '/k' } })).to.contain('"auth.certFile" must be an absolute path');
        expect(schemaError({ ...base, auth: { type: 'mtls', certFile: '/c', keyFile: './k' } })).to.contain('"auth.keyFile" must be an absolute path');
        expect(schemaError({ ...base, auth: { type: 'mtls', certFile: '/c', keyFile: '/k', caFile: 'ca.pem' } })).to.contain('"auth.caFile" must be an absolute path');
        expect(schemaError({ ...base, auth: { type: 'basic', user: 'u' } })).to.contain('"auth.type" must be one of [oauth2-client-credentials, mtls, bearer, none]');
        expect(schemaError({ ...base, auth: { token: 't' } })).to.contain('"auth.type" is required');
        expect(schemaError({ ...base, auth: { type: 'bearer' } })).to.contain('"auth.token" is required');
        expect(schemaError({ ...base, auth: { type: 'oauth2-client-credentials', tokenUrl: 'https://x/t', clientId: 'c' } })).to.contain('"auth.clientSecret" is required');
        expect(schemaError({ baseUrl: 'http://kms.example', auth: { type: 'mtls', certFile: '/c', keyFile: '/k' } })).to.contain('mtls needs an https baseUrl');
    });

    it('rejects malformed keysPath and healthPath', () => {
        expect(schemaError({ ...base, keysPath: 'keys' })).to.contain('"keysPath" must start with a slash');
        expect(schemaError({ ...base, keysPath: '/keys/' })).to.contain('"keysPath"');
        expect(schemaError({ ...base, healthPath: '/health?deep=1' })).to.contain('"healthPath"');
        expect(schemaError({ ...base, canImport: 'sometimes' })).to.contain('"canImport" must be a boolean');
    });
});

describe('http KMS provider behaviour', () => {
    let kms: KmsServer | undefined;
    let store: KeyStore | undefined;
    afterEach(async () => {
        await store?.close?.();
        await kms?.stop().catch(() => undefined);
        store = undefined;
        kms = undefined;
    });

    it('leaves import out when canImport is false', async () => {
        kms = await KmsServer.start();
        store = await open({ baseUrl: kms.origin });
        expect(store.import).to.not.exist();
        expect('import' in store).to.be.false();
        const importing = await open({ baseUrl: kms.origin, canImport: true });
        expect(typeof importing.import).to.equal('function');
        await importing.close?.();
    });

    it('url-encodes the kid in paths', async () => {
        kms = await KmsServer.start();
        store = await open({ baseUrl: kms.origin });
        const kid = 'tenant a/key?1#ü';
        const publicJwk = await store.create(kid, 'ES256');
        expect(kms.keys.has(kid)).to.be.true();
        const jwt = await signJwt(store, kid, { ok: true });
        expect((await verifyJwt(jwt, publicJwk)).ok).to.be.true();
        expect(kms.requests.at(-1)!.path).to.equal('/keys/tenant%20a%2Fkey%3F1%23%C3%BC/sign');
        await store.delete(kid);
        expect(kms.keys.size).to.equal(0);
        await expect(store.sign('..', Buffer.from('x'), 'ES256')).to.reject(/invalid kid/);
    });

    it('answers a clear error for a wrong bearer token, without the token', async () => {
        kms = await KmsServer.start({ auth: { type: 'bearer', token: 'right-token' } });
        store = await open({ baseUrl: kms.origin, auth: { type: 'bearer', token: 'wrong-token-value' } }, 'vault-a');
        const err = await rejection(store.create('k', 'ES256'));
        expect(err).to.not.be.an.instanceof(KmsUnavailableError);
        expect(err.message).to.equal('KMS provider "vault-a" refused create of key "k" (HTTP 401, check the provider auth)');
        expect(err.message).to.not.contain('token-value');
        const health = await rejection(store.health());
        expect(health.message).to.contain('HTTP 401');
    });

    it('fails fast with KmsUnavailableError when the KMS is down', async () => {
        kms = await KmsServer.start();
        const baseUrl = kms.origin;
        await kms.stop();
        kms = undefined;
        store = await open({ baseUrl, auth: { type: 'bearer', token: 'secret-bearer' } }, 'hsm-down');
        const started = Date.now();
        const err = await rejection(store.sign('k', Buffer.from('data'), 'ES256'));
        expect(Date.now() - started).to.be.below(1000);
        expect(err).to.be.an.instanceof(KmsUnavailableError);
        expect(err.message).to.equal('KMS provider "hsm-down" is unavailable: sign with key "k" failed (connection refused)');
        const health = await rejection(store.health());
        expect(health).to.be.an.instanceof(KmsUnavailableError);
        expect(health.message).to.contain('"hsm-down"');
        expect(health.message).to.contain('health check');
    });

    it('gives up on a slow KMS after timeoutMs', async () => {
        kms = await KmsServer.start();
        store = await open({ baseUrl: kms.origin }, 'slow-kms', 300);
        kms.delayMs = 5000;
        const started = Date.now();
        const err = await rejection(store.create('k', 'ES256'));
        const elapsed = Date.now() - started;
        expect(elapsed).to.be.within(250, 1000);
        expect(err).to.be.an.instanceof(KmsUnavailableError);
        expect(err.message).to.equal('KMS provider "slow-kms" is unavailable: create of key "k" failed (no answer within 300 ms)');
        // The store stays usable once the KMS answers in time again.
        kms.delayMs = 0;
        await store.health();
    });

    it('maps 5xx to KmsUnavailableError without echoing the body', async () => {
        kms = await KmsServer.start();
        store = await open({ baseUrl: kms.origin }, 'flaky');
        await store.create('k', 'ES256');
        for (const status of [500, 503]) {
            kms.failWith = status;
            const err = await rejection(store.sign('k', Buffer.from('data'), 'ES256'));
            expect(err).to.be.an.instanceof(KmsUnavailableError);
            expect(err.message).to.equal(`KMS provider "flaky" is unavailable: sign with key "k" failed (HTTP ${status})`);
            expect(err.message).to.not.contain('SECRET');
        }
        kms.failWith = 400;
        const bad = await rejection(store.delete('k'));
        expect(bad).to.not.be.an.instanceof(KmsUnavailableError);
        expect(bad.message).to.equal('KMS provider "flaky" refused delete of key "k" (HTTP 400)');
    });

    it('rejects signatures that are not 64 raw bytes', async () => {
        kms = await KmsServer.start();
        store = await open({ baseUrl: kms.origin }, 'odd');
        await store.create('k', 'ES256');
        for (const length of [63, 65, 72]) {
            kms.signatureLength = length;
            const err = await rejection(store.sign('k', Buffer.from('data'), 'ES256'));
            expect(err).to.not.be.an.instanceof(KmsUnavailableError);
            expect(err.message).to.equal(`KMS provider "odd" gave an invalid answer to sign with key "k": signature has ${length} bytes, expected 64 (raw r || s)`);
        }
    });

    it('only reads back public keys it created, imported or was given', async () => {
        kms = await KmsServer.start();
        store = await open({ baseUrl: kms.origin }, 'forgetful');
        const publicJwk = await store.create('k', 'ES256');
        const fresh = await open({ baseUrl: kms.origin }, 'forgetful');
        await expect(fresh.publicJwk('k')).to.reject('KMS provider "forgetful": the http KMS protocol cannot read back the public key of "k"; use the public key stored when it was created or imported');
        (fresh as HttpKeyStore).rememberPublicJwk('k', { ...publicJwk, kid: 'k' });
        expect(await fresh.publicJwk('k')).to.equal(publicJwk);
        const signature = await fresh.sign('k', Buffer.from('payload'), 'ES256');
        expect(verifyEs256(publicJwk, Buffer.from('payload'), signature)).to.be.true();
        expect(verifyEs256(publicJwk, Buffer.from('other'), signature)).to.be.false();
        await fresh.close?.();
    });

    it('validates public JWKs', () => {
        const { publicKey, privateKey } = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
        const jwk = publicKey.export({ format: 'jwk' }) as Record<string, string>;
        expect(toEcP256PublicJwk({ ...jwk, kid: 'x', use: 'sig' })).to.equal({ kty: 'EC', crv: 'P-256', x: jwk.x, y: jwk.y });
        expect(() => toEcP256PublicJwk(privateKey.export({ format: 'jwk' }))).to.throw('public key contains a private part (d)');
        expect(() => toEcP256PublicJwk({ ...jwk, crv: 'P-384' })).to.throw('public key is not an EC P-256 JWK');
        expect(() => toEcP256PublicJwk({ ...jwk, x: 'AAAA' })).to.throw('public key has malformed x or y coordinates');
        expect(() => toEcP256PublicJwk({ ...jwk, y: b64url(Buffer.alloc(32, 1)) })).to.throw('public key is not a valid P-256 point');
        expect(() => toEcP256PublicJwk('jwk')).to.throw('public key is not a JWK object');
    });

    it('checks the import against the private key and refuses non-ES256 algorithms', async () => {
        kms = await KmsServer.start();
        store = await open({ baseUrl: kms.origin, canImport: true });
        await expect(store.import!('k', { kty: 'RSA', n: 'x', e: 'AQAB', d: 'y' }, 'ES256')).to.reject('import needs an EC P-256 private JWK');
        await expect(store.create('k', 'RS256' as 'ES256')).to.reject(/unsupported key algorithm RS256/);
        expect(kms.requests).to.have.length(0);
    });
});

/** A resolver that answers from a list, one answer per call (the last one repeats), and records its calls. */
const resolverOf = (...answers: string[]): Resolver & { calls: string[] } => {
    const calls: string[] = [];
    const resolver = async (hostname: string) => {
        const address = answers[Math.min(calls.length, answers.length - 1)]!;
        calls.push(hostname);
        return [{ address, family: 4 as const }];
    };
    return Object.assign(resolver, { calls });
};

describe('http KMS provider, connections through the outbound guard', () => {
    let kms: KmsServer;
    let store: HttpKeyStore | undefined;
    before(async () => {
        kms = await KmsServer.start({ auth: { type: 'oauth2', clientId: 'hallmark', clientSecret: 'kms-client-secret' } });
    });
    afterEach(async () => {
        await store?.close();
        store = undefined;
    });
    after(() => kms.stop());

    /** The provider options with the KMS's port under host names that only the test resolver knows. */
    const named = (host: string, tokenHost = host) => validated({
        baseUrl: kms.origin.replace('127.0.0.1', host),
        auth: { type: 'oauth2-client-credentials', tokenUrl: kms.tokenUrl.replace('127.0.0.1', tokenHost), clientId: 'hallmark', clientSecret: 'kms-client-secret' }
    });

    it('connects to the address the guard resolved, not to what a second lookup would answer', async () => {
        // 10.255.255.1 swallows packets: were a second lookup to decide the connection, the request would time out.
        const resolvers: Record<string, Resolver & { calls: string[] }> = {
            'kms.example.test': resolverOf('127.0.0.1', '10.255.255.1'),
            'token.example.test': resolverOf('127.0.0.1', '10.255.255.1')
        };
        store = new HttpKeyStore(named('kms.example.test', 'token.example.test'), context('pinned-kms', 2000), { resolver: (host) => resolvers[host]!(host) });
        const publicJwk = await store.create('pinned', 'ES256');
        const jwt = await signJwt(store, 'pinned', { pinned: true });
        expect((await verifyJwt(jwt, publicJwk)).pinned).to.be.true();
        await store.health();
        // One connection each to the KMS (kept alive) and to the token endpoint, each resolved once.
        expect(resolvers['kms.example.test']!.calls).to.equal(['kms.example.test']);
        expect(resolvers['token.example.test']!.calls).to.equal(['token.example.test']);
    });

    it('reports a name that does not resolve as an unavailable KMS', async () => {
        const missing: Resolver = () => Promise.reject(Object.assign(new Error('getaddrinfo ENOTFOUND kms.example.test'), { code: 'ENOTFOUND' }));
        store = new HttpKeyStore(named('kms.example.test'), context('nameless-kms'), { resolver: missing });
        const err = await rejection(store.health());
        expect(err).to.be.an.instanceof(KmsUnavailableError);
        expect(err.message).to.equal('KMS provider "nameless-kms" is unavailable: token request failed (host not found)');
    });

    it('refuses, at every connection, an address the tenant\'s outbound policy forbids, and sends nothing', async () => {
        const requests = kms.requests.length;
        const resolver = resolverOf('127.0.0.1');
        store = new HttpKeyStore(named('kms.example.test'), { ...context('tenant-kms'), outbound: { allowHttp: true, allowPrivateNetwork: false, allowedHosts: [] } }, { resolver });
        const err = await rejection(store.create('k', 'ES256'));
        expect(err).to.be.an.instanceof(KmsUnavailableError);
        expect(err.message).to.contain('KMS provider "tenant-kms" is unavailable');
        expect(err.message).to.contain('refused by the outbound policy');
        expect(err.message).to.contain('loopback address 127.0.0.1');
        expect(err.message).to.not.contain('kms-client-secret');
        expect(kms.requests.length).to.equal(requests);
    });
});

describe('http KMS provider, oauth2 tokens', () => {
    const clientSecret = 'very-secret-client';
    let kms: KmsServer;
    const stores: KeyStore[] = [];
    const oauth = (extra: Record<string, unknown> = {}) => ({
        baseUrl: kms.origin,
        auth: { type: 'oauth2-client-credentials', tokenUrl: kms.tokenUrl, clientId: 'hallmark', clientSecret, ...extra }
    });
    const openOauth = async (auth: KmsServerAuth | undefined, extra?: Record<string, unknown>) => {
        kms = await KmsServer.start({ auth: auth ?? { type: 'oauth2', clientId: 'hallmark', clientSecret } });
        const store = await open(oauth(extra), 'oauth-kms');
        stores.push(store);
        return store;
    };
    afterEach(async () => {
        for (const store of stores.splice(0)) {
            await store.close?.();
        }
        await kms.stop();
    });

    it('fetches one token for several operations, including concurrent ones', async () => {
        const store = await openOauth(undefined);
        await store.create('k', 'ES256');
        await Promise.all([1, 2, 3, 4, 5].map((n) => store.sign('k', Buffer.from(`data ${n}`), 'ES256')));
        await store.sign('k', Buffer.from('more'), 'ES256');
        await store.health();
        expect(kms.tokenRequests).to.equal(1);
    });

    it('fetches a new token shortly before the old one expires', async () => {
        const store = await openOauth({ type: 'oauth2', clientId: 'hallmark', clientSecret, tokenLifetimeSeconds: 1 });
        await store.create('k', 'ES256');
        await store.sign('k', Buffer.from('a'), 'ES256');
        expect(kms.tokenRequests).to.equal(1);
        await new Promise((resolve) => setTimeout(resolve, 950));
        await store.sign('k', Buffer.from('b'), 'ES256');
        expect(kms.tokenRequests).to.equal(2);
        // The refresh was proactive: the KMS never had to refuse a token.
        expect(kms.requests.some((r) => r.status === 401)).to.be.false();
    });

    it('refetches once when the KMS refuses the cached token', async () => {
        const store = await openOauth(undefined);
        await store.create('k', 'ES256');
        kms.revokeTokens();
        await store.sign('k', Buffer.from('a'), 'ES256');
        expect(kms.tokenRequests).to.equal(2);
        expect(keyRequests(kms).map((r) => r.status)).to.equal([200, 401, 200]);
    });

    it('reports refused client credentials without the secret', async () => {
        kms = await KmsServer.start({ auth: { type: 'oauth2', clientId: 'hallmark', clientSecret: 'the-real-one' } });
        const store = await open(oauth(), 'oauth-kms');
        stores.push(store);
        const err = await rejection(store.create('k', 'ES256'));
        expect(err).to.not.be.an.instanceof(KmsUnavailableError);
        expect(err.message).to.equal('KMS provider "oauth-kms": the token endpoint refused the client credentials (HTTP 401, invalid_client)');
        expect(err.message).to.not.contain(clientSecret);
        expect(keyRequests(kms)).to.have.length(0);
    });

    it('maps an unreachable or failing token endpoint to KmsUnavailableError', async () => {
        const store = await openOauth(undefined);
        const unreachable = await open({ ...oauth(), auth: { ...oauth().auth, tokenUrl: 'http://127.0.0.1:1/token' } }, 'oauth-kms');
        stores.push(unreachable);
        const err = await rejection(unreachable.health());
        expect(err).to.be.an.instanceof(KmsUnavailableError);
        expect(err.message).to.equal('KMS provider "oauth-kms" is unavailable: token request failed (connection refused)');
        // A failing KMS behind a working token endpoint is unavailable too.
        kms.failWith = 502;
        await expect(store.health()).to.reject(KmsUnavailableError, 'KMS provider "oauth-kms" is unavailable: health check failed (HTTP 502)');
    });
});

describe('http KMS provider, mTLS handshake', { skip: !HAS_OPENSSL }, () => {
    let kms: KmsServer;
    before(async () => {
        const p = getPki();
        kms = await KmsServer.start({ auth: { type: 'mtls', ca: p.caPem, cert: p.serverCert, key: p.serverKey } });
    });
    after(() => kms.stop());

    it('refuses a client that presents no certificate', async () => {
        const p = getPki();
        const err = await new Promise<Error>((resolve) => {
            const req = Https.request(`${kms.origin}/health`, { ca: p.caPem, agent: false }, (res) => {
                res.resume();
                resolve(new Error(`unexpected HTTP ${res.statusCode}`));
            });
            req.on('error', resolve);
            req.end();
        });
        expect(err.message).to.not.contain('unexpected HTTP');
        expect(kms.requests.some((r) => r.path === '/health')).to.be.false();
    });

    it('refuses a provider without a trusted client certificate', async () => {
        const p = getPki();
        const rogue = await open({ baseUrl: kms.origin, auth: { type: 'mtls', certFile: p.file('rogue-client.pem'), keyFile: p.file('rogue-client.key'), caFile: p.file('ca.pem') } }, 'mtls-kms');
        const err = await rejection(rogue.health());
        expect(err).to.be.an.instanceof(KmsUnavailableError);
        expect(err.message).to.startWith('KMS provider "mtls-kms" is unavailable: health check failed (');
        await rogue.close?.();
        // Without auth the server's private CA is not trusted either.
        const plain = await open({ baseUrl: kms.origin }, 'mtls-kms');
        await expect(plain.health()).to.reject(KmsUnavailableError);
        await plain.close?.();
        expect(kms.requests).to.have.length(0);
    });

    it('fails to open with unreadable or mismatched certificate files', async () => {
        const p = getPki();
        const missing = { type: 'mtls', certFile: p.file('nope.pem'), keyFile: p.file('client.key') };
        await expect(open({ baseUrl: kms.origin, auth: missing }, 'mtls-kms')).to.reject(`KMS provider "mtls-kms": cannot read auth.certFile ${p.file('nope.pem')} (ENOENT)`);
        const mismatched = { type: 'mtls', certFile: p.file('client.pem'), keyFile: p.file('server.key') };
        await expect(open({ baseUrl: kms.origin, auth: mismatched }, 'mtls-kms')).to.reject(/^KMS provider "mtls-kms": the mtls certificate, key or CA cannot be used/);
    });
});
