import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as Jose from 'jose';
import { loadConfig } from '../../manifests/environment';
import { createServer } from '../../lib/compose';
import { ServiceKeyModel } from '../../plugins/oauth2/models/service-key';
import { ServiceKeys } from '../../plugins/oauth2/service-keys';
import { LOCKOUT } from '../../plugins/oauth2/auth-failures';
import { DIALECTS } from '../helpers/databases';
import { manifestFor, ROOT_CLIENT, startTestServer, testEnv, type TestServer } from '../helpers/server';
import Pino from 'pino';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;

for (const dialect of DIALECTS) {
    describe(`integrated OAuth2 server (${dialect})`, () => {
        let t: TestServer;
        const token = async (payload: object | string, headers: Record<string, string> = {}) =>
            t.server.inject({ method: 'POST', url: '/api/oauth2/token', payload, headers });
        const rootToken = async () => ((await token({ grant_type: 'client_credentials', client_id: ROOT_CLIENT.id, client_secret: ROOT_CLIENT.secret })).result as any).access_token as string;

        before(async () => {
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-oauth2', 'hallmark-kms-db', 'hallmark-tenancy') });
        });
        after(() => t.stop());

        it('issues an ES256 JWT for a JSON body, a form body and HTTP Basic, verifiable with the published JWKS', async () => {
            const json = await token({ grant_type: 'client_credentials', client_id: ROOT_CLIENT.id, client_secret: ROOT_CLIENT.secret });
            const viaForm = await token(form({ grant_type: 'client_credentials', client_id: ROOT_CLIENT.id, client_secret: ROOT_CLIENT.secret }), { 'content-type': 'application/x-www-form-urlencoded' });
            const viaBasic = await token(form({ grant_type: 'client_credentials' }), { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(ROOT_CLIENT.id, ROOT_CLIENT.secret) });
            const jwks = JSON.parse((await t.server.inject('/api/oauth2/jwks')).payload);
            for (const res of [json, viaForm, viaBasic]) {
                expect(res.statusCode).to.equal(200);
                expect(res.headers['cache-control']).to.equal('no-store');
                const body = res.result as any;
                expect(body.token_type).to.equal('Bearer');
                expect(body.expires_in).to.equal(3600);
                const { payload, protectedHeader } = await Jose.jwtVerify(body.access_token, Jose.createLocalJWKSet(jwks), { issuer: 'http://hallmark.test', audience: 'http://hallmark.test/api' });
                expect(protectedHeader.alg).to.equal('ES256');
                expect(payload.sub).to.equal(ROOT_CLIENT.id);
                expect(payload.roles).to.equal(['tenant:manage']);
                expect(payload.tenant_id).to.not.exist();
                expect(payload.jti).to.be.a.string();
                expect(payload.exp! - payload.iat!).to.equal(3600);
            }
        });

        it('answers RFC 6749 errors for bad token requests, never 500', async () => {
            const cases: Array<[object | string, Record<string, string>, number, string]> = [
                [{ grant_type: 'password', client_id: ROOT_CLIENT.id, client_secret: ROOT_CLIENT.secret }, {}, 400, 'unsupported_grant_type'],
                [{ client_id: ROOT_CLIENT.id, client_secret: ROOT_CLIENT.secret }, {}, 400, 'invalid_request'],
                [{ grant_type: 'client_credentials', client_id: ROOT_CLIENT.id }, {}, 400, 'invalid_request'],
                [{ grant_type: 'client_credentials', client_id: ROOT_CLIENT.id, client_secret: 'wrong-secret' }, {}, 401, 'invalid_client'],
                [{ grant_type: 'client_credentials', client_id: 'nobody', client_secret: 'whatever-secret' }, {}, 401, 'invalid_client'],
                [form({ grant_type: 'client_credentials' }), { 'content-type': 'application/x-www-form-urlencoded', authorization: 'Basic !!!' }, 401, 'invalid_client'],
                [form({ grant_type: 'client_credentials' }), { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from('no-colon').toString('base64')}` }, 401, 'invalid_client'],
                // A NUL in the decoded header (raw or percent-encoded) never reaches the database.
                [form({ grant_type: 'client_credentials' }), { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from('ro\u0000ot:secret').toString('base64')}` }, 401, 'invalid_client'],
                [form({ grant_type: 'client_credentials' }), { 'content-type': 'application/x-www-form-urlencoded', authorization: basic('ro\u0000ot', 'secret') }, 401, 'invalid_client'],
                [form({ grant_type: 'client_credentials' }), { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(ROOT_CLIENT.id, 'se\u0000cret') }, 401, 'invalid_client'],
                ['{"grant_type": ', { 'content-type': 'application/json' }, 400, 'invalid_request'],
                ['grant_type=client_credentials', { 'content-type': 'text/plain' }, 415, 'invalid_request'],
                [{ grant_type: 'client_credentials', client_id: ROOT_CLIENT.id, client_secret: ROOT_CLIENT.secret }, { authorization: basic(ROOT_CLIENT.id, ROOT_CLIENT.secret) }, 400, 'invalid_request']
            ];
            for (const [payload, headers, status, error] of cases) {
                const res = await token(payload, headers);
                expect(res.statusCode, JSON.stringify(payload)).to.equal(status);
                expect((res.result as any).error, JSON.stringify(payload)).to.equal(error);
                expect((res.result as any).error_description).to.be.a.string();
            }
            const basicFailure = await token(form({ grant_type: 'client_credentials' }), { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(ROOT_CLIENT.id, 'wrong') });
            expect(basicFailure.headers['www-authenticate']).to.equal('Basic realm="hallmark"');
        });

        it('ignores unknown token request fields', async () => {
            const res = await token({ grant_type: 'client_credentials', client_id: ROOT_CLIENT.id, client_secret: ROOT_CLIENT.secret, scope: 'x', audience: 'y' });
            expect(res.statusCode).to.equal(200);
        });

        it('stores client secrets only as a keyed hash', async () => {
            const row = await t.server.db.knex('clients').where({ client_id: ROOT_CLIENT.id }).first();
            expect(row.secretHash as string).to.startWith('hmac-sha256.');
            expect(JSON.stringify(row)).to.not.contain(ROOT_CLIENT.secret);
        });

        it('locks a client for a while from the address that sent repeated wrong secrets, not from elsewhere', async () => {
            const rootAuth = { authorization: `Bearer ${await rootToken()}` };
            await t.server.inject({ method: 'POST', url: '/api/tenants', payload: { id: 'lockout', name: 'Lockout' }, headers: rootAuth });
            const created = await t.server.inject({ method: 'POST', url: '/api/clients', payload: { clientId: 'lock-me', roles: ['tenant:read'], tenantId: 'lockout' }, headers: rootAuth });
            const secret = (created.result as any).clientSecret;
            const tokenFrom = (remoteAddress: string, clientSecret: string) =>
                t.server.inject({ method: 'POST', url: '/api/oauth2/token', remoteAddress, payload: { grant_type: 'client_credentials', client_id: 'lock-me', client_secret: clientSecret } });
            for (let i = 0; i < LOCKOUT.maxFailures; i++) {
                expect((await tokenFrom('198.51.100.7', `wrong-${i}`)).statusCode).to.equal(401);
            }
            const locked = await tokenFrom('198.51.100.7', secret);
            expect(locked.statusCode).to.equal(401);
            expect((locked.result as any).error_description).to.contain('too many failed attempts');
            // The real client elsewhere and other clients are not affected.
            expect((await tokenFrom('203.0.113.9', secret)).statusCode).to.equal(200);
            expect((await token({ grant_type: 'client_credentials', client_id: ROOT_CLIENT.id, client_secret: ROOT_CLIENT.secret })).statusCode).to.equal(200);
            const realNow = Date.now;
            Date.now = () => realNow() + LOCKOUT.lockSeconds * 1000 + 1000;
            try {
                expect((await tokenFrom('198.51.100.7', secret)).statusCode).to.equal(200);
            }
            finally {
                Date.now = realNow;
            }
            // A success reset the count: one more wrong secret does not lock again.
            expect((await tokenFrom('198.51.100.7', 'wrong-again')).statusCode).to.equal(401);
            expect((await tokenFrom('198.51.100.7', secret)).statusCode).to.equal(200);
        });

        it('a changed client starts every source address afresh', async () => {
            const rootAuth = { authorization: `Bearer ${await rootToken()}` };
            await t.server.inject({ method: 'POST', url: '/api/tenants', payload: { id: 'lockout2', name: 'Lockout 2' }, headers: rootAuth });
            const created = await t.server.inject({ method: 'POST', url: '/api/clients', payload: { clientId: 'lock-me-2', roles: ['tenant:read'], tenantId: 'lockout2' }, headers: rootAuth });
            expect(created.statusCode).to.equal(201);
            const tokenWith = (clientSecret: string) =>
                t.server.inject({ method: 'POST', url: '/api/oauth2/token', remoteAddress: '198.51.100.8', payload: { grant_type: 'client_credentials', client_id: 'lock-me-2', client_secret: clientSecret } });
            for (let i = 0; i < LOCKOUT.maxFailures; i++) {
                await tokenWith(`wrong-${i}`);
            }
            const rotated = await t.server.inject({ method: 'POST', url: '/api/clients/lock-me-2/rotate-secret?tenantId=lockout2', headers: rootAuth });
            expect(rotated.statusCode).to.equal(200);
            expect((await tokenWith((rotated.result as any).clientSecret)).statusCode).to.equal(200);
        });

        it('rejects missing, malformed, expired, foreign, unsigned and wrongly issued bearer tokens with 401 and WWW-Authenticate', async () => {
            const valid = await rootToken();
            const [row] = await t.server.db.model(ServiceKeyModel).query().whereNull('retiredAt');
            const serviceKey = Crypto.createPrivateKey({ key: JSON.parse(row!.privateJwk), format: 'jwk' });
            const now = Math.floor(Date.now() / 1000);
            const sign = (claims: Jose.JWTPayload, key: Crypto.KeyObject = serviceKey, header: Jose.JWTHeaderParameters = { alg: 'ES256', kid: row!.kid, typ: 'at+jwt' }) =>
                new Jose.SignJWT({ roles: ['tenant:manage'], sub: ROOT_CLIENT.id, iat: now, iss: 'http://hallmark.test', aud: 'http://hallmark.test/api', exp: now + 3600, ...claims })
                    .setProtectedHeader(header).sign(key);
            const unsigned = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'at+jwt' })).toString('base64url')}.${Buffer.from(JSON.stringify({ sub: ROOT_CLIENT.id, roles: ['tenant:manage'], iss: 'http://hallmark.test', aud: 'http://hallmark.test/api', exp: 9999999999, iat: 1 })).toString('base64url')}.`;
            const cases: Array<[string | undefined, string]> = [
                [undefined, 'Bearer realm="hallmark"'],
                ['Bearer', 'error="invalid_request"'],
                ['Basic abc', 'error="invalid_request"'],
                [`Bearer ${valid.slice(0, -4)}AAAA`, 'error="invalid_token"'],
                [`Bearer ${await sign({ exp: Math.floor(Date.now() / 1000) - 10 })}`, 'The token has expired'],
                [`Bearer ${await sign({}, Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey)}`, 'error="invalid_token"'],
                [`Bearer ${await sign({}, Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey, { alg: 'ES256', kid: 'other', typ: 'at+jwt' })}`, 'error="invalid_token"'],
                [`Bearer ${await sign({ iss: 'https://other.example' })}`, 'error="invalid_token"'],
                [`Bearer ${await sign({ aud: 'https://other.example/api' })}`, 'error="invalid_token"'],
                [`Bearer ${await sign({}, serviceKey, { alg: 'ES256', kid: row!.kid, typ: 'JWT' })}`, 'error="invalid_token"'],
                [`Bearer ${await sign({ roles: 'tenant:manage' })}`, 'error="invalid_token"'],
                [`Bearer ${unsigned}`, 'error="invalid_token"']
            ];
            for (const [authorization, expected] of cases) {
                const res = await t.server.inject({ url: '/api/tenants', headers: authorization ? { authorization } : {} });
                expect(res.statusCode, authorization).to.equal(401);
                expect(String(res.headers['www-authenticate']), authorization).to.startWith('Bearer');
                expect(res.headers['www-authenticate'], authorization).to.contain(expected);
                expect((res.result as any).statusCode).to.equal(401);
            }
            expect((await t.server.inject({ url: '/api/tenants', headers: { authorization: `Bearer ${valid}` } })).statusCode).to.equal(200);
            expect((await t.server.inject({ url: '/api/tenants', headers: { authorization: `Bearer ${await sign({})}` } })).statusCode).to.equal(200);
        });

        it('answers 403 for a token without the route\'s role', async () => {
            const rootAuth = { authorization: `Bearer ${await rootToken()}` };
            await t.server.inject({ method: 'POST', url: '/api/tenants', payload: { id: 'roles', name: 'Roles' }, headers: rootAuth });
            const created = await t.server.inject({ method: 'POST', url: '/api/clients', payload: { clientId: 'reader', roles: ['tenant:read'], tenantId: 'roles' }, headers: rootAuth });
            const reader = (await token({ grant_type: 'client_credentials', client_id: 'reader', client_secret: (created.result as any).clientSecret })).result as any;
            const res = await t.server.inject({ url: '/api/tenants', headers: { authorization: `Bearer ${reader.access_token}` } });
            expect(res.statusCode).to.equal(403);
        });

        it('stops honouring a token once its client is deleted, and the roles taken from a client', async () => {
            const rootAuth = { authorization: `Bearer ${await rootToken()}` };
            await t.server.inject({ method: 'POST', url: '/api/tenants', payload: { id: 'revoke', name: 'Revoke' }, headers: rootAuth });
            const created = await t.server.inject({ method: 'POST', url: '/api/clients', payload: { clientId: 'shortlived', roles: ['tenant:admin'], tenantId: 'revoke' }, headers: rootAuth });
            const issued = (await token({ grant_type: 'client_credentials', client_id: 'shortlived', client_secret: (created.result as any).clientSecret })).result as any;
            const auth = { authorization: `Bearer ${issued.access_token}` };
            expect((await t.server.inject({ url: '/api/key-chain', headers: auth })).statusCode).to.equal(200);
            await t.server.inject({ method: 'PATCH', url: '/api/clients/shortlived?tenantId=revoke', payload: { roles: ['tenant:read'] }, headers: rootAuth });
            expect((await t.server.inject({ method: 'POST', url: '/api/key-chain', payload: { id: 'k', usageType: 'access' }, headers: auth })).statusCode).to.equal(403);
            await t.server.inject({ method: 'DELETE', url: '/api/clients/shortlived?tenantId=revoke', headers: rootAuth });
            const gone = await t.server.inject({ url: '/api/key-chain', headers: auth });
            expect(gone.statusCode).to.equal(401);
            expect(gone.headers['www-authenticate']).to.contain('no longer exists');
        });

        it('rotates the signing key and keeps accepting tokens of the previous key', async () => {
            const before = await rootToken();
            const keys = new ServiceKeys(t.server.db, t.config.auth.tokenTtl);
            await keys.init();
            const newKid = await keys.rotate();
            const jwks = JSON.parse((await t.server.inject('/api/oauth2/jwks')).payload);
            expect(jwks.keys.length >= 2).to.be.true();
            expect(jwks.keys.map((k: any) => k.kid)).to.include(newKid);
            expect(JSON.stringify(jwks)).to.not.contain('"d"');
            expect((await t.server.inject({ url: '/api/tenants', headers: { authorization: `Bearer ${before}` } })).statusCode).to.equal(200);
            // A retired key disappears once its tokens have expired.
            await t.server.db.knex('service_keys').whereNot({ kid: newKid }).update({ retired_at: new Date(Date.now() - 2 * 3600_000).toISOString() });
            const after = JSON.parse((await t.server.inject('/api/oauth2/jwks')).payload);
            expect(after.keys.map((k: any) => k.kid)).to.equal([newKid]);
        });
    });

    describe(`root client bootstrap (${dialect})`, () => {
        it('is idempotent and a changed AUTH_CLIENT_SECRET replaces the stored hash at the next start', async () => {
            const t = await startTestServer(dialect, { manifest: manifestFor('hallmark-oauth2', 'hallmark-tenancy') });
            try {
                const auditCount = async () => Number((await t.server.db.knex('audit_logs').where({ kind: 'Client', resource_id: ROOT_CLIENT.id }).count({ n: '*' }))[0]!.n);
                expect(await auditCount()).to.equal(1);
                const restart = async (env: Record<string, string>) => {
                    const server = await createServer(manifestFor('hallmark-oauth2', 'hallmark-tenancy')(loadConfig(testEnv(t.database, env))), { logger: Pino({ level: 'silent' }) });
                    await server.initialize();
                    return server;
                };
                const same = await restart({});
                await same.stop();
                expect(await auditCount()).to.equal(1);

                const changed = await restart({ AUTH_CLIENT_SECRET: 'a-brand-new-root-secret-0123456789' });
                try {
                    const old = await changed.inject({ method: 'POST', url: '/api/oauth2/token', payload: { grant_type: 'client_credentials', client_id: ROOT_CLIENT.id, client_secret: ROOT_CLIENT.secret } });
                    expect(old.statusCode).to.equal(401);
                    const fresh = await changed.inject({ method: 'POST', url: '/api/oauth2/token', payload: { grant_type: 'client_credentials', client_id: ROOT_CLIENT.id, client_secret: 'a-brand-new-root-secret-0123456789' } });
                    expect(fresh.statusCode).to.equal(200);
                }
                finally {
                    await changed.stop();
                }
                expect(await auditCount()).to.equal(2);
                const audit = await t.server.db.knex('audit_logs').where({ kind: 'Client', resource_id: ROOT_CLIENT.id, action: 'update' }).first();
                expect(audit.changes).to.not.contain('a-brand-new-root-secret');
            }
            finally {
                await t.stop();
            }
        });
    });
}

describe('master secret', () => {
    it('must have at least 32 characters', () => {
        expect(() => loadConfig({ PUBLIC_URL: 'https://x.example', MASTER_SECRET: 'x'.repeat(31), AUTH_CLIENT_ID: 'r', AUTH_CLIENT_SECRET: 'a-long-enough-secret' })).to.throw(/MASTER_SECRET/);
    });
});
