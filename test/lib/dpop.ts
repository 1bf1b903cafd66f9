import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as Jose from 'jose';
import { ColumnCipher } from '../../lib/crypto/column-cipher';
import { Database } from '../../lib/db/database';
import { migrateLatest } from '../../lib/db/migrate';
import { SingleUseStore } from '../../lib/db/single-use';
import { OAuthError } from '../../lib/errors';
import { DpopVerifier, jwkThumbprint, normaliseHtu, type DpopProofInput } from '../../lib/oauth/dpop';
import { createTestDatabase, DIALECTS, type TestDatabase } from '../helpers/databases';
import { manifestMigrations } from '../helpers/migrations';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const URL_TOKEN = 'https://issuer.example.com/t1/token';
const now = () => Math.floor(Date.now() / 1000);

interface KeyPair {
    privateKey: Jose.CryptoKey;
    publicKey: Jose.CryptoKey;
    jwk: Jose.JWK;
}

const keyPair = async (alg: string): Promise<KeyPair> => {
    const { privateKey, publicKey } = await Jose.generateKeyPair(alg, { extractable: true });
    return { privateKey, publicKey, jwk: await Jose.exportJWK(publicKey) };
};

interface ProofOptions {
    key: KeyPair;
    alg?: string;
    /** Header overrides; `undefined` values remove the member. */
    header?: Record<string, unknown>;
    /** Claim overrides; `undefined` values remove the claim. */
    claims?: Record<string, unknown>;
    /** Signs with this key instead of the embedded key's private half. */
    signWith?: Jose.CryptoKey | Uint8Array;
}

const proofFor = async ({ key, alg = 'ES256', header = {}, claims = {}, signWith }: ProofOptions): Promise<string> => {
    const payload: Record<string, unknown> = { jti: Crypto.randomUUID(), htm: 'POST', htu: URL_TOKEN, iat: now(), ...claims };
    const protectedHeader: Record<string, unknown> = { alg, typ: 'dpop+jwt', jwk: key.jwk, ...header };
    for (const object of [payload, protectedHeader]) {
        for (const [name, value] of Object.entries(object)) {
            if (value === undefined) {
                delete object[name];
            }
        }
    }
    return new Jose.SignJWT(payload).setProtectedHeader(protectedHeader as Jose.JWTHeaderParameters).sign(signWith ?? key.privateKey);
};

/** A token with an arbitrary header and a dummy signature, for headers that no signer produces (alg none). */
const unsigned = (header: Record<string, unknown>, claims: Record<string, unknown>) => {
    const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
    return `${part(header)}.${part(claims)}.AAAA`;
};

const expectError = async (promise: Promise<unknown>, error: string, message: RegExp, proof?: string): Promise<OAuthError> => {
    const err = await expect(promise).to.reject(OAuthError);
    expect(err.oauthError).to.equal(error);
    expect(err.status).to.equal(400);
    expect(err.message).to.match(message);
    if (proof) {
        expect(err.message).to.not.include(proof);
    }
    return err;
};

const nonceAt = (secret: Buffer, ms: number): string => {
    const time = Buffer.alloc(8);
    time.writeBigUInt64BE(BigInt(ms));
    const mac = Crypto.createHmac('sha256', secret).update(time).digest().subarray(0, 16);
    return Buffer.concat([time, mac]).toString('base64url');
};

