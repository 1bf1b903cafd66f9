import { spawnSync } from 'node:child_process';
import Crypto from 'node:crypto';
import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as Jose from 'jose';
import Pino from 'pino';
import type * as Pkcs11Js from 'pkcs11js';
import { KmsUnavailableError, type KeyStore, type KmsOpenContext, type PublicJwk } from '../../lib/kms/types';
import { pkcs11KmsProvider, type Pkcs11KmsOptions } from '../../plugins/kms-pkcs11/provider';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const ROOT = Path.resolve(__dirname, '../..');
const pkcs11 = require('pkcs11js') as typeof Pkcs11Js;

const b64url = (value: Uint8Array | string): string => Buffer.from(value).toString('base64url');

const ctx = (providerId: string): KmsOpenContext => ({
    tenantId: 'tenant-pkcs11',
    providerId,
    log: Pino({ level: 'silent' }),
    timeoutMs: 10_000,
    services: {}
});

/** An ES256 JWT whose signature comes from the key store, as core crypto will produce it. */
const signJwt = async (store: KeyStore, kid: string): Promise<string> => {
    const input = `${b64url(JSON.stringify({ alg: 'ES256', typ: 'JWT', kid }))}.${b64url(JSON.stringify({ sub: 'holder', iat: Math.floor(Date.now() / 1000) }))}`;
    const signature = await store.sign(kid, Buffer.from(input, 'ascii'), 'ES256');
    expect(signature.length).to.equal(64);
    return `${input}.${b64url(signature)}`;
};

const verifyJwt = async (jwt: string, jwk: PublicJwk): Promise<void> => {
    const { payload, protectedHeader } = await Jose.jwtVerify(jwt, await Jose.importJWK(jwk, 'ES256'));
    expect(protectedHeader.alg).to.equal('ES256');
    expect(payload.sub).to.equal('holder');
};

