import ChildProcess from 'node:child_process';
import Http from 'node:http';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as Jose from 'jose';
import { SESSION_MAINTENANCE_JOB } from '../../plugins/sessions/jobs/maintenance';
import { eventStreamSettings } from '../../plugins/sessions/routes/events';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { ISSUER, pidConfig, PRE_AUTHORIZED } from '../helpers/pid-config';
import { manifestFor, startTestServer, testEnv, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const pid = pidConfig();

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const waitFor = async (check: () => boolean | Promise<boolean>, ms: number, what: string) => {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
        if (await check()) {
            return;
        }
        await sleep(25);
    }
    throw new Error(`timed out waiting for ${what}`);
};

/** One frame of an event stream: an event (id, event, data) or a comment. */
interface Frame {
    raw: string;
    at: number;
    comment?: string;
    id?: string;
    event?: string;
    data?: { id: string; status: string; updatedAt: string };
}

const parseFrame = (raw: string): Frame => {
    const frame: Frame = { raw, at: Date.now() };
    for (const line of raw.split('\n')) {
        if (line.startsWith(':')) {
            frame.comment = line.slice(1).trim();
        }
        else if (line.startsWith('id: ')) {
            frame.id = line.slice(4);
        }
        else if (line.startsWith('event: ')) {
            frame.event = line.slice(7);
        }
        else if (line.startsWith('data: ')) {
            frame.data = JSON.parse(line.slice(6));
        }
    }
    return frame;
};

/** A real HTTP client of an event stream: records frames as they arrive, and when the server ends the stream. */
class EventStreamClient {
    readonly frames: Frame[] = [];
    ended = false;
    private buffer = '';

    private constructor(readonly res: Http.IncomingMessage, private readonly req: Http.ClientRequest, readonly openedAt: number) {
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
            this.buffer += chunk;
            let end: number;
            while ((end = this.buffer.indexOf('\n\n')) >= 0) {
                this.frames.push(parseFrame(this.buffer.slice(0, end)));
                this.buffer = this.buffer.slice(end + 2);
            }
        });
        res.on('end', () => (this.ended = true));
        res.on('close', () => (this.ended = true));
    }

    static open(url: string, headers: Record<string, string> = {}): Promise<EventStreamClient> {
        const openedAt = Date.now();
        return new Promise((resolve, reject) => {
            const req = Http.get(url, { headers: { accept: 'text/event-stream', 'accept-encoding': 'gzip, deflate', ...headers } }, (res) => resolve(new EventStreamClient(res, req, openedAt)));
            req.on('error', reject);
        });
    }

    get events(): Frame[] {
        return this.frames.filter((f) => f.event);
    }

    async body(): Promise<string> {
        await waitFor(() => this.ended, 5000, 'the end of the answer');
        return this.buffer;
    }

    async event(n: number, ms = 5000): Promise<Frame> {
        await waitFor(() => this.events.length >= n, ms, `event ${n} (have ${this.frames.map((f) => f.raw).join(' | ')})`);
        return this.events[n - 1]!;
    }

    async end(ms = 5000): Promise<void> {
        await waitFor(() => this.ended, ms, 'the end of the stream');
    }

    close(): void {
        this.req.destroy();
    }
}

/** One wallet request, over server.inject or real HTTP. */
type Call = (request: { method: 'GET' | 'POST'; url: string; headers?: Record<string, string>; payload?: string | object }) => Promise<{ status: number; body: any }>;

