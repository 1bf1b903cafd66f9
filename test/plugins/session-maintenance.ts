import Crypto from 'node:crypto';
import Http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as Jose from 'jose';
import Pino from 'pino';
import type { SessionStatus, SessionType } from '../../plugins/sessions/models/session';
import { MAINTENANCE_BATCH_SIZE, runSessionMaintenance, SESSION_MAINTENANCE_JOB } from '../../plugins/sessions/jobs/maintenance';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const PRE_AUTHORIZED = 'urn:ietf:params:oauth:grant-type:pre-authorized_code';
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const iso = (offsetMs: number) => new Date(Date.now() + offsetMs).toISOString();
const random = () => Crypto.randomBytes(16).toString('hex');

/** Columns that hold a handle a wallet or caller could use or correlate; anonymize clears them all. */
const HANDLES = ['offerId', 'codeHash', 'accessTokenHash', 'walletNonce', 'responseCode'] as const;

interface SessionSpec {
    type?: SessionType;
    status?: SessionStatus;
    /** Age of the session (createdAt in the past), in ms. */
    age?: number;
    /** expiresAt relative to now, in ms (negative: overdue); absent: no expiry. */
    expiresIn?: number;
    /** The pre-authorized code was redeemed. */
    redeemed?: boolean;
}

/** A webhook receiver on 127.0.0.1 that records what it is sent. */
const webhookReceiver = async () => {
    const received: Array<{ url: string; body: unknown }> = [];
    const server = Http.createServer((req, res) => {
        let body = '';
        req.on('data', (c) => (body += c));
        req.on('end', () => {
            received.push({ url: req.url ?? '', body: body ? JSON.parse(body) : undefined });
            res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return {
        received,
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
        close: () => new Promise<void>((resolve) => server.close(() => resolve()))
    };
};

for (const dialect of DIALECTS) {
    describe(`session maintenance (${dialect})`, () => {
        let t: TestServer;
        let hooks: Awaited<ReturnType<typeof webhookReceiver>>;

        const knex = () => t.server.db.knex;
        const row = async (id: string) => (await knex()('sessions').where({ id }).first()) as Record<string, unknown> | undefined;
        const statusOf = async (id: string) => (await row(id))?.status;
        const count = async (tenantId: string) => Number(((await knex()('sessions').where({ tenantId }).count({ n: '*' }))[0] as { n: string | number }).n);
        const run = () => runSessionMaintenance({ db: t.server.db, singleUse: t.server.singleUse, sessions: t.config.sessions });

        /** A session with personal data and every handle, aged and timed as asked. */
        const make = async (tenantId: string, spec: SessionSpec = {}): Promise<string> => {
            const type = spec.type ?? 'presentation';
            const session = await t.server.sessions.create({
                tenantId,
                type,
                status: spec.status ?? 'active',
                reference: 'order-4711',
                requestId: type === 'presentation' ? 'pid-request' : null,
                credentialConfigurationIds: type === 'issuance' ? ['pid'] : null,
                offerId: random(),
                codeHash: random(),
                accessTokenHash: random(),
                accessTokenExpiresAt: iso(5 * MINUTE),
                walletNonce: random(),
                responseCode: random(),
                codeUsedAt: spec.redeemed ? iso(-MINUTE) : null,
                expiresAt: spec.expiresIn === undefined ? null : iso(spec.expiresIn),
                data: {
                    claims: { pid: { type: 'inline', claims: { given_name: 'Erika', family_name: 'Mustermann' } } },
                    result: { credentials: [{ id: 'pid', values: [{ given_name: 'Erika', birthdate: '1964-08-12' }] }], outcome: { result: 'success' } },
                    transaction_data: [{ type: 'payment', amount: '42.00' }]
                } as never // personal data of both flows in one blob: anonymizing must remove all of it
            });
            if (spec.age) {
                await knex()('sessions').where({ id: session.id }).update({ createdAt: iso(-spec.age), updatedAt: iso(-spec.age) });
            }
            return session.id;
        };

        const addLog = (tenantId: string, sessionId: string) => knex()('session_logs').insert({
            tenantId, sessionId, level: 'info', flowType: 'OID4VP', stage: 'response', message: 'response received', detail: 'sealed body', createdAt: iso(0)
        });

        before(async () => {
            hooks = await webhookReceiver();
            // Global defaults: one hour, anonymize. Tenants override either or both.
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-sessions', 'hallmark-oid4vci', 'hallmark-kms-db', 'hallmark-tenancy'), env: { SESSION_TTL: '3600', SESSION_CLEANUP_MODE: 'anonymize', OUTBOUND_URL_ALLOW_HTTP: 'true', OUTBOUND_URL_ALLOW_PRIVATE_NETWORK: 'true' } });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'plain');
            await createTenant(t.server, root, 'short-full', { sessionConfig: { ttlSeconds: 600, cleanupMode: 'full' } });
            await createTenant(t.server, root, 'long-full', { sessionConfig: { ttlSeconds: 7 * 86_400, cleanupMode: 'full' } });
            await createTenant(t.server, root, 'short-anon', { sessionConfig: { ttlSeconds: 600, cleanupMode: 'anonymize' } });
            await createTenant(t.server, root, 'hooks', { sessionConfig: { ttlSeconds: 86_400, cleanupMode: 'full' } });
            await createTenant(t.server, root, 'bulk', { sessionConfig: { ttlSeconds: 86_400, cleanupMode: 'full' } });
        });
        after(async () => {
            await t.stop();
            await hooks.close();
        });

        it('expires overdue active and fetched sessions and no others; a redeemed offer does not expire', async () => {
            const overdue = -MINUTE;
            const expected: Record<string, SessionStatus> = {
                [await make('plain', { status: 'active', expiresIn: overdue })]: 'expired',
                [await make('plain', { status: 'fetched', expiresIn: overdue })]: 'expired',
                [await make('plain', { status: 'active', expiresIn: HOUR })]: 'active',
                [await make('plain', { status: 'fetched', expiresIn: HOUR })]: 'fetched',
                [await make('plain', { status: 'completed', expiresIn: overdue })]: 'completed',
                [await make('plain', { status: 'failed', expiresIn: overdue })]: 'failed',
                [await make('plain', { status: 'active' })]: 'active',
                [await make('plain', { type: 'issuance', status: 'active', expiresIn: overdue })]: 'expired',
                [await make('plain', { type: 'issuance', status: 'active', expiresIn: HOUR })]: 'active',
                [await make('plain', { type: 'issuance', status: 'active' })]: 'active',
                // Redeemed before expiresAt: the wallet may still fetch its credential, or already has.
                [await make('plain', { type: 'issuance', status: 'active', expiresIn: overdue, redeemed: true })]: 'active',
                [await make('plain', { type: 'issuance', status: 'fetched', expiresIn: overdue, redeemed: true })]: 'fetched',
                [await make('plain', { type: 'issuance', status: 'completed', expiresIn: overdue, redeemed: true })]: 'completed'
            };
            const before = Object.fromEntries(await Promise.all(Object.keys(expected).map(async (id) => [id, (await row(id))!.updatedAt])));

            const started = Date.now();
            await t.server.jobs.runNow(SESSION_MAINTENANCE_JOB);
            for (const [id, status] of Object.entries(expected)) {
                const after = (await row(id))!;
                expect(after.status, `${id} should be ${status}`).to.equal(status);
                if (status === 'expired') {
                    expect(Date.parse(String(after.updatedAt instanceof Date ? after.updatedAt.toISOString() : after.updatedAt))).to.be.at.least(started - 5);
                }
                else {
                    expect(after.updatedAt).to.equal(before[id]);
                }
                // Expiry is a status change only: the session keeps its data (retention is another matter).
                expect(after.data).to.be.a.string();
            }
            // A second run finds nothing left to expire.
            expect((await run()).expired).to.equal(0);
        });

        it('full mode deletes sessions past the retention period, with their logs, and keeps the younger ones', async () => {
            const old = await make('short-full', { status: 'completed', age: 20 * MINUTE });
            const oldActive = await make('short-full', { status: 'active', age: 11 * MINUTE });
            const young = await make('short-full', { status: 'completed', age: 5 * MINUTE });
            await addLog('short-full', old);
            await addLog('short-full', young);
            expect(await count('short-full')).to.equal(3);

            const result = await run();
            expect(result.deleted).to.be.at.least(2);
            expect(await count('short-full')).to.equal(1);
            expect(await row(old)).to.not.exist();
            expect(await row(oldActive)).to.not.exist();
            expect(await row(young)).to.exist();
            expect((await knex()('session_logs').where({ tenantId: 'short-full' })).map((l: { sessionId: string }) => l.sessionId)).to.equal([young]);
            expect((await run()).deleted).to.equal(0);
        });

        it('anonymize mode keeps old rows without personal data, claims, credentials or handles', async () => {
            const old = await make('plain', { status: 'completed', age: 2 * HOUR });
            const oldIssuance = await make('plain', { type: 'issuance', status: 'fetched', age: 2 * HOUR, redeemed: true });
            const young = await make('plain', { status: 'completed', age: 30 * MINUTE });
            await addLog('plain', old);
            await addLog('plain', young);
            const countBefore = await count('plain');
            const youngBefore = await row(young);

            const result = await run();
            expect(result.anonymized).to.equal(2);
            expect(result.deleted).to.equal(0);
            expect(await count('plain')).to.equal(countBefore);
            for (const id of [old, oldIssuance]) {
                const anonymized = (await row(id))!;
                expect(anonymized.data, 'sealed personal data').to.be.null();
                for (const handle of HANDLES) {
                    expect(anonymized[handle], handle).to.be.null();
                }
                expect(anonymized.accessTokenExpiresAt).to.be.null();
                // What is left is not personal: identity, type, status, times, the caller's reference.
                expect(anonymized).to.include({ id, tenantId: 'plain', reference: 'order-4711' });
                expect(JSON.stringify(anonymized)).to.not.contain('Erika');
            }
            expect((await row(old))!.status).to.equal('completed');
            expect((await row(oldIssuance))!.status).to.equal('fetched');
            expect((await row(young))).to.equal(youngBefore);
            expect((await knex()('session_logs').where({ tenantId: 'plain' })).map((l: { sessionId: string }) => l.sessionId)).to.equal([young]);

            // The API still answers for the row, with nothing personal in it.
            const admin = (await clientWithToken(t.server, await rootToken(t.server), { clientId: 'plain-reader', roles: ['tenant:read'], tenantId: 'plain' })).token;
            const res = await t.server.inject({ url: `/api/session/${old}`, headers: bearer(admin) });
            expect(res.statusCode, res.payload).to.equal(200);
            expect(res.result).to.not.include(['credentials', 'transaction_data']);
            expect(res.payload).to.not.contain('Erika');

            // Rows already anonymized are not touched again.
            expect((await run()).anonymized).to.equal(0);
        });

        it('uses the tenant\'s ttlSeconds and cleanupMode over SESSION_TTL and SESSION_CLEANUP_MODE', async () => {
            // 20 minutes: past 600 s, within SESSION_TTL (1 hour).
            const plain20 = await make('plain', { status: 'completed', age: 20 * MINUTE });
            const shortFull20 = await make('short-full', { status: 'completed', age: 20 * MINUTE });
            const shortAnon20 = await make('short-anon', { status: 'completed', age: 20 * MINUTE });
            // 2 hours: past SESSION_TTL, within the tenant's 7 days.
            const long2h = await make('long-full', { status: 'completed', age: 2 * HOUR });
            // 8 days: past the tenant's 7 days.
            const long8d = await make('long-full', { status: 'completed', age: 8 * 24 * HOUR });

            await t.server.jobs.runNow(SESSION_MAINTENANCE_JOB);
            expect((await row(plain20))!.data).to.be.a.string();
            expect(await row(shortFull20)).to.not.exist();
            const anon = (await row(shortAnon20))!;
            expect(anon.data).to.be.null();
            expect(anon.codeHash).to.be.null();
            expect((await row(long2h))!.data).to.be.a.string();
            expect(await row(long8d)).to.not.exist();
        });

        it('prunes expired single-use values and keeps the others', async () => {
            await t.server.singleUse.issue('plain', 'nonce:old', 60);
            await t.server.singleUse.issue('plain', 'nonce:fresh', 3600);
            expect(await t.server.singleUse.claim('plain', 'dpop:old', 60)).to.be.true();
            await knex()('single_use_values').whereIn('key', ['nonce:old', 'dpop:old']).update({ expiresAt: iso(-MINUTE) });

            expect((await run()).singleUsePruned).to.equal(2);
            const keys = (await knex()('single_use_values').where({ tenantId: 'plain' }).select('key')).map((r: { key: string }) => r.key);
            expect(keys).to.equal(['nonce:fresh']);
            expect(await t.server.singleUse.consume('plain', 'nonce:fresh')).to.be.true();
        });

        it('sends no webhook when it expires a session', async () => {
            const root = await rootToken(t.server);
            const admin = (await clientWithToken(t.server, root, { clientId: 'hooks-admin', roles: ['tenant:admin'], tenantId: 'hooks' })).token;
            const setup = [
                { url: '/api/key-chain', payload: { id: 'issuer', usageType: 'attestation', subject: { commonName: 'Hooks', country: 'DE' } } },
                { url: '/api/issuer/credentials', payload: { id: 'pid', config: { format: 'dc+sd-jwt', display: [{ locale: 'en', name: 'PID' }], scope: 'pid' }, vct: 'urn:eudi:pid:1', fields: [{ path: ['given_name'], type: 'string', disclosable: true }], lifeTime: 3600 } },
                { url: '/api/issuer/webhook-endpoints', payload: { id: 'crm', name: 'CRM', url: hooks.url, auth: { type: 'none' } } }
            ];
            for (const { url, payload } of setup) {
                const res = await t.server.inject({ method: 'POST', url, headers: bearer(admin), payload });
                expect(res.statusCode, res.payload).to.equal(201);
            }
            const offer = async () => {
                const res = await t.server.inject({ method: 'POST', url: '/api/issuer/offer', headers: bearer(admin), payload: { credentialConfigurationIds: ['pid'], credentialClaims: { pid: { type: 'inline', claims: { given_name: 'Erika' } } }, webhookEndpointId: 'crm' } });
                expect(res.statusCode, res.payload).to.equal(201);
                const { uri, session } = res.result as { uri: string; session: string };
                const offerUri = decodeURIComponent(new URL(uri.replace('openid-credential-offer://', 'https://x/')).searchParams.get('credential_offer_uri')!);
                return { session, path: offerUri.replace('http://hallmark.test', '') };
            };
            const redeem = async (path: string) => {
                const fetched = await t.server.inject(path);
                expect(fetched.statusCode).to.equal(200);
                const code = (fetched.result as any).grants[PRE_AUTHORIZED]['pre-authorized_code'];
                const token = await t.server.inject({ method: 'POST', url: '/issuers/hooks/authorize/token', payload: `grant_type=${encodeURIComponent(PRE_AUTHORIZED)}&pre-authorized_code=${code}`, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
                expect(token.statusCode, token.payload).to.equal(200);
                return (token.result as { access_token: string }).access_token;
            };

            // The receiver works: a wallet notification reaches it.
            const delivered = await offer();
            const accessToken = await redeem(delivered.path);
            const { privateKey, publicKey } = await Jose.generateKeyPair('ES256');
            const nonce = ((await t.server.inject({ method: 'POST', url: '/issuers/hooks/vci/nonce' })).result as { c_nonce: string }).c_nonce;
            const jwt = await new Jose.SignJWT({ nonce, aud: 'http://hallmark.test/issuers/hooks' }).setProtectedHeader({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: await Jose.exportJWK(publicKey) }).setIssuedAt().sign(privateKey);
            const credential = await t.server.inject({ method: 'POST', url: '/issuers/hooks/vci/credential', headers: { authorization: `Bearer ${accessToken}` }, payload: { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt } } });
            expect(credential.statusCode, credential.payload).to.equal(200);
            const notified = await t.server.inject({ method: 'POST', url: '/issuers/hooks/vci/notification', headers: { authorization: `Bearer ${accessToken}` }, payload: { notification_id: (credential.result as any).notification_id, event: 'credential_accepted' } });
            expect(notified.statusCode, notified.payload).to.equal(204);
            expect(hooks.received).to.have.length(1);
            expect(hooks.received[0]!.body).to.include({ session: delivered.session });

            // Two overdue offers with the same webhook: one never redeemed (expires), one redeemed (does not).
            const unredeemed = await offer();
            const redeemed = await offer();
            await redeem(redeemed.path);
            await knex()('sessions').whereIn('id', [unredeemed.session, redeemed.session]).update({ expiresAt: iso(-MINUTE) });

            await t.server.jobs.runNow(SESSION_MAINTENANCE_JOB);
            expect(await statusOf(unredeemed.session)).to.equal('expired');
            expect(await statusOf(redeemed.session)).to.equal('active');
            expect(await statusOf(delivered.session)).to.equal('completed');
            await sleep(300);
            expect(hooks.received).to.have.length(1);
        });

        it('works through a backlog larger than one batch', async () => {
            const n = 2 * MAINTENANCE_BATCH_SIZE + 37;
            const createdAt = iso(-2 * 86_400_000);
            const rows = Array.from({ length: n }, (_v, i) => ({
                id: `bulk-${i}`, tenantId: 'bulk', type: 'presentation', status: i % 2 ? 'active' : 'fetched',
                walletNonce: `bulk-nonce-${i}`, expiresAt: iso(-HOUR), createdAt, updatedAt: createdAt
            }));
            await knex().batchInsert('sessions', rows, 500);
            expect(await count('bulk')).to.equal(n);

            const result = await run();
            expect(result.expired).to.equal(n);
            // Past the tenant's one day: the same run then deletes them, also in batches.
            expect(result.deleted).to.equal(n);
            expect(await count('bulk')).to.equal(0);
        });
    });

    describe(`session maintenance schedule (${dialect})`, () => {
        it('runs every SESSION_TIDY_UP_INTERVAL seconds when WORKER is on, and logs its counts', async () => {
            const lines: Array<Record<string, unknown>> = [];
            const logger = Pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
            const t = await startTestServer(dialect, { manifest: manifestFor('hallmark-sessions', 'hallmark-oid4vci', 'hallmark-kms-db', 'hallmark-tenancy'), listen: true, logger, env: { WORKER: 'on', SESSION_TIDY_UP_INTERVAL: '1' } });
            try {
                const root = await rootToken(t.server);
                await createTenant(t.server, root, 'timed');
                const session = await t.server.sessions.create({ tenantId: 'timed', type: 'presentation', expiresAt: iso(-MINUTE) });
                const deadline = Date.now() + 15_000;
                while (Date.now() < deadline && (await t.server.db.knex('sessions').where({ id: session.id }).first()).status !== 'expired') {
                    await sleep(100);
                }
                expect((await t.server.db.knex('sessions').where({ id: session.id }).first()).status).to.equal('expired');
                const done = lines.find((l) => l.msg === 'session maintenance done' && Number(l.expired) >= 1);
                expect(done, JSON.stringify(lines.slice(-5))).to.exist();
                expect(done).to.include(['expired', 'deleted', 'anonymized', 'singleUsePruned', 'ms']);
            }
            finally {
                await t.stop();
            }
        });
    });
}