describe('pkcs11 KMS provider on SoftHSM2', () => {
    let dir: string;
    let library: string;
    const label = `hallmark-${Crypto.randomBytes(4).toString('hex')}`;
    const pin = Crypto.randomBytes(8).toString('hex');
    const soPin = Crypto.randomBytes(8).toString('hex');
    const options = (extra: Partial<Pkcs11KmsOptions> = {}): Pkcs11KmsOptions => ({ library, slot: label, pin, readOnly: false, ...extra });
    const open = (providerId: string, extra: Partial<Pkcs11KmsOptions> = {}) => pkcs11KmsProvider.open(options(extra), ctx(providerId));
    const stores: KeyStore[] = [];
    const tracked = async (providerId: string, extra: Partial<Pkcs11KmsOptions> = {}): Promise<KeyStore> => {
        const store = await open(providerId, extra);
        stores.push(store);
        return store;
    };

    const previousConf = process.env.SOFTHSM2_CONF;

    before({ timeout: 600_000 }, () => {
        dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-softhsm-'));
        const tokens = Path.join(dir, 'tokens');
        const ensured = spawnSync('bash', [Path.join(ROOT, 'scripts/ensure-softhsm.sh'), tokens], { encoding: 'utf8' });
        if (ensured.status !== 0) {
            throw new Error(`scripts/ensure-softhsm.sh failed (exit ${ensured.status ?? ensured.signal}):\n${ensured.stderr}${ensured.stdout}`);
        }
        library = ensured.stdout.trim().split('\n').pop()!;
        expect(Path.isAbsolute(library)).to.be.true();
        expect(Fs.existsSync(library)).to.be.true();

        const conf = Path.join(dir, 'softhsm2.conf');
        Fs.writeFileSync(conf, `directories.tokendir = ${tokens}\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n`);
        // SoftHSM reads its config at C_Initialize, i.e. at the first open of this process (and after a finalize).
        process.env.SOFTHSM2_CONF = conf;
        const init = spawnSync('softhsm2-util', ['--init-token', '--free', '--label', label, '--pin', pin, '--so-pin', soPin], {
            encoding: 'utf8',
            env: { ...process.env, SOFTHSM2_CONF: conf }
        });
        if (init.status !== 0) {
            throw new Error(`softhsm2-util --init-token failed (exit ${init.status ?? init.signal}):\n${init.stderr}`);
        }
    });

    after(async () => {
        for (const store of stores) {
            await store.close?.();
        }
        if (previousConf === undefined) {
            delete process.env.SOFTHSM2_CONF;
        }
        else {
            process.env.SOFTHSM2_CONF = previousConf;
        }
        if (dir) {
            Fs.rmSync(dir, { recursive: true, force: true });
        }
    });

    describe('options schema', () => {
        const schema = pkcs11KmsProvider.optionsSchema;

        it('accepts a label or an index, defaults readOnly to false and names the PIN as the secret', () => {
            const byLabel = schema.validate({ library: '/usr/lib/softhsm/libsofthsm2.so', slot: 'tok', pin: '1234' });
            expect(byLabel.error).to.not.exist();
            expect(byLabel.value).to.equal({ library: '/usr/lib/softhsm/libsofthsm2.so', slot: 'tok', pin: '1234', readOnly: false });
            const byIndex = schema.validate({ library: '/usr/lib/softhsm/libsofthsm2.so', slot: 0, pin: '1234', readOnly: true });
            expect(byIndex.error).to.not.exist();
            expect(byIndex.value.slot).to.equal(0);
            expect(pkcs11KmsProvider.type).to.equal('pkcs11');
            expect(pkcs11KmsProvider.secretPaths).to.equal(['pin']);
        });

        it('rejects unknown fields, a relative library path and bad slots', () => {
            const base = { library: '/usr/lib/softhsm/libsofthsm2.so', slot: 'tok', pin: '1234' };
            expect(schema.validate({ ...base, extra: true }).error?.message).to.contain('"extra" is not allowed');
            expect(schema.validate({ ...base, library: 'lib/libsofthsm2.so' }).error?.message).to.contain('must be an absolute path');
            expect(schema.validate({ ...base, slot: -1 }).error).to.exist();
            expect(schema.validate({ ...base, slot: 1.5 }).error).to.exist();
            expect(schema.validate({ ...base, slot: '' }).error).to.exist();
            expect(schema.validate({ ...base, pin: undefined }).error?.message).to.contain('"pin" is required');
            expect(schema.validate({ slot: 'tok', pin: '1234' }).error?.message).to.contain('"library" is required');
            // A string from a placeholder stays a label.
            expect(schema.validate({ ...base, slot: '0' }).value.slot).to.equal('0');
        });
    });

    describe('keys in the token', () => {
        it('creates a key inside the token and signs an ES256 JWT that verifies with both public keys', async () => {
            const store = await open('hsm');
            try {
                const kid = 'issuer-key-1';
                const created = await store.create(kid, 'ES256');
                expect(created).to.equal({ kty: 'EC', crv: 'P-256', x: created.x, y: created.y });
                expect(Buffer.from(created.x!, 'base64url').length).to.equal(32);
                expect(Buffer.from(created.y!, 'base64url').length).to.equal(32);
                const read = await store.publicJwk(kid);
                expect(read).to.equal(created);

                const jwt = await signJwt(store, kid);
                await verifyJwt(jwt, created);
                await verifyJwt(jwt, read);
                // ECDSA is randomized; a tampered payload must not verify.
                const [h, , s] = jwt.split('.');
                await expect(verifyJwt(`${h}.${b64url('{"sub":"mallory"}')}.${s}`, created)).to.reject();

                await expect(store.create(kid, 'ES256')).to.reject(/already exists/);
                await store.delete(kid);
                await expect(store.publicJwk(kid)).to.reject(/Key issuer-key-1 not found in KMS provider hsm/);
                await expect(store.sign(kid, Buffer.from('x'), 'ES256')).to.reject(/not found/);
                await expect(store.delete(kid)).to.reject(/not found/);
                expect(store.import).to.not.exist();
            }
            finally {
                await store.close!();
            }
        });

        it('keeps the private key sensitive and non-extractable in the token', async () => {
            const store = await open('hsm');
            const lib = new pkcs11.PKCS11();
            try {
                const kid = 'sealed-key';
                await store.create(kid, 'ES256');
                lib.load(library);
                try {
                    lib.C_Initialize();
                }
                catch (err) {
                    // The provider initialized the module in this process; its finalize is the provider's.
                    expect((err as Error).message).to.startWith('CKR_CRYPTOKI_ALREADY_INITIALIZED');
                }
                const slot = lib.C_GetSlotList(true).find((s) => lib.C_GetTokenInfo(s).label.trim() === label)!;
                const session = lib.C_OpenSession(slot, pkcs11.CKF_SERIAL_SESSION);
                try {
                    // Login state is per process and token: the provider's login makes private objects visible here.
                    lib.C_FindObjectsInit(session, [
                        { type: pkcs11.CKA_CLASS, value: pkcs11.CKO_PRIVATE_KEY },
                        { type: pkcs11.CKA_LABEL, value: kid }
                    ]);
                    const handles = lib.C_FindObjects(session, 5);
                    lib.C_FindObjectsFinal(session);
                    expect(handles.length).to.equal(1);
                    const [sensitive, extractable, neverExtractable, token, sign, id] = lib
                        .C_GetAttributeValue(session, handles[0], [
                            { type: pkcs11.CKA_SENSITIVE },
                            { type: pkcs11.CKA_EXTRACTABLE },
                            { type: pkcs11.CKA_NEVER_EXTRACTABLE },
                            { type: pkcs11.CKA_TOKEN },
                            { type: pkcs11.CKA_SIGN },
                            { type: pkcs11.CKA_ID }
                        ])
                        .map((a) => a.value);
                    expect(sensitive[0]).to.equal(1);
                    expect(extractable[0]).to.equal(0);
                    expect(neverExtractable[0]).to.equal(1);
                    expect(token[0]).to.equal(1);
                    expect(sign[0]).to.equal(1);
                    expect(id.length).to.equal(20);
                    expect(() => lib.C_GetAttributeValue(session, handles[0], [{ type: pkcs11.CKA_VALUE }])).to.throw(/CKR_ATTRIBUTE_SENSITIVE/);
                }
                finally {
                    lib.C_CloseSession(session);
                }
                await store.delete(kid);
            }
            finally {
                lib.close();
                await store.close!();
            }
        });

        it('opens by slot index and by label onto the same token', async () => {
            const byLabel = await open('by-label');
            const byIndex = await open('by-index', { slot: 0 });
            try {
                const jwk = await byLabel.create('shared-key', 'ES256');
                expect(await byIndex.publicJwk('shared-key')).to.equal(jwk);
                await verifyJwt(await signJwt(byIndex, 'shared-key'), jwk);
                await byIndex.delete('shared-key');
                await expect(byLabel.publicJwk('shared-key')).to.reject(/not found/);
            }
            finally {
                await byIndex.close!();
                await byLabel.close!();
            }
        });

        it('signs concurrently through one session', async () => {
            const store = await open('hsm');
            try {
                const jwk = await store.create('busy-key', 'ES256');
                const jwts = await Promise.all(Array.from({ length: 12 }, () => signJwt(store, 'busy-key')));
                await Promise.all(jwts.map((jwt) => verifyJwt(jwt, jwk)));
                await store.delete('busy-key');
            }
            finally {
                await store.close!();
            }
        });

        it('rejects algorithms other than ES256', async () => {
            const store = await open('hsm');
            try {
                await expect(store.create('rs-key', 'RS256' as 'ES256')).to.reject(/RS256 is not supported/);
            }
            finally {
                await store.close!();
            }
        });
    });

    describe('read-only provider', () => {
        it('refuses create and delete but signs with an existing key, alone or beside a writable provider', async () => {
            const writable = await open('rw');
            const jwk = await writable.create('ro-key', 'ES256');
            const beside = await open('ro', { readOnly: true });
            await expect(beside.create('other', 'ES256')).to.reject(/provider ro is read-only/);
            await verifyJwt(await signJwt(beside, 'ro-key'), jwk);
            await beside.close!();
            await writable.close!();

            // Alone: its own read-only session carries the login.
            const alone = await open('ro', { readOnly: true });
            try {
                await expect(alone.create('other', 'ES256')).to.reject(/provider ro is read-only/);
                await expect(alone.delete('ro-key')).to.reject(/provider ro is read-only/);
                expect(await alone.publicJwk('ro-key')).to.equal(jwk);
                await verifyJwt(await signJwt(alone, 'ro-key'), jwk);
                await alone.health();
            }
            finally {
                await alone.close!();
            }
            const cleanup = await open('rw');
            await cleanup.delete('ro-key');
            await cleanup.close!();
        });
    });

    describe('open failures', () => {
        it('reports a wrong PIN without echoing it, alone and beside a logged-in provider', async () => {
            const wrong = `wrong-${Crypto.randomBytes(6).toString('hex')}`;
            const alone = await expect(open('bad-pin', { pin: wrong })).to.reject(KmsUnavailableError);
            expect(alone.message).to.equal('PKCS#11 login failed for provider bad-pin: wrong PIN');

            const good = await open('good-pin');
            try {
                // C_Login answers CKR_USER_ALREADY_LOGGED_IN here; the PIN must still be checked.
                const beside = await expect(open('bad-pin', { pin: wrong })).to.reject(KmsUnavailableError);
                expect(beside.message).to.equal('PKCS#11 login failed for provider bad-pin: wrong PIN');
                expect(beside.message).to.not.contain(wrong);
                await good.health();
            }
            finally {
                await good.close!();
            }
        });

        it('reports an unknown token label and an out-of-range slot index', async () => {
            const label404 = await expect(open('no-token', { slot: 'no-such-token' })).to.reject(KmsUnavailableError);
            expect(label404.message).to.equal('PKCS#11 token with label "no-such-token" not found for provider no-token');
            const index404 = await expect(open('no-slot', { slot: 42 })).to.reject(KmsUnavailableError);
            expect(index404.message).to.contain('PKCS#11 slot index 42 not found for provider no-slot');
        });

        it('reports a library that cannot be loaded as unavailable, naming the provider', async () => {
            const missing = await expect(open('no-lib', { library: '/nonexistent/libpkcs11.so' })).to.reject(KmsUnavailableError);
            expect(missing.message).to.contain('PKCS#11 library for provider no-lib cannot be loaded');
            const notALibrary = Path.join(dir, 'softhsm2.conf');
            const bad = await expect(open('not-a-lib', { library: notALibrary })).to.reject(KmsUnavailableError);
            expect(bad.message).to.contain('PKCS#11 library for provider not-a-lib cannot be loaded');
        });
    });

    describe('lifecycle', () => {
        it('checks health, refuses use after close, and reopens after the module was finalized', async () => {
            const first = await open('life');
            await first.health();
            const jwk = await first.create('persistent-key', 'ES256');
            await first.close!();
            await first.close!();
            await expect(first.health()).to.reject(/closed/);
            await expect(first.sign('persistent-key', Buffer.from('x'), 'ES256')).to.reject(/closed/);

            // The last close released the module: a fresh C_Initialize succeeds instead of CKR_CRYPTOKI_ALREADY_INITIALIZED.
            const probe = new pkcs11.PKCS11();
            probe.load(library);
            try {
                probe.C_Initialize();
                probe.C_Finalize();
            }
            finally {
                probe.close();
            }

            // The key lives on in the token.
            const second = await tracked('life');
            await second.health();
            expect(await second.publicJwk('persistent-key')).to.equal(jwk);
            await verifyJwt(await signJwt(second, 'persistent-key'), jwk);
            await second.delete('persistent-key');
        });

        it('keeps the module for the remaining providers when one closes', async () => {
            const a = await open('a');
            const b = await open('b');
            const jwk = await a.create('kept-key', 'ES256');
            await a.close!();
            await b.health();
            await verifyJwt(await signJwt(b, 'kept-key'), jwk);
            await b.delete('kept-key');
            await b.close!();
        });
    });
});