/** The wallet side of the pre-authorized flow, by hand (as test/plugins/oid4vci.ts), up to the credential. */
const receiveCredential = async (call: Call, offerUri: string, txCode: string | undefined, proof: (nonce: string) => Promise<string>) => {
    const path = offerUri.replace('http://hallmark.test', '');
    const fetched = await call({ method: 'GET', url: path });
    expect(fetched.status).to.equal(200);
    const code = fetched.body.grants[PRE_AUTHORIZED]['pre-authorized_code'];
    const form = `grant_type=${encodeURIComponent(PRE_AUTHORIZED)}&pre-authorized_code=${code}${txCode ? `&tx_code=${txCode}` : ''}`;
    const token = await call({ method: 'POST', url: '/issuers/acme/authorize/token', payload: form, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(token.status, JSON.stringify(token.body)).to.equal(200);
    const accessToken = token.body.access_token as string;
    const nonce = (await call({ method: 'POST', url: '/issuers/acme/vci/nonce' })).body.c_nonce as string;
    const credential = await call({ method: 'POST', url: '/issuers/acme/vci/credential', headers: { authorization: `Bearer ${accessToken}` }, payload: { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proof(nonce) } } });
    expect(credential.status, JSON.stringify(credential.body)).to.equal(200);
    return { accessToken, notificationId: credential.body.notification_id as string };
};

const notify = async (call: Call, accessToken: string, notificationId: string) => {
    const res = await call({ method: 'POST', url: '/issuers/acme/vci/notification', headers: { authorization: `Bearer ${accessToken}` }, payload: { notification_id: notificationId, event: 'credential_accepted' } });
    expect(res.status, JSON.stringify(res.body)).to.equal(204);
};

/** Wallet requests to a server over HTTP (another process). */
const httpCall = (base: string): Call => async ({ method, url, headers, payload }) => {
    const body = payload === undefined ? undefined : typeof payload === 'string' ? payload : JSON.stringify(payload);
    const res = await fetch(`${base}${url}`, {
        method,
        headers: { ...(typeof payload === 'object' ? { 'content-type': 'application/json' } : {}), ...headers },
        ...(body !== undefined ? { body } : {})
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
};

for (const dialect of DIALECTS) {
    describe(`session event stream (${dialect})`, () => {
        let t: TestServer;
        let base: string;
        let admin: string;
        let presentationOnly: string;
        let otherTenant: string;
        const holder = Jose.generateKeyPair('ES256', { extractable: true });
        const proof = async (nonce: string) => {
            const { privateKey, publicKey } = await holder;
            return new Jose.SignJWT({ nonce, aud: ISSUER }).setProtectedHeader({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: await Jose.exportJWK(publicKey) }).setIssuedAt().sign(privateKey);
        };
        const injectCall: Call = async ({ method, url, headers, payload }) => {
            const res = await t.server.inject({ method, url, ...(headers ? { headers } : {}), ...(payload !== undefined ? { payload } : {}) });
            return { status: res.statusCode, body: res.result };
        };
        const offer = async () => {
            const res = await t.server.inject({ method: 'POST', url: '/api/issuer/offer', headers: bearer(admin), payload: { credentialConfigurationIds: ['pid'], credentialClaims: { pid: { type: 'inline', claims: { given_name: 'Erika', family_name: 'Mustermann' } } }, tx_code: true } });
            expect(res.statusCode, res.payload).to.equal(201);
            const { uri, tx_code: txCode, session } = res.result as { uri: string; tx_code: string; session: string };
            const offerUri = decodeURIComponent(new URL(uri.replace('openid-credential-offer://', 'https://x/')).searchParams.get('credential_offer_uri')!);
            return { session, offerUri, txCode };
        };
        const streamUrl = (session: string, query = '') => `${base}/api/session/${session}/events${query}`;

        before(async () => {
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-sessions', 'hallmark-oid4vci', 'hallmark-kms-db', 'hallmark-tenancy'), listen: true });
            base = t.server.info.uri;
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            await createTenant(t.server, root, 'other');
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            presentationOnly = (await clientWithToken(t.server, root, { clientId: 'acme-verifier', roles: ['presentation:request'], tenantId: 'acme' })).token;
            otherTenant = (await clientWithToken(t.server, root, { clientId: 'other-admin', roles: ['tenant:admin'], tenantId: 'other' })).token;
            expect((await t.server.inject({ method: 'POST', url: '/api/key-chain', headers: bearer(admin), payload: { id: 'issuer', usageType: 'attestation', subject: { commonName: 'Acme', country: 'DE' } } })).statusCode).to.equal(201);
            const res = await t.server.inject({ method: 'POST', url: '/api/issuer/credentials', headers: bearer(admin), payload: pid });
            expect(res.statusCode, res.payload).to.equal(201);
        });
        after(() => t.stop());

        it('sends the current status at once, then fetched and completed as the flow proceeds, then closes', async () => {
            const { session, offerUri, txCode } = await offer();
            const stream = await EventStreamClient.open(streamUrl(session), bearer(admin));
            try {
                expect(stream.res.statusCode).to.equal(200);
                expect(String(stream.res.headers['content-type'])).to.startWith('text/event-stream');
                expect(stream.res.headers['content-length']).to.not.exist();
                // The client offered gzip: an event stream is never compressed (gzip would hold events back).
                expect(stream.res.headers['content-encoding']).to.not.exist();
                expect(stream.res.headers['cache-control']).to.contain('no-cache');
                expect(stream.res.headers['x-hallmark-version']).to.exist();

                const first = await stream.event(1);
                // At once: well before the poll interval, so not by the poll.
                expect(first.at - stream.openedAt).to.be.below(eventStreamSettings.pollIntervalMs);
                expect(first.id).to.equal('1');
                expect(first.event).to.equal('status');
                expect(first.data).to.equal({ id: session, status: 'active', updatedAt: first.data!.updatedAt });
                expect(Date.parse(first.data!.updatedAt)).to.be.a.number();

                const { accessToken, notificationId } = await receiveCredential(injectCall, offerUri, txCode, proof);
                const fetched = await stream.event(2);
                expect(fetched.id).to.equal('2');
                expect(fetched.data!.status).to.equal('fetched');
                expect(stream.ended).to.be.false();

                await notify(injectCall, accessToken, notificationId);
                const completed = await stream.event(3);
                expect(completed.id).to.equal('3');
                expect(completed.data!.status).to.equal('completed');
                expect(completed.data!.id).to.equal(session);
                const detail = (await t.server.inject({ url: `/api/session/${session}`, headers: bearer(admin) })).result as { updatedAt: string };
                expect(completed.data!.updatedAt).to.equal(detail.updatedAt);

                await stream.end();
                // Each status once, in order; nothing after the terminal one.
                expect(stream.events.map((e) => e.data!.status)).to.equal(['active', 'fetched', 'completed']);
                await waitFor(() => t.server.sessionFeed.size === 0, 2000, 'the stream to stop watching');
            }
            finally {
                stream.close();
            }
        });

        it('accepts the token as ?token=, and stops watching when the client goes away', async () => {
            const { session } = await offer();
            const stream = await EventStreamClient.open(streamUrl(session, `?token=${encodeURIComponent(admin)}`));
            try {
                expect(stream.res.statusCode).to.equal(200);
                expect((await stream.event(1)).data!.status).to.equal('active');
                expect(t.server.sessionFeed.size).to.equal(1);
            }
            finally {
                stream.close();
            }
            await waitFor(() => t.server.sessionFeed.size === 0, 2000, 'the disconnected stream to stop watching');
        });

        it('answers 404 to another tenant and to roles that cannot see the session type, 401 without a valid token', async () => {
            const { session } = await offer();
            for (const token of [otherTenant, presentationOnly]) {
                const viaHeader = await t.server.inject({ url: `/api/session/${session}/events`, headers: bearer(token) });
                expect(viaHeader.statusCode, viaHeader.payload).to.equal(404);
                const viaQuery = await EventStreamClient.open(streamUrl(session, `?token=${encodeURIComponent(token)}`));
                expect(viaQuery.res.statusCode).to.equal(404);
                expect(JSON.parse(await viaQuery.body())).to.include({ statusCode: 404 });
            }
            expect((await t.server.inject({ url: '/api/session/no-such-session/events', headers: bearer(admin) })).statusCode).to.equal(404);

            const none = await EventStreamClient.open(streamUrl(session));
            expect(none.res.statusCode).to.equal(401);
            expect(String(none.res.headers['www-authenticate'])).to.startWith('Bearer');
            await none.body();
            const bad = await t.server.inject({ url: `/api/session/${session}/events?token=not-a-jwt` });
            expect(bad.statusCode).to.equal(401);
            // The query token is only for event streams.
            expect((await t.server.inject({ url: `/api/session/${session}?token=${encodeURIComponent(admin)}` })).statusCode).to.equal(401);
            expect(t.server.sessionFeed.size).to.equal(0);
        });

        it('sends a keep-alive comment at the configured interval', async () => {
            const { session } = await offer();
            const previous = eventStreamSettings.keepAliveMs;
            eventStreamSettings.keepAliveMs = 100;
            let stream: EventStreamClient | undefined;
            try {
                stream = await EventStreamClient.open(streamUrl(session), bearer(admin));
                await stream.event(1);
                await waitFor(() => stream!.frames.filter((f) => f.comment === 'keep-alive').length >= 2, 3000, 'two keep-alive comments');
                const comments = stream.frames.filter((f) => f.comment !== undefined);
                expect(comments[0]!.raw).to.equal(': keep-alive');
                expect(stream.frames[0]!.event).to.equal('status');
                expect(stream.ended).to.be.false();
            }
            finally {
                eventStreamSettings.keepAliveMs = previous;
                stream?.close();
            }
        });

        it('sends a terminal status and closes at once for a finished session', async () => {
            const { session, offerUri, txCode } = await offer();
            const { accessToken, notificationId } = await receiveCredential(injectCall, offerUri, txCode, proof);
            await notify(injectCall, accessToken, notificationId);
            const stream = await EventStreamClient.open(streamUrl(session), bearer(admin));
            await stream.end();
            expect(stream.events.map((e) => [e.id, e.data!.status])).to.equal([['1', 'completed']]);
        });

        it('sees expiry written by the maintenance job (no in-process event: found by the poll)', async () => {
            const { session } = await offer();
            await t.server.db.knex('sessions').where({ id: session }).update({ expiresAt: new Date(Date.now() - 1000).toISOString() });
            const stream = await EventStreamClient.open(streamUrl(session), bearer(admin));
            try {
                expect((await stream.event(1)).data!.status).to.equal('active');
                await t.server.jobs.runNow(SESSION_MAINTENANCE_JOB);
                const expired = await stream.event(2, 3000);
                expect(expired.data!.status).to.equal('expired');
                await stream.end();
            }
            finally {
                stream.close();
            }
        });

        it('ends open streams when the server stops, so shutdown does not wait for them', async () => {
            const t2 = await startTestServer(dialect, { manifest: manifestFor('hallmark-sessions', 'hallmark-oid4vci', 'hallmark-kms-db', 'hallmark-tenancy'), listen: true });
            let stream: EventStreamClient | undefined;
            try {
                const root = await rootToken(t2.server);
                await createTenant(t2.server, root, 'acme');
                const token = (await clientWithToken(t2.server, root, { clientId: 'acme-reader', roles: ['tenant:read'], tenantId: 'acme' })).token;
                const session = await t2.server.sessions.create({ tenantId: 'acme', type: 'presentation' });
                stream = await EventStreamClient.open(`${t2.server.info.uri}/api/session/${session.id}/events`, bearer(token));
                expect((await stream.event(1)).data!.status).to.equal('active');
                const started = Date.now();
                await t2.server.stop({ timeout: 10_000 });
                expect(Date.now() - started).to.be.below(3000);
                await stream.end();
                expect(stream.events).to.have.length(1);
                expect(t2.server.sessionFeed.size).to.equal(0);
            }
            finally {
                stream?.close();
                await t2.stop().catch(() => undefined);
            }
        });

        if (dialect === 'postgres') {
            it('sees on process A the changes made through process B on the same database', async () => {
                const root = Path.join(__dirname, '../..');
                const child = ChildProcess.spawn(process.execPath, ['-r', Path.join(root, 'scripts/register-ts.js'), Path.join(root, 'bin/hallmark.ts'), 'start'], {
                    env: { PATH: process.env.PATH ?? '', ...testEnv(t.database, { PORT: '0', LOG_LEVEL: 'info' }) },
                    stdio: ['ignore', 'pipe', 'pipe']
                });
                let output = '';
                child.stdout!.on('data', (c) => (output += c));
                child.stderr!.on('data', (c) => (output += c));
                const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
                let stream: EventStreamClient | undefined;
                try {
                    await waitFor(() => /Hallmark listening/.test(output) || child.exitCode !== null, 30_000, 'process B to listen');
                    const port = /http:\/\/127\.0\.0\.1:(\d+)/.exec(output)?.[1];
                    expect(port, output).to.exist();
                    const processB = httpCall(`http://127.0.0.1:${port}`);

                    const { session, offerUri, txCode } = await offer();
                    stream = await EventStreamClient.open(streamUrl(session), bearer(admin));
                    expect((await stream.event(1)).data!.status).to.equal('active');

                    const { accessToken, notificationId } = await receiveCredential(processB, offerUri, txCode, proof);
                    expect((await stream.event(2, 3000)).data!.status).to.equal('fetched');
                    await notify(processB, accessToken, notificationId);
                    expect((await stream.event(3, 3000)).data!.status).to.equal('completed');
                    await stream.end();
                    expect(stream.events.map((e) => e.id)).to.equal(['1', '2', '3']);
                }
                finally {
                    stream?.close();
                    child.kill('SIGTERM');
                    await Promise.race([exited, sleep(10_000)]);
                    child.kill('SIGKILL');
                }
            });
        }
    });
}
