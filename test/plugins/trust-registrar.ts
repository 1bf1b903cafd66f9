import Crypto from 'node:crypto';
import Fs from 'node:fs';
import type Http from 'node:http';
import Os from 'node:os';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as Jose from 'jose';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { freePort } from '../helpers/net';
import { party, type Party } from '../helpers/pki';
import { registrarConfigKind } from '../../resources/registrar-config';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';
import { startListServer, type ListServer } from '../helpers/trust-lists';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const CLIENT = { id: 'hallmark-acme', secret: 'registrar-client-secret-0123456789' };
const sha256 = (data: string) => Crypto.createHash('sha256').update(data).digest('hex');

/**
 * A registrar speaking the protocol of docs/trust.md: an OAuth 2.0 token endpoint (client credentials), and
 * registration certificates (JWT, typ rc-wrp+jwt, x5c of the registrar's signing certificate) registered for a
 * relying party or looked up by id.
 */
const startRegistrar = async (signer: Party, ca: Party) => {
    const issued = new Map<string, string>();
    const registrations: Array<{ rp: string; body: any }> = [];
    let counter = 0;
    let tokens = 0;
    const sign = (sub: string, claims: object) => new Jose.SignJWT({ ...claims })
        .setProtectedHeader({ alg: 'ES256', typ: 'rc-wrp+jwt', x5c: [Buffer.from(signer.cert.rawData).toString('base64')] })
        .setSubject(sub).setIssuer('https://registrar.test').setIssuedAt().setExpirationTime('30d')
        .sign(signer.privateKey);
    const json = (res: Http.ServerResponse, status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    const authorized = (req: Http.IncomingMessage) => /^Bearer tok-\d+$/.test(req.headers.authorization ?? '') || req.headers['x-registrar-key'] === 'api-key-0123456789';
    const server: ListServer = await startListServer((req, body, res) => {
        const path = new URL(req.url ?? '/', 'http://x').pathname;
        if (req.method === 'POST' && path === '/token') {
            const form = new URLSearchParams(body);
            if (form.get('grant_type') !== 'client_credentials' || form.get('client_id') !== CLIENT.id || form.get('client_secret') !== CLIENT.secret) {
                json(res, 401, { error: 'invalid_client' });
                return true;
            }
            json(res, 200, { access_token: `tok-${++tokens}`, token_type: 'Bearer', expires_in: 300 });
            return true;
        }
        if (path === '/garbage/registration-certificates/rc-known') {
            res.writeHead(200, { 'content-type': 'text/plain' }).end('not a certificate');
            return true;
        }
        const register = /^\/api\/relying-parties\/([^/]+)\/registration-certificates$/.exec(path);
        const lookup = /^\/api\/registration-certificates\/([^/]+)$/.exec(path);
        if (!register && !lookup) {
            return false;
        }
        if (!authorized(req)) {
            json(res, 401, { error: 'unauthorized' });
            return true;
        }
        if (register && req.method === 'POST') {
            const request = JSON.parse(body);
            registrations.push({ rp: decodeURIComponent(register[1]!), body: request });
            const id = `rc-${++counter}`;
            void sign(decodeURIComponent(register[1]!), { ...request, rc_id: id }).then((jwt) => {
                issued.set(id, jwt);
                json(res, 201, { id, jwt });
            });
            return true;
        }
        const jwt = lookup ? issued.get(decodeURIComponent(lookup[1]!)) : undefined;
        if (jwt) {
            res.writeHead(200, { 'content-type': 'application/jwt' }).end(jwt);
        }
        else {
            json(res, 404, { error: 'not_found' });
        }
        return true;
    });
    return { server, issued, registrations, sign, ca, tokens: () => tokens };
};

for (const dialect of DIALECTS) {
    describe(`registrar and registration certificates (${dialect})`, () => {
        let t: TestServer;
        let admin: string;
        let registrar: Awaited<ReturnType<typeof startRegistrar>>;
        let registrarCa: Party;
        let registrarSigner: Party;

        const call = async (method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE', url: string, payload?: object, status = method === 'POST' ? 201 : 200) => {
            const res = await t.server.inject({ method, url, headers: bearer(admin), ...(payload ? { payload } : {}) });
            expect(res.statusCode, res.payload).to.equal(status);
            return res.result as any;
        };
        const registrarConfig = () => ({
            registrarUrl: `${registrar.server.base}/api`,
            relyingPartyId: 'acme-rp',
            auth: { type: 'clientCredentials', tokenUrl: `${registrar.server.base}/token`, clientId: CLIENT.id, clientSecret: CLIENT.secret },
            signerCertificates: [registrarCa.cert.toString('pem')]
        });
        const requestObject = async (requestId: string) => {
            const offer = await call('POST', '/api/verifier/offer', { requestId });
            const res = await t.server.inject(new URL(offer.uri).searchParams.get('request_uri')!.replace('http://hallmark.test', ''));
            return { status: res.statusCode, claims: res.statusCode === 200 ? Jose.decodeJwt(res.payload) as any : undefined };
        };
        const dcql = (claim = 'given_name') => ({ credentials: [{ id: 'pid', format: 'dc+sd-jwt', meta: { vct_values: ['urn:eudi:pid:1'] }, claims: [{ path: [claim] }] }] });

        before(async () => {
            t = await startTestServer(dialect, {
                manifest: manifestFor('hallmark-trust', 'hallmark-oid4vp', 'hallmark-kms-db', 'hallmark-tenancy'),
                env: { OUTBOUND_URL_ALLOW_HTTP: 'true', OUTBOUND_URL_ALLOW_PRIVATE_NETWORK: 'true' }
            });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            registrarCa = await party('Registrar CA', null, { ca: true });
            registrarSigner = await party('Registrar', registrarCa);
            registrar = await startRegistrar(registrarSigner, registrarCa);
            await call('POST', '/api/key-chain', { id: 'verifier', usageType: 'access', subject: { commonName: 'Acme verifier' } });
        });
        after(async () => {
            await registrar?.server.close();
            await t?.stop();
        });

        it('/api/registrar/config: 404 until set, bad input 400, secrets redacted and kept when sent back, role registrar:manage', async () => {
            await call('GET', '/api/registrar/config', undefined, 404);
            for (const bad of [
                {},
                { registrarUrl: 'ftp://registrar.test', auth: { type: 'none' } },
                { registrarUrl: `${registrar.server.base}/api`, auth: { type: 'clientCredentials', tokenUrl: `${registrar.server.base}/token`, clientId: 'x' } },
                { registrarUrl: `${registrar.server.base}/api`, auth: { type: 'oauth' } },
                { registrarUrl: `${registrar.server.base}/api`, auth: { type: 'none' }, signerCertificates: ['not a certificate'] },
                { registrarUrl: `${registrar.server.base}/api`, auth: { type: 'none' }, relyingPartyId: 'a/b' },
                { registrarUrl: `${registrar.server.base}/api`, auth: { type: 'none' }, refreshBeforeExpirySeconds: 1 }
            ]) {
                const res = await t.server.inject({ method: 'PUT', url: '/api/registrar/config', headers: bearer(admin), payload: bad });
                expect(res.statusCode, JSON.stringify(bad)).to.equal(400);
            }
            const stored = await call('PUT', '/api/registrar/config', registrarConfig());
            expect(stored.auth.clientSecret).to.equal('[redacted]');
            expect(stored.refreshBeforeExpirySeconds).to.equal(86400);
            const read = await call('GET', '/api/registrar/config');
            expect(read.auth).to.equal({ type: 'clientCredentials', tokenUrl: `${registrar.server.base}/token`, clientId: CLIENT.id, clientSecret: '[redacted]' });
            // Sent back as read: the stored secret stays (the registrar still accepts it below).
            await call('PUT', '/api/registrar/config', read);
            const readerOnly = (await clientWithToken(t.server, await rootToken(t.server), { clientId: 'acme-verifier-admin', roles: ['presentation:config'], tenantId: 'acme' })).token;
            const forbidden = await t.server.inject({ method: 'PUT', url: '/api/registrar/config', headers: bearer(readerOnly), payload: registrarConfig() });
            expect(forbidden.statusCode).to.equal(403);
        });

        it('strategy body: the request object carries the registrar\'s certificate in verifier_info; cached, shown read-only, reissued, cleared on change, refreshed', async () => {
            await call('POST', '/api/verifier/config', {
                id: 'age', accessKeyChainId: 'verifier', dcql_query: dcql(),
                registration_cert: { body: { privacy_policy: 'https://acme.test/privacy', purpose: [{ lang: 'en', content: 'Age check' }] } }
            });
            const { claims } = await requestObject('age');
            expect(claims.verifier_info).to.have.length(1);
            expect(claims.verifier_info[0].format).to.equal('registration_cert');
            const jwt = claims.verifier_info[0].data as string;
            const { payload, protectedHeader } = await Jose.jwtVerify(jwt, await Jose.importX509(registrarSigner.cert.toString('pem'), 'ES256'));
            expect(protectedHeader.typ).to.equal('rc-wrp+jwt');
            expect(payload.sub).to.equal('acme-rp');
            expect(payload.privacy_policy).to.equal('https://acme.test/privacy');
            // The body named no credentials: those of the DCQL query are registered.
            expect(registrar.registrations.at(-1)!.body.credentials).to.equal([{ id: 'pid', format: 'dc+sd-jwt', meta: { vct_values: ['urn:eudi:pid:1'] }, claims: [{ path: ['given_name'] }] }]);
            expect(registrar.tokens()).to.equal(1);

            const shown = await call('GET', '/api/verifier/config/age');
            expect(shown.registrationCertCache).to.include({ strategy: 'body', id: 'rc-1', jwt, fingerprint: sha256(jwt) });
            expect(Date.parse(shown.registrationCertCache.expiresAt)).to.be.above(Date.now() + 29 * 86_400_000);
            expect((await call('GET', '/api/verifier/config')).items.find((c: any) => c.id === 'age').registrationCertCache.fingerprint).to.equal(sha256(jwt));
            // Read-only: refused in a body.
            const refused = await t.server.inject({ method: 'PATCH', url: '/api/verifier/config/age', headers: bearer(admin), payload: { registrationCertCache: shown.registrationCertCache } });
            expect(refused.statusCode).to.equal(400);

            // Cached: the next request makes no registrar call.
            const registered = registrar.registrations.length;
            expect((await requestObject('age')).claims.verifier_info[0].data).to.equal(jwt);
            expect(registrar.registrations.length).to.equal(registered);

            const reissued = await call('POST', '/api/verifier/config/age/registration-cert/reissue', undefined, 200);
            expect(reissued.id).to.equal(`rc-${registered + 1}`);
            expect(reissued.jwt).to.not.equal(jwt);
            expect((await requestObject('age')).claims.verifier_info[0].data).to.equal(reissued.jwt);

            // A changed DCQL query clears the cache (the old certificate is never shown or sent again) and a new one is
            // registered in the background.
            await call('PATCH', '/api/verifier/config/age', { dcql_query: dcql('family_name') });
            expect((await call('GET', '/api/verifier/config/age')).registrationCertCache?.jwt).to.not.equal(reissued.jwt);
            const renewed = (await requestObject('age')).claims.verifier_info[0].data;
            expect(renewed).to.not.equal(reissued.jwt);
            expect(registrar.registrations.at(-1)!.body.credentials[0].claims).to.equal([{ path: ['family_name'] }]);
            expect((await call('GET', '/api/verifier/config/age')).registrationCertCache.jwt).to.equal(renewed);

            // Background refresh before expiry.
            await t.server.jobs.runNow('registration-certs:refresh');
            expect((await call('GET', '/api/verifier/config/age')).registrationCertCache.jwt).to.equal(renewed);
            await t.server.db.knex('registration_certs').where({ tenantId: 'acme', configId: 'age' }).update({ refreshAt: 0 });
            await t.server.jobs.runNow('registration-certs:refresh');
            expect((await call('GET', '/api/verifier/config/age')).registrationCertCache.jwt).to.not.equal(renewed);
        });

        it('strategies id and jwt; a certificate not signed by the registrar\'s signer is refused', async () => {
            const known = await registrar.sign('acme-rp', { rc_id: 'rc-known' });
            registrar.issued.set('rc-known', known);
            await call('POST', '/api/verifier/config', { id: 'by-id', accessKeyChainId: 'verifier', dcql_query: dcql(), registration_cert: { id: 'rc-known' } });
            expect((await requestObject('by-id')).claims.verifier_info).to.equal([{ format: 'registration_cert', data: known }]);
            expect((await call('GET', '/api/verifier/config/by-id')).registrationCertCache).to.include({ strategy: 'id', id: 'rc-known' });

            await call('POST', '/api/verifier/config', { id: 'imported', accessKeyChainId: 'verifier', dcql_query: dcql(), registration_cert: { jwt: known } });
            expect((await requestObject('imported')).claims.verifier_info).to.equal([{ format: 'registration_cert', data: known }]);

            const stranger = await party('Stranger', null, { ca: true });
            const forged = await new Jose.SignJWT({ sub: 'acme-rp' }).setProtectedHeader({ alg: 'ES256', typ: 'rc-wrp+jwt', x5c: [Buffer.from(stranger.cert.rawData).toString('base64')] }).setExpirationTime('1d').sign(stranger.privateKey);
            await call('POST', '/api/verifier/config', { id: 'forged', accessKeyChainId: 'verifier', dcql_query: dcql(), registration_cert: { jwt: forged } });
            expect((await requestObject('forged')).status).to.equal(503);
            await call('POST', '/api/verifier/config/forged/registration-cert/reissue', undefined, 503);

            await call('POST', '/api/verifier/config', { id: 'unknown-id', accessKeyChainId: 'verifier', dcql_query: dcql(), registration_cert: { id: 'rc-missing' } });
            await call('POST', '/api/verifier/config/unknown-id/registration-cert/reissue', undefined, 503);

            // An imported certificate that expired, or that is no JWT at all.
            const expired = await new Jose.SignJWT({ sub: 'acme-rp' }).setProtectedHeader({ alg: 'ES256', typ: 'rc-wrp+jwt', x5c: [Buffer.from(registrarSigner.cert.rawData).toString('base64')] }).setExpirationTime(Math.floor(Date.now() / 1000) - 60).sign(registrarSigner.privateKey);
            await call('POST', '/api/verifier/config', { id: 'expired', accessKeyChainId: 'verifier', dcql_query: dcql(), registration_cert: { jwt: expired } });
            await call('POST', '/api/verifier/config/expired/registration-cert/reissue', undefined, 503);
            await call('POST', '/api/verifier/config', { id: 'not-jwt', accessKeyChainId: 'verifier', dcql_query: dcql(), registration_cert: { jwt: 'not a jwt' } });
            await call('POST', '/api/verifier/config/not-jwt/registration-cert/reissue', undefined, 503);
        });

        it('reissue: 404 for an unknown configuration, 400 without registration_cert; registrar down 503; no registrar configuration, no certificate', async () => {
            await call('POST', '/api/verifier/config/nope/registration-cert/reissue', undefined, 404);
            await call('POST', '/api/verifier/config', { id: 'plain', accessKeyChainId: 'verifier', dcql_query: dcql() });
            await call('POST', '/api/verifier/config/plain/registration-cert/reissue', undefined, 400);
            expect((await requestObject('plain')).claims.verifier_info).to.not.exist();

            const down = await freePort();
            await call('PUT', '/api/registrar/config', { ...registrarConfig(), registrarUrl: `http://127.0.0.1:${down}/api` });
            await call('POST', '/api/verifier/config/age/registration-cert/reissue', undefined, 503);
            // Wrong client secret: the token endpoint refuses.
            await call('PUT', '/api/registrar/config', { ...registrarConfig(), auth: { ...registrarConfig().auth, clientSecret: 'wrong-secret-0123456789' } });
            await call('POST', '/api/verifier/config/age/registration-cert/reissue', undefined, 503);

            // API key authentication instead of client credentials.
            await call('PUT', '/api/registrar/config', { ...registrarConfig(), auth: { type: 'apiKey', config: { headerName: 'X-Registrar-Key', value: 'api-key-0123456789' } } });
            expect((await call('GET', '/api/registrar/config')).auth.config.value).to.equal('[redacted]');
            expect((await call('POST', '/api/verifier/config/age/registration-cert/reissue', undefined, 200)).strategy).to.equal('body');
            // A registrar answer that is no certificate; a body without the registrar's relyingPartyId.
            await call('PUT', '/api/registrar/config', { ...registrarConfig(), registrarUrl: `${registrar.server.base}/garbage` });
            await call('POST', '/api/verifier/config/by-id/registration-cert/reissue', undefined, 503);
            const { relyingPartyId: _unused, ...withoutRp } = registrarConfig();
            await call('PUT', '/api/registrar/config', withoutRp);
            await call('POST', '/api/verifier/config/age/registration-cert/reissue', undefined, 400);

            await call('DELETE', '/api/registrar/config', undefined, 204);
            expect((await requestObject('age')).claims.verifier_info).to.not.exist();
            expect((await call('GET', '/api/verifier/config/age')).registrationCertCache).to.not.exist();
            await call('POST', '/api/verifier/config/age/registration-cert/reissue', undefined, 400);
        });
    });

    describe(`registrar.json in a configuration folder (${dialect})`, () => {
        it('imports with its secret from a ${VAR} placeholder, and exports the secret as a placeholder again (SECRET_REQUIRED)', async () => {
            const folder = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-registrar-'));
            Fs.mkdirSync(Path.join(folder, 'ops'));
            Fs.writeFileSync(Path.join(folder, 'ops', 'info.json'), JSON.stringify({ name: 'Operations' }));
            Fs.writeFileSync(Path.join(folder, 'ops', 'registrar.json'), JSON.stringify({
                registrarUrl: 'https://registrar.example.com/api', relyingPartyId: 'ops',
                auth: { type: 'clientCredentials', tokenUrl: 'https://registrar.example.com/token', clientId: 'ops', clientSecret: '${OPS_REGISTRAR_SECRET}' }
            }));
            const t = await startTestServer(dialect, { manifest: manifestFor('hallmark-trust', 'hallmark-tenancy'), env: { CONFIG_FOLDER: folder, OPS_REGISTRAR_SECRET: 'ops-registrar-secret-0123456789' } });
            try {
                const ctx = { tenantId: 'ops', clientId: 'system:test', roles: [] };
                const stored = await t.server.registry.get(ctx, registrarConfigKind);
                expect(stored!.spec.auth).to.include({ clientSecret: 'ops-registrar-secret-0123456789' });
                const exported = await t.server.registry.export(ctx);
                expect(JSON.stringify(exported)).to.not.contain('ops-registrar-secret-0123456789');
                const doc = exported.documents.find((d) => d.kind === 'RegistrarConfig')!;
                expect(doc.path).to.equal('registrar.json');
                expect(exported.requirements.filter((r) => r.resource === 'RegistrarConfig').map((r) => `${r.code} ${r.path}`)).to.equal(['SECRET_REQUIRED auth.clientSecret']);
            }
            finally {
                await t.stop();
                Fs.rmSync(folder, { recursive: true, force: true });
            }
        });
    });
}
