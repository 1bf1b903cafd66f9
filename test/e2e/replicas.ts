import ChildProcess from 'node:child_process';
import Fs from 'node:fs';
import Http from 'node:http';
import Os from 'node:os';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { DIALECTS, createTestDatabase, type TestDatabase } from '../helpers/databases';
import { Holder } from '../helpers/holder';
import { freePort } from '../helpers/net';
import { ROOT_CLIENT, testEnv } from '../helpers/server';
import { verifySdJwtVc, Wallet } from '../helpers/wallet';
import { LOCKOUT } from '../../plugins/oauth2/auth-failures';

/**
 * Several service processes on one database, as deployed: three replicas on one PostgreSQL database, and the cluster
 * mode (WORKERS=2) on SQLite. Real `hallmark start` processes behind a small reverse proxy in the test that sends
 * each step of a flow to a chosen process (offer on one, token on another, credential on a third; request object
 * on one, response on another, result on a third). Then what the change bus must carry: a configuration change is
 * used by every other process's next request once its notification arrived, the client lockout counts failures made
 * on any process, and an event stream on one process reports a status change made on another; scheduled jobs run
 * once across processes, and migrations once.
 */

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const root = Path.join(__dirname, '..', '..');
const DEMO = Path.join(root, 'examples', 'config', 'demo');
const demo = (...parts: string[]) => (JSON.parse(Fs.readFileSync(Path.join(DEMO, ...parts), 'utf8')) as { spec: Record<string, any> }).spec;
const PID = demo('issuance', 'credentials', 'pid.json');
const ISSUER_KEY_CHAIN = demo('key-chains', 'issuer.json');
const DEMO_ROOT = ISSUER_KEY_CHAIN.keySource.certificateChain[1] as string;
const MANIFEST = Path.join(__dirname, '..', 'fixtures', 'replica-manifest.ts');
const PID_QUERY = { credentials: [{ id: 'pid', format: 'dc+sd-jwt', meta: { vct_values: [PID.vct] }, claims: [{ path: ['given_name'] }, { path: ['family_name'] }] }] };
const CLAIMS = { pid: { type: 'inline', claims: { given_name: 'Erika', family_name: 'Mustermann', birthdate: '1964-08-12' } } };

/**
 * How long another process may take to act on a change made elsewhere once the change committed. The bus delivers
 * in milliseconds; the caches' TTLs are 5–30 s, so a second change made right after a first one was seen (a fresh
 * cache entry) can only be seen within this bound through the bus.
 */
const NOTIFICATION_BOUND_MS = 2000;

const spawnCli = (args: string[], env: Record<string, string>) =>
    ChildProcess.spawn(process.execPath, ['-r', Path.join(root, 'scripts/register-ts.js'), Path.join(root, 'bin/hallmark.ts'), ...args], {
        env: { PATH: process.env.PATH ?? '', ...env },
        stdio: ['ignore', 'pipe', 'pipe']
    });

interface Service {
    url: string;
    output: () => string;
    stop: () => Promise<number | null>;
}

const waitFor = async <T>(what: string, check: () => Promise<T | undefined | false>, ms: number): Promise<T> => {
    const deadline = Date.now() + ms;
    for (;;) {
        const value = await check().catch(() => undefined);
        if (value) {
            return value;
        }
        if (Date.now() > deadline) {
            throw new Error(`timed out waiting for ${what}`);
        }
        await new Promise((r) => setTimeout(r, 50));
    }
};

/** `hallmark start` as a container runs it; resolves once /health answers 200. */
const startService = async (env: Record<string, string>): Promise<Service> => {
    const port = await freePort();
    const child = spawnCli(['start'], { ...env, PORT: String(port) });
    let output = '';
    child.stdout!.on('data', (c) => (output += c));
    child.stderr!.on('data', (c) => (output += c));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const url = `http://127.0.0.1:${port}`;
    let exitCode: number | null | undefined;
    void exited.then((code) => (exitCode = code ?? null));
    // waitFor retries every failed check, so a process that exited ends the wait by its answer, not by a throw.
    await waitFor(`${url}/health`, async () => exitCode !== undefined ? 'exited' as const : (await fetch(`${url}/health`)).status === 200, 150_000).then((state) => {
        if (state === 'exited') {
            throw new Error(`the service exited (code ${exitCode}) before it was healthy`);
        }
    }).catch((err: Error) => {
        child.kill('SIGKILL');
        // What the process said is the only clue to why it did not start: keep its end in the failure.
        throw new Error(`${err.message}; its output ends:\n${output.slice(-6000)}`);
    });
    return {
        url,
        output: () => output,
        stop: async () => {
            child.kill('SIGTERM');
            const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
            const code = await exited;
            clearTimeout(timer);
            return code;
        }
    };
};