describe('dpop without a database', () => {
    it('normalises htu: drops query and fragment, lowercases scheme and host, removes default ports', () => {
        expect(normaliseHtu('HTTPS://Issuer.Example.COM:443/t1/token?x=1#frag')).to.equal('https://issuer.example.com/t1/token');
        expect(normaliseHtu('http://issuer.example.com:80/a/../b/%7euser%2f')).to.equal('http://issuer.example.com/b/~user%2F');
        expect(normaliseHtu('https://issuer.example.com:8443/t')).to.equal('https://issuer.example.com:8443/t');
        expect(normaliseHtu('https://issuer.example.com')).to.equal('https://issuer.example.com/');
        expect(normaliseHtu('ftp://issuer.example.com/t')).to.be.undefined();
        expect(normaliseHtu('/t1/token')).to.be.undefined();
    });

    it('refuses symmetric, none or empty algorithm lists and short nonce secrets', () => {
        const store = {} as SingleUseStore;
        expect(() => new DpopVerifier(store, { algorithms: ['ES256', 'HS256'] })).to.throw(/asymmetric algorithm, not HS256/);
        expect(() => new DpopVerifier(store, { algorithms: ['none'] })).to.throw(/asymmetric/);
        expect(() => new DpopVerifier(store, { algorithms: [] })).to.throw(/at least one/);
        expect(() => new DpopVerifier(store, { nonceSecret: Buffer.alloc(8) })).to.throw(/at least 16 bytes/);
        expect(() => new DpopVerifier(store, { maxAgeSeconds: -1 })).to.throw(/maxAgeSeconds must be a non-negative number/);
    });

    it('issues nonces of the documented format', () => {
        const secret = Crypto.randomBytes(32);
        const verifier = new DpopVerifier({} as SingleUseStore, { nonceSecret: secret });
        const before = Date.now();
        const nonce = verifier.nonce();
        const raw = Buffer.from(nonce, 'base64url');
        expect(raw.length).to.equal(24);
        const ms = Number(raw.readBigUInt64BE(0));
        expect(ms).to.be.between(before - 1, Date.now() + 1);
        expect(nonce).to.equal(nonceAt(secret, ms));
    });

    it('refuses to require nonces without a nonce secret', async () => {
        const verifier = new DpopVerifier({} as SingleUseStore);
        await expect(verifier.verify({ tenantId: 't1', proof: 'a.b.c', method: 'POST', url: URL_TOKEN, requireNonce: true })).to.reject(/no nonce secret/);
    });
});