interface Proxy {
    url: string;
    /** Which upstream served each request. */
    served: Array<{ method: string; path: string; upstream: string }>;
    /** Where the next requests go: the upstream for a path. */
    route: (path: string) => string;
    close: () => Promise<void>;
}

/**
 * The reverse proxy in front of the processes (PUBLIC_URL points at it). Every request gets a new upstream
 * connection, so the cluster's round-robin spreads them over its workers too.
 */
const startProxy = async (port: number, route: (path: string) => string): Promise<Proxy> => {
    const proxy: Proxy = { url: `http://127.0.0.1:${port}`, served: [], route, close: async () => undefined };
    const server = Http.createServer((req, res) => {
        const upstream = new URL(proxy.route(req.url ?? '/'));
        proxy.served.push({ method: req.method ?? 'GET', path: req.url ?? '/', upstream: upstream.origin });
        const forward = Http.request({ hostname: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers, agent: false }, (answer) => {
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(res);
        });
        forward.on('error', (err) => res.writeHead(502).end(String(err)));
        req.pipe(forward);
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    proxy.close = () => new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
    });
    return proxy;
};

const call = async (base: string, token: string | undefined, method: string, path: string, body?: object) => {
    const res = await fetch(`${base}${path}`, {
        method,
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body ? { 'content-type': 'application/json' } : {}) },
        ...(body ? { body: JSON.stringify(body) } : {})
    });
    const text = await res.text();
    let parsed: any = text;
    try {
        parsed = JSON.parse(text);
    }
    catch {
        // not JSON
    }
    return { status: res.status, body: parsed, text };
};

const tokenAt = async (base: string, clientId: string, secret: string) =>
    call(base, undefined, 'POST', '/api/oauth2/token', { grant_type: 'client_credentials', client_id: clientId, client_secret: secret });

/** Reads an event stream until an event with the status arrives; resolves with every status seen. */
const watchUntil = async (url: string, token: string, status: string): Promise<string[]> => {
    const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).to.equal(200);
    const reader = res.body!.getReader();
    const seen: string[] = [];
    let text = '';
    while (!seen.includes(status)) {
        const { value, done } = await reader.read();
        if (done) {
            break;
        }
        text += Buffer.from(value).toString('utf8');
        seen.splice(0, seen.length, ...[...text.matchAll(/"status":"(\w+)"/g)].map((m) => m[1]!));
    }
    await reader.cancel().catch(() => undefined);
    return seen;
};

interface Deployment {
    /** The processes a flow's steps are spread over (the cluster: its one address, whose workers take turns). */
    services: () => string[];
    proxy: () => Proxy;
    probeFile: () => string;
}

/** The flows and the change-bus behaviour, the same for replicas and for cluster workers. */
const behaves = (deployment: Deployment) => {
    let admin: string;
    let credential: string;
    let holderKey: Parameters<Holder['sdJwt']>[3];
    const at = (i: number) => deployment.services()[i % deployment.services().length]!;

    before(async () => {
        const [first] = deployment.services();
        const rootToken = (await tokenAt(first!, ROOT_CLIENT.id, ROOT_CLIENT.secret)).body.access_token as string;
        expect(rootToken).to.be.a.string();
        expect((await call(first!, rootToken, 'POST', '/api/tenants', { id: 'acme', name: 'Acme' })).status).to.equal(201);
        const created = await call(first!, rootToken, 'POST', '/api/clients', { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' });
        expect(created.status, created.text).to.equal(201);
        admin = (await tokenAt(first!, 'acme-admin', created.body.clientSecret)).body.access_token;
        for (const [path, body] of [
            ['/api/key-chain', ISSUER_KEY_CHAIN],
            ['/api/key-chain', { id: 'verifier', usageType: 'access', subject: { commonName: 'Acme verifier' } }],
            ['/api/issuer/credentials', PID],
            ['/api/trust-lists', { id: 'demo', entities: [{ name: 'Demo PID', serviceType: 'pid-issuance', certificates: [DEMO_ROOT] }] }],
            ['/api/verifier/config', { id: 'pid', dcql_query: PID_QUERY, statusCheckMode: 'disabled' }]
        ] as const) {
            const res = await call(first!, admin, 'POST', path, body);
            expect(res.status, res.text).to.equal(201);
        }
    });

    it('issues a credential with offer, token and credential requests served by different processes', async () => {
        const proxy = deployment.proxy();
        for (let flow = 0; flow < 3; flow++) {
            const [offerOn, tokenOn, credentialOn] = [at(flow), at(flow + 1), at(flow + 2)];
            const isCredential = (path: string) => /\/vci\/credential(\?|$)/.test(path);
            proxy.route = (path) => (path.includes('/authorize/token') ? tokenOn : isCredential(path) ? credentialOn : offerOn);
            const offer = await call(offerOn, admin, 'POST', '/api/issuer/offer', { credentialConfigurationIds: ['pid'], credentialClaims: CLAIMS });
            expect(offer.status, offer.text).to.equal(201);
            const from = proxy.served.length;
            const wallet = new Wallet();
            const received = await wallet.receive(offer.body.uri, { configurationId: 'pid' });
            const served = proxy.served.slice(from);
            expect(served.find((s) => s.path.includes('/authorize/token'))!.upstream).to.equal(tokenOn);
            expect(served.find((s) => isCredential(s.path))!.upstream).to.equal(credentialOn);
            expect(served.find((s) => s.path.includes('/credential-offers/'))!.upstream).to.equal(offerOn);
            const verified = await verifySdJwtVc(received.credentials[0]!);
            expect(verified.payload).to.include({ given_name: 'Erika', family_name: 'Mustermann', iss: `${proxy.url}/issuers/acme` });
            // The session as the next process sees it.
            const session = await call(at(flow + 3), admin, 'GET', `/api/session/${offer.body.session}`);
            expect(session.status).to.equal(200);
            expect(session.body.status).to.not.equal('active');
            credential = received.credentials[0]!;
            holderKey = received.holderKeys[0]!;
        }
    });

    it('verifies a presentation with request object, response and result on different processes, and streams its events from another', async () => {
        const proxy = deployment.proxy();
        for (let flow = 0; flow < 2; flow++) {
            const [requestOn, responseOn, resultOn] = [at(flow), at(flow + 1), at(flow + 2)];
            proxy.route = (path) => (path.endsWith('/oid4vp') ? responseOn : requestOn);
            const offer = await call(requestOn, admin, 'POST', '/api/verifier/offer', { requestId: 'pid' });
            expect(offer.status, offer.text).to.equal(201);
            // The stream opens on the process that will not see the response.
            const events = watchUntil(`${resultOn}/api/session/${offer.body.session}/events`, admin, 'completed');
            const holder = new Holder();
            const request = await holder.resolve(offer.body.uri);
            const answer = await holder.respond(request, await holder.vpToken(request, { pid: { format: 'dc+sd-jwt', credential, key: holderKey } }));
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            const served = proxy.served.filter((s) => s.path.includes(request.state));
            expect(served.map((s) => s.upstream)).to.equal([requestOn, responseOn]);
            const session = await call(resultOn, admin, 'GET', `/api/session/${offer.body.session}`);
            expect(session.body.status).to.equal('completed');
            expect(session.body.credentials[0].values[0]).to.include({ given_name: 'Erika', family_name: 'Mustermann' });
            // The stream's process saw neither the fetch nor the response, and reports both steps' outcome.
            expect((await events).at(-1)).to.equal('completed');
        }
    });

    it('uses a configuration changed on one process in the next request of every other process once notified', async () => {
        const [writer, ...others] = [at(0), at(1), at(2)];
        const proxy = deployment.proxy();
        // Each read on a new connection through the proxy: two in a row reach both workers of a cluster.
        const configs = async (base: string) => {
            proxy.route = () => base;
            const res = await call(proxy.url, undefined, 'GET', '/.well-known/openid-credential-issuer/issuers/acme');
            return Object.keys(res.body.credential_configurations_supported as object);
        };
        const everywhere = async (check: (ids: string[]) => boolean) => {
            for (const other of others) {
                for (let read = 0; read < 2; read++) {
                    if (!check(await configs(other))) {
                        return false;
                    }
                }
            }
            return true;
        };
        expect(await everywhere((ids) => ids.join() === 'pid')).to.be.true();
        // A first change: the others' cache entries may be of any age, so it may also be a TTL that shows it.
        const extra = { ...PID, id: 'pid-extra', config: { ...PID.config, scope: 'pid-extra' } };
        expect((await call(writer, admin, 'POST', '/api/issuer/credentials', extra)).status).to.equal(201);
        await waitFor('the new configuration everywhere', () => everywhere((ids) => ids.includes('pid-extra')), 15_000);
        // The second change comes while every entry is fresh (reloaded for the first change): only the
        // notification can drop them within the bound, which is well under every cache TTL.
        const changed = Date.now();
        expect((await call(writer, admin, 'DELETE', '/api/issuer/credentials/pid-extra')).status).to.equal(204);
        await waitFor('the removal everywhere', () => everywhere((ids) => !ids.includes('pid-extra')), NOTIFICATION_BOUND_MS - (Date.now() - changed));
    });

    it('locks a client out on every process after failures spread over all of them', async () => {
        const [first] = deployment.services();
        const created = await call(first!, admin, 'POST', '/api/clients', { clientId: 'acme-locked', roles: ['issuance:offer'], tenantId: 'acme' });
        expect(created.status, created.text).to.equal(201);
        // A change of a client resets its failures everywhere: its creation's notification must have arrived
        // before the failures start, or it would wipe those counted before it.
        await new Promise((r) => setTimeout(r, NOTIFICATION_BOUND_MS));
        // Fresh connections through the proxy: requests alternate over the processes (the cluster's workers too).
        const proxy = deployment.proxy();
        let turn = 0;
        proxy.route = () => at(turn++);
        for (let i = 0; i < LOCKOUT.maxFailures; i++) {
            expect((await tokenAt(proxy.url, 'acme-locked', 'wrong-secret-123456')).status).to.equal(401);
        }
        const upstreams = new Set(proxy.served.slice(-LOCKOUT.maxFailures).map((s) => s.upstream));
        expect(upstreams.size).to.equal(new Set(deployment.services()).size);
        // Once the last failure's notification arrived, the right secret is refused by every process.
        await new Promise((r) => setTimeout(r, NOTIFICATION_BOUND_MS));
        for (let i = 0; i < 3; i++) {
            const res = await tokenAt(proxy.url, 'acme-locked', created.body.clientSecret);
            expect(res.status, res.text).to.equal(401);
            expect(res.body.error_description).to.contain('too many failed attempts');
        }
    });

    it('runs a scheduled job once across processes', async () => {
        const runs = await waitFor('three runs of the probe job', async () => {
            const lines = Fs.existsSync(deployment.probeFile()) ? Fs.readFileSync(deployment.probeFile(), 'utf8').trim().split('\n') : [];
            return lines.length >= 3 ? lines.map((l) => l.split(' ').map(Number) as [number, number]) : undefined;
        }, 20_000);
        // One chain of runs, each starting a second after the previous one finished: three runners would run side by
        // side and land within the same half second.
        for (let i = 1; i < runs.length; i++) {
            expect(runs[i]![1] - runs[i - 1]![1]).to.be.at.least(500);
        }
    });
};

/** Fresh database, proxy port and probe file; the processes' common environment. */
const prepare = async (dialect: 'sqlite' | 'postgres') => {
    const db = await createTestDatabase(dialect);
    const proxyPort = await freePort();
    const probeFile = Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-replicas-')), 'runs.log');
    const env = testEnv(db, {
        PUBLIC_URL: `http://127.0.0.1:${proxyPort}`,
        HALLMARK_MANIFEST: MANIFEST,
        REPLICA_PROBE_FILE: probeFile,
        WORKER: 'on',
        LOG_LEVEL: 'info',
        OUTBOUND_URL_ALLOW_HTTP: 'true',
        OUTBOUND_URL_ALLOW_PRIVATE_NETWORK: 'true'
    });
    return { db, proxyPort, probeFile, env };
};

if (DIALECTS.includes('postgres')) {
    describe('three replicas on one PostgreSQL database', { timeout: 240_000 }, () => {
        let db: TestDatabase;
        let proxy: Proxy;
        let probeFile: string;
        const replicas: Service[] = [];

        before({ timeout: 240_000 }, async () => {
            const prepared = await prepare('postgres');
            ({ db, probeFile } = prepared);
            // As the Kubernetes migration Job does: once, before the replicas, which then only check.
            const migrate = ChildProcess.spawnSync(process.execPath, ['-r', Path.join(root, 'scripts/register-ts.js'), Path.join(root, 'bin/hallmark.ts'), 'migrate'], {
                env: { PATH: process.env.PATH ?? '', ...prepared.env }, encoding: 'utf8', timeout: 120_000
            });
            expect(migrate.status, migrate.stdout + migrate.stderr).to.equal(0);
            const env = { ...prepared.env, DB_MIGRATIONS_RUN: 'false' };
            // Started together. lab runs no after() once a before() failed, so a failed start stops what did start
            // here: left running, those processes held PostgreSQL connections for the rest of the suite.
            const started = await Promise.allSettled([startService(env), startService(env), startService(env)]);
            replicas.push(...started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : [])));
            const refused = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
            try {
                if (refused) {
                    throw refused.reason;
                }
                proxy = await startProxy(prepared.proxyPort, () => replicas[0]!.url);
            }
            catch (err) {
                await Promise.all(replicas.map((r) => r.stop()));
                await db.drop();
                throw err;
            }
        });

        after(async () => {
            await proxy?.close();
            const codes = await Promise.all(replicas.map((r) => r.stop()));
            expect(codes).to.equal(replicas.map(() => 0));
            await db?.drop();
        });

        behaves({ services: () => replicas.map((r) => r.url), proxy: () => proxy, probeFile: () => probeFile });

        it('made one token signing key and one root client, however many replicas started at once on the fresh database', async () => {
            const Pg = await import('pg');
            const client = new Pg.Client({ host: db.env.DB_HOST, port: Number(db.env.DB_PORT), user: db.env.DB_USERNAME, password: db.env.DB_PASSWORD, database: db.env.DB_DATABASE });
            await client.connect();
            try {
                const keys = await client.query('select count(*)::int as n from service_keys');
                expect(keys.rows[0].n).to.equal(1);
                const roots = await client.query('select count(*)::int as n from audit_logs where kind = $1 and resource_id = $2 and action = $3', ['Client', ROOT_CLIENT.id, 'create']);
                expect(roots.rows[0].n).to.equal(1);
            }
            finally {
                await client.end();
            }
        });

        it('keeps one schedule entry per interval job, however many replicas run jobs', async () => {
            const Pg = await import('pg');
            const client = new Pg.Client({ host: db.env.DB_HOST, port: Number(db.env.DB_PORT), user: db.env.DB_USERNAME, password: db.env.DB_PASSWORD, database: db.env.DB_DATABASE });
            await client.connect();
            try {
                const { rows } = await client.query("select count(*)::int as n from graphile_worker.jobs where key = 'interval:replica-probe'");
                expect(rows[0].n).to.equal(1);
            }
            finally {
                await client.end();
            }
            for (const replica of replicas) {
                expect(replica.output()).to.not.contain('database migrated');
            }
        });
    });
}