for (const dialect of DIALECTS) {
    describe(`dpop on ${dialect}`, () => {
        let testDb: TestDatabase;
        let db: Database;
        let store: SingleUseStore;
        let verifier: DpopVerifier;
        let es256: KeyPair;
        let other: KeyPair;

        const input = (proof: string | undefined, extra: Partial<DpopProofInput> = {}): DpopProofInput =>
            ({ tenantId: 't1', proof, method: 'POST', url: URL_TOKEN, ...extra });

        before(async () => {
            testDb = await createTestDatabase(dialect);
            db = Database.open(testDb.config, new ColumnCipher(Crypto.randomBytes(32)));
            await migrateLatest(db.knex, await manifestMigrations());
            const iso = new Date().toISOString();
            await db.knex('tenants').insert({ id: 't1', name: 'T', generation: 1, ownership: 'unmanaged', createdAt: iso, updatedAt: iso });
            store = new SingleUseStore(db);
            verifier = new DpopVerifier(store);
            es256 = await keyPair('ES256');
            other = await keyPair('ES256');
        });

        after(async () => {
            await db?.close();
            await testDb?.drop();
        });

        it('accepts a valid proof and returns the RFC 7638 thumbprint and the public jwk', async () => {
            const proof = await proofFor({ key: es256 });
            const result = await verifier.verify(input(proof));
            expect(result.jkt).to.equal(await Jose.calculateJwkThumbprint(es256.jwk, 'sha256'));
            expect(result.jkt).to.equal(await jwkThumbprint(es256.jwk));
            expect(result.jwk).to.equal(es256.jwk);
            const row = await db.knex('single_use_values').where({ key: `dpop:${result.jkt}:${Jose.decodeJwt(proof).jti}` }).first();
            expect(row.tenantId).to.equal('t1');
        });

        it('rejects a jti with a NUL or another control character before storing it', async () => {
            for (const jti of ['a\u0000b', 'line\nbreak', '\u007f']) {
                const proof = await proofFor({ key: es256, claims: { jti } });
                await expectError(verifier.verify(input(proof)), 'invalid_dpop_proof', /control characters/, proof);
            }
            expect(await db.knex('single_use_values').where('key', 'like', '%line%').first()).to.not.exist();
        });

        it('rejects a replayed proof', async () => {
            const proof = await proofFor({ key: es256 });
            await verifier.verify(input(proof));
            await expectError(verifier.verify(input(proof)), 'invalid_dpop_proof', /already been used/, proof);
        });

        it('accepts exactly one of 20 concurrent submissions of the same proof', async () => {
            const proof = await proofFor({ key: es256 });
            const results = await Promise.allSettled(Array.from({ length: 20 }, () => verifier.verify(input(proof))));
            const fulfilled = results.filter((r) => r.status === 'fulfilled');
            const rejected = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
            expect(fulfilled.length).to.equal(1);
            expect(rejected.length).to.equal(19);
            for (const r of rejected) {
                expect(r.reason).to.be.an.instanceof(OAuthError);
                expect(r.reason.oauthError).to.equal('invalid_dpop_proof');
                expect(r.reason.message).to.match(/already been used/);
            }
        });

        it('treats the same jti under different keys as different proofs', async () => {
            const jti = Crypto.randomUUID();
            await verifier.verify(input(await proofFor({ key: es256, claims: { jti } })));
            await verifier.verify(input(await proofFor({ key: other, claims: { jti } })));
        });

        it('requires exactly one well-formed proof', async () => {
            const proof = await proofFor({ key: es256 });
            await expectError(verifier.verify(input(undefined)), 'invalid_dpop_proof', /Missing DPoP proof/);
            await expectError(verifier.verify(input('')), 'invalid_dpop_proof', /Missing DPoP proof/);
            await expectError(verifier.verify(input(`${proof}, ${proof}`)), 'invalid_dpop_proof', /exactly one/, proof);
            await expectError(verifier.verify(input([proof, proof] as unknown as string)), 'invalid_dpop_proof', /exactly one/, proof);
            await expectError(verifier.verify(input('not-a-jws')), 'invalid_dpop_proof', /not a compact JWS/);
            await expectError(verifier.verify(input(`${proof}.extra`)), 'invalid_dpop_proof', /not a compact JWS/);
            await expectError(verifier.verify(input('e30.e30.AAAA')), 'invalid_dpop_proof', /typ must be dpop\+jwt/);
            await expectError(verifier.verify(input('!!!.e30.AAAA')), 'invalid_dpop_proof', /not a compact JWS/);
            await expectError(verifier.verify(input('AAAA.e30.AAAA')), 'invalid_dpop_proof', /header is malformed/);
        });

        it('rejects a wrong or missing typ', async () => {
            for (const typ of ['JWT', 'at+jwt', undefined]) {
                const proof = await proofFor({ key: es256, header: { typ } });
                await expectError(verifier.verify(input(proof)), 'invalid_dpop_proof', /typ must be dpop\+jwt/, proof);
            }
        });

        it('rejects algorithms that are not allowed, symmetric or none', async () => {
            const es384 = await keyPair('ES384');
            await expectError(verifier.verify(input(await proofFor({ key: es384, alg: 'ES384' }))), 'invalid_dpop_proof', /alg is not allowed/);

            const secret = Crypto.randomBytes(32);
            const hs = await proofFor({ key: es256, alg: 'HS256', signWith: secret });
            await expectError(verifier.verify(input(hs)), 'invalid_dpop_proof', /alg is not allowed/);
            const hsOct = await proofFor({ key: { ...es256, jwk: { kty: 'oct', k: secret.toString('base64url') } }, alg: 'HS256', signWith: secret });
            await expectError(verifier.verify(input(hsOct)), 'invalid_dpop_proof', /alg is not allowed/);

            const claims = { jti: Crypto.randomUUID(), htm: 'POST', htu: URL_TOKEN, iat: now() };
            for (const alg of ['none', 'None', undefined]) {
                await expectError(verifier.verify(input(unsigned({ alg, typ: 'dpop+jwt', jwk: es256.jwk }, claims))), 'invalid_dpop_proof', /alg is not allowed/);
            }
        });

        it('rejects a jwk with private members, a missing jwk and a jwk that does not fit the alg', async () => {
            const privateJwk = await Jose.exportJWK(es256.privateKey);
            expect(privateJwk.d).to.exist();
            const withD = await proofFor({ key: es256, header: { jwk: privateJwk } });
            await expectError(verifier.verify(input(withD)), 'invalid_dpop_proof', /private key members/, withD);
            for (const member of ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k']) {
                const proof = await proofFor({ key: es256, header: { jwk: { ...es256.jwk, [member]: 'AAAA' } } });
                await expectError(verifier.verify(input(proof)), 'invalid_dpop_proof', /private key members/);
            }
            await expectError(verifier.verify(input(await proofFor({ key: es256, header: { jwk: undefined } }))), 'invalid_dpop_proof', /jwk is missing/);
            await expectError(verifier.verify(input(await proofFor({ key: es256, header: { jwk: 'abc' } }))), 'invalid_dpop_proof', /jwk is missing/);

            const rsa = await keyPair('RS256');
            const mismatched = await proofFor({ key: { ...es256, jwk: rsa.jwk } });
            await expectError(verifier.verify(input(mismatched)), 'invalid_dpop_proof', /does not fit its alg/);
        });

        it('rejects a proof signed by a key other than the embedded jwk', async () => {
            const proof = await proofFor({ key: es256, signWith: other.privateKey });
            await expectError(verifier.verify(input(proof)), 'invalid_dpop_proof', /signature is invalid/, proof);
            const [h, p, s] = (await proofFor({ key: es256 })).split('.');
            const altered = Buffer.from(JSON.stringify({ ...Jose.decodeJwt(`${h}.${p}.${s}`), htm: 'GET' })).toString('base64url');
            await expectError(verifier.verify(input(`${h}.${altered}.${s}`, { method: 'GET' })), 'invalid_dpop_proof', /signature is invalid/);
        });

        it('rejects a payload that is not a JSON object', async () => {
            for (const body of ['not json', '[1,2]', 'null']) {
                const proof = await new Jose.CompactSign(new TextEncoder().encode(body))
                    .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: es256.jwk })
                    .sign(es256.privateKey);
                await expectError(verifier.verify(input(proof)), 'invalid_dpop_proof', /payload is not (JSON|a JSON object)/, proof);
            }
        });

        it('rejects missing jti, htm, htu or iat', async () => {
            for (const claim of ['jti', 'htm', 'htu', 'iat']) {
                const proof = await proofFor({ key: es256, claims: { [claim]: undefined } });
                await expectError(verifier.verify(input(proof)), 'invalid_dpop_proof', new RegExp(`${claim} is missing`), proof);
            }
            await expectError(verifier.verify(input(await proofFor({ key: es256, claims: { jti: '' } }))), 'invalid_dpop_proof', /jti is missing/);
            await expectError(verifier.verify(input(await proofFor({ key: es256, claims: { iat: '123' } }))), 'invalid_dpop_proof', /iat is missing/);
            await expectError(verifier.verify(input(await proofFor({ key: es256, claims: { htm: '' } }))), 'invalid_dpop_proof', /htm is missing/);
            await expectError(verifier.verify(input(await proofFor({ key: es256, claims: { htu: 7 } }))), 'invalid_dpop_proof', /htu is missing/);
            await expectError(verifier.verify(input(await proofFor({ key: es256, claims: { jti: 'x'.repeat(201) } }))), 'invalid_dpop_proof', /jti is too long/);
        });

        it('compares htm with the uppercased request method, case-sensitively', async () => {
            await verifier.verify(input(await proofFor({ key: es256 }), { method: 'post' }));
            await expectError(verifier.verify(input(await proofFor({ key: es256, claims: { htm: 'GET' } }))), 'invalid_dpop_proof', /htm does not match/);
            await expectError(verifier.verify(input(await proofFor({ key: es256, claims: { htm: 'post' } }), { method: 'post' })), 'invalid_dpop_proof', /htm does not match/);
        });

        it('compares htu and the request URL after normalising both', async () => {
            // Query and fragment ignored on both sides, scheme and host case, default port.
            await verifier.verify(input(await proofFor({ key: es256, claims: { htu: 'HTTPS://Issuer.Example.com:443/t1/token?a=1#f' } }), { url: `${URL_TOKEN}?b=2` }));
            await verifier.verify(input(await proofFor({ key: es256, claims: { htu: URL_TOKEN } }), { url: 'https://issuer.example.com:443/t1/token' }));
            await verifier.verify(input(await proofFor({ key: es256, claims: { htu: 'http://issuer.example.com/t1/token' } }), { url: 'http://issuer.example.com:80/t1/token' }));

            for (const htu of ['https://issuer.example.com/t2/token', 'http://issuer.example.com/t1/token', 'https://issuer.example.com:8443/t1/token', 'https://evil.example.com/t1/token', '/t1/token', 'not a url']) {
                const proof = await proofFor({ key: es256, claims: { htu } });
                await expectError(verifier.verify(input(proof)), 'invalid_dpop_proof', /htu does not match/, proof);
            }
            await expect(verifier.verify(input(await proofFor({ key: es256 }), { url: '/t1/token' }))).to.reject(TypeError);
        });

        it('rejects an iat that is too old or in the future, allowing the skew', async () => {
            await expectError(verifier.verify(input(await proofFor({ key: es256, claims: { iat: now() - 120 } }))), 'invalid_dpop_proof', /too old/);
            await expectError(verifier.verify(input(await proofFor({ key: es256, claims: { iat: now() + 60 } }))), 'invalid_dpop_proof', /in the future/);
            await verifier.verify(input(await proofFor({ key: es256, claims: { iat: now() + 3 } })));
            await verifier.verify(input(await proofFor({ key: es256, claims: { iat: now() - 55 } })));

            const strict = new DpopVerifier(store, { maxAgeSeconds: 10, skewSeconds: 0 });
            await expectError(strict.verify(input(await proofFor({ key: es256, claims: { iat: now() - 20 } }))), 'invalid_dpop_proof', /too old/);
            await expectError(strict.verify(input(await proofFor({ key: es256, claims: { iat: now() + 3 } }))), 'invalid_dpop_proof', /in the future/);
        });

        it('checks ath against the access token on resource requests', async () => {
            const accessToken = Crypto.randomBytes(32).toString('base64url');
            const ath = Crypto.createHash('sha256').update(accessToken).digest('base64url');
            const resource = { method: 'GET', url: 'https://issuer.example.com/t1/credential', accessToken };
            const claims = { htm: 'GET', htu: resource.url };

            await verifier.verify(input(await proofFor({ key: es256, claims: { ...claims, ath } }), resource));
            await expectError(verifier.verify(input(await proofFor({ key: es256, claims }), resource)), 'invalid_dpop_proof', /ath is missing/);
            const wrong = Crypto.createHash('sha256').update('other-token').digest('base64url');
            await expectError(verifier.verify(input(await proofFor({ key: es256, claims: { ...claims, ath: wrong } }), resource)), 'invalid_dpop_proof', /ath does not match/);
            await expectError(verifier.verify(input(await proofFor({ key: es256, claims: { ...claims, ath: 42 } }), resource)), 'invalid_dpop_proof', /ath does not match/);
            // Without an access token (token endpoint), ath is not checked.
            await verifier.verify(input(await proofFor({ key: es256, claims: { ath: wrong } })));
        });

        it('demands a server nonce when required, then accepts the one it issued', async () => {
            const secret = Crypto.randomBytes(32);
            const nv = new DpopVerifier(store, { nonceSecret: secret });

            const first = await proofFor({ key: es256 });
            const err = await expectError(nv.verify(input(first, { requireNonce: true })), 'use_dpop_nonce', /must carry a server nonce/, first);
            const nonce = err.headers?.['DPoP-Nonce'];
            expect(nonce).to.be.a.string();
            expect(nonce).to.match(/^[A-Za-z0-9_-]{32}$/);

            const result = await nv.verify(input(await proofFor({ key: es256, claims: { nonce } }), { requireNonce: true }));
            expect(result.jkt).to.equal(await jwkThumbprint(es256.jwk));

            // A nonce is not needed when not required, and is then ignored.
            await nv.verify(input(await proofFor({ key: es256, claims: { nonce: 'whatever' } })));
        });

        it('rejects tampered, foreign, malformed and expired nonces with a fresh one', async () => {
            const secret = Crypto.randomBytes(32);
            const nv = new DpopVerifier(store, { nonceSecret: secret, nonceLifetimeSeconds: 300 });
            const good = nv.nonce();

            const raw = Buffer.from(good, 'base64url');
            raw[raw.length - 1] ^= 0x01;
            const tamperedMac = raw.toString('base64url');
            const rawTime = Buffer.from(good, 'base64url');
            rawTime[7] ^= 0x01;
            const tamperedTime = rawTime.toString('base64url');

            const rejected = [
                tamperedMac,
                tamperedTime,
                new DpopVerifier(store, { nonceSecret: Crypto.randomBytes(32) }).nonce(),
                nonceAt(secret, Date.now() - 301_000),
                nonceAt(secret, Date.now() + 60_000),
                `${good}A`,
                good.slice(0, -1),
                42
            ];
            for (const nonce of rejected) {
                const err = await expectError(nv.verify(input(await proofFor({ key: es256, claims: { nonce } }), { requireNonce: true })), 'use_dpop_nonce', /nonce is invalid or expired/);
                expect(err.headers?.['DPoP-Nonce']).to.match(/^[A-Za-z0-9_-]{32}$/);
                expect(err.headers?.['DPoP-Nonce']).to.not.equal(String(nonce));
            }

            await nv.verify(input(await proofFor({ key: es256, claims: { nonce: nonceAt(secret, Date.now() - 290_000) } }), { requireNonce: true }));
            await nv.verify(input(await proofFor({ key: es256, claims: { nonce: good } }), { requireNonce: true }));
        });

        it('checks the signature before the nonce, and rejects replays of nonce-carrying proofs', async () => {
            const nv = new DpopVerifier(store, { nonceSecret: Crypto.randomBytes(32) });
            const forged = await proofFor({ key: es256, signWith: other.privateKey });
            await expectError(nv.verify(input(forged, { requireNonce: true })), 'invalid_dpop_proof', /signature is invalid/);
            const proof = await proofFor({ key: es256, claims: { nonce: nv.nonce() } });
            await nv.verify(input(proof, { requireNonce: true }));
            await expectError(nv.verify(input(proof, { requireNonce: true })), 'invalid_dpop_proof', /already been used/);
        });

        it('accepts RS256 only when configured', async () => {
            const rsa = await keyPair('RS256');
            const proof = await proofFor({ key: rsa, alg: 'RS256' });
            await expectError(verifier.verify(input(proof)), 'invalid_dpop_proof', /alg is not allowed/);

            const both = new DpopVerifier(store, { algorithms: ['ES256', 'RS256'] });
            const result = await both.verify(input(proof));
            expect(result.jkt).to.equal(await Jose.calculateJwkThumbprint(rsa.jwk, 'sha256'));
            await both.verify(input(await proofFor({ key: es256 })));
            const pss = await keyPair('PS256');
            await expectError(both.verify(input(await proofFor({ key: pss, alg: 'PS256' }))), 'invalid_dpop_proof', /alg is not allowed/);
        });
    });
}