if (DIALECTS.includes('sqlite')) {
    describe('cluster mode on SQLite (WORKERS=2)', { timeout: 240_000 }, () => {
        let db: TestDatabase;
        let proxy: Proxy;
        let probeFile: string;
        let cluster: Service;

        before({ timeout: 240_000 }, async () => {
            const prepared = await prepare('sqlite');
            ({ db, probeFile } = prepared);
            cluster = await startService({ ...prepared.env, WORKERS: '2' });
            await waitFor('both workers', async () => cluster.output().includes('Hallmark cluster listening'), 150_000);
            proxy = await startProxy(prepared.proxyPort, () => cluster.url);
        });

        after(async () => {
            await proxy?.close();
            expect(await cluster?.stop()).to.equal(0);
            await db?.drop();
        });

        it('migrates once in the primary, then both workers serve, taking connections in turn', async () => {
            expect(cluster.output().match(/database migrated/g)).to.have.length(1);
            expect(cluster.output().match(/Hallmark listening/g)).to.have.length(2);
            const pids = new Set<number>();
            for (let i = 0; i < 4; i++) {
                pids.add((await call(proxy.url, undefined, 'GET', '/probe/process')).body.pid);
            }
            expect(pids.size).to.equal(2);
        });

        // Each step over a new connection: the workers take turns.
        behaves({ services: () => [cluster.url, cluster.url, cluster.url], proxy: () => proxy, probeFile: () => probeFile });

        it('runs the jobs in one worker only', () => {
            const pids = new Set(Fs.readFileSync(probeFile, 'utf8').trim().split('\n').map((l) => l.split(' ')[0]));
            expect(pids.size).to.equal(1);
        });

        it('replaces a worker that dies, and the replacement takes over its jobs', { timeout: 120_000 }, async () => {
            const runs = () => Fs.readFileSync(probeFile, 'utf8').trim().split('\n').map((l) => Number(l.split(' ')[0]));
            const jobsWorker = runs().at(-1)!;
            process.kill(jobsWorker, 'SIGKILL');
            await waitFor('a new worker', async () => cluster.output().includes('worker exited; starting a new one'), 30_000);
            await waitFor('both workers serving', async () => {
                const pids = new Set<number>();
                for (let i = 0; i < 4; i++) {
                    pids.add((await call(proxy.url, undefined, 'GET', '/probe/process')).body.pid);
                }
                return pids.size === 2 && !pids.has(jobsWorker);
            }, 60_000);
            await waitFor('the jobs in the new worker', async () => ![jobsWorker].includes(runs().at(-1)!), 60_000);
            const after = runs().slice(runs().lastIndexOf(jobsWorker) + 1);
            expect(new Set(after).size).to.equal(1);
        });
    });
}
