import Cluster, { type Worker } from 'node:cluster';
import type Hapi from '@hapi/hapi';
import { relayClusterBus } from '../lib/cluster-relay';
import type { Manifest } from '../lib/compose';
import { ConfigError, loadConfig, type Config } from '../manifests/environment';
import { createLogger, type Logger } from '../lib/logging';

/**
 * The service's modules, loaded when a command needs them: the cluster primary only forks and relays, and stays
 * ~60 MiB smaller without them.
 */
const app = () => ({
    ...require('../lib/compose') as typeof import('../lib/compose'),
    ...require('../lib/db/database') as typeof import('../lib/db/database'),
    ...require('../lib/db/migrate') as typeof import('../lib/db/migrate'),
    ...require('../plugins/oauth2/service-keys') as typeof import('../plugins/oauth2/service-keys'),
    ...require('../lib/cli/config') as typeof import('../lib/cli/config')
});

const USAGE = `Usage: hallmark <command>

Commands:
  start               start the service (manifest: HALLMARK_MANIFEST or the default manifest; WORKERS processes)
  migrate             apply pending database migrations
  migrate:status      list applied and pending migrations
  keys:rotate         new signing key for management tokens (old public keys stay until their tokens expire)
  config <command>    configuration as code: upgrade, validate, export, plan, import ("hallmark config --help")
`;

/**
 * HALLMARK_MANIFEST names a module exporting a manifest, or a function of the parsed environment that makes one
 * (as manifests/default.ts). A manifest without server settings listens at PORT and HOST.
 */
const loadManifest = (config: Config, name?: string): Manifest => {
    const mod = name ? require(require.resolve(name, { paths: [process.cwd()] })) : require('../manifests/default');
    const exported: Manifest | ((config: Config) => Manifest) = mod.manifest ?? mod.default ?? mod;
    const manifest = typeof exported === 'function' ? exported(config) : exported;
    return { ...manifest, server: { port: config.port, host: config.host, ...manifest.server } };
};

/**
 * The manifest's plugins registered but not started: the database is open and core knows the migrations of exactly
 * the plugins `start` would run. Stopping closes the database.
 */
const withComposedServer = async <T>(config: Config, log: Logger, fn: (server: Hapi.Server) => Promise<T>): Promise<T> => {
    const { Database, createServer } = app();
    await Database.assertReachable(config.db);
    const server = await createServer(loadManifest(config, config.manifest), { logger: log });
    try {
        return await fn(server);
    }
    finally {
        await server.stop();
    }
};

const start = async (config: Config, log: Logger, manifestName?: string): Promise<Hapi.Server> => {
    const { Database, createServer } = app();
    await Database.assertReachable(config.db);
    const server = await createServer(loadManifest(config, manifestName), { logger: log });
    let stopping = false;
    const shutdown = async (signal: string) => {
        if (stopping) {
            return;
        }
        stopping = true;
        log.info({ signal }, 'shutting down: finishing in-flight requests');
        await server.stop({ timeout: 10_000 });
        log.info('stopped');
        process.exit(0);
    };
    process.once('SIGTERM', () => void shutdown('SIGTERM'));
    process.once('SIGINT', () => void shutdown('SIGINT'));
    await server.start();
    // A manifest without the docs plugin serves no docs.
    const docs = server.match('GET', '/api/docs') ? `${config.publicUrl}/api/docs` : undefined;
    const consoleUrl = server.match('GET', '/console') ? `${config.publicUrl}/console` : undefined;
    log.info({ url: server.info.uri, publicUrl: config.publicUrl, docs, console: consoleUrl, database: config.db.type }, 'Hallmark listening');
    return server;
};

/** Set by the cluster primary for each worker it forks: "on" for the one worker that runs the scheduled jobs. */
const JOBS_ROLE = 'HALLMARK_CLUSTER_JOBS';

/** A worker crashing this often within RESTART_WINDOW_MS is not restarted again: the primary stops with an error. */
const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 60_000;

/** How long the primary waits for its workers to finish their in-flight requests (each has 10 s) before killing them. */
const STOP_GRACE_MS = 15_000;

/**
 * A cluster worker serves; the primary did what must run once: migrations and the config folder import. Jobs run in
 * one worker only (SQLite has no shared schedule; on PostgreSQL graphile-worker would cope, but one runner per
 * process is connections for nothing).
 */
const workerConfig = (config: Config): Config => ({
    ...config,
    db: { ...config.db, migrationsRun: false, synchronize: false },
    configImport: { ...config.configImport, folder: undefined },
    worker: config.worker && process.env[JOBS_ROLE] === 'on'
});

/**
 * What must run once before the workers serve, in a process the primary forks (role "prepare"): compose the service
 * without listening, which migrates, bootstraps the root client and imports the config folder (the onPreStart
 * steps), then stop.
 */
const prepare = async (config: Config, log: Logger): Promise<void> => {
    await withComposedServer(config, log, (server) => server.initialize());
};

/** Forks the prepare process and resolves with its exit code. */
const runPrepare = (): Promise<number> => new Promise((resolve) => {
    const worker = Cluster.fork({ [JOBS_ROLE]: 'prepare' });
    worker.once('exit', (code, signal) => resolve(signal ? 1 : code ?? 1));
});

/**
 * The cluster primary (WORKERS > 1): has the preparation run once (migrations, config import) before any worker
 * starts, then forks the workers, which share the port (node:cluster hands connections round-robin). It relays the
 * change bus between workers (SQLite; on PostgreSQL every process listens itself), restarts a worker that dies
 * (keeping the jobs role with the replacement), and on SIGTERM or SIGINT stops them all gracefully before exiting.
 * It loads none of the service's modules itself.
 */
const startCluster = async (config: Config, log: Logger): Promise<void> => {
    const prepared = await runPrepare();
    if (prepared !== 0) {
        log.fatal({ code: prepared }, 'preparing the database failed (see above); not starting workers');
        process.exit(1);
    }

    const jobsOf = new Map<number, boolean>();
    const restarts: number[] = [];
    let stopping = false;
    let listening = 0;
    const fork = (jobs: boolean): Worker => {
        const worker = Cluster.fork({ [JOBS_ROLE]: jobs ? 'on' : 'off' });
        jobsOf.set(worker.id, jobs);
        return worker;
    };
    const exited = new Promise<number>((resolve) => {
        Cluster.on('exit', (worker, code, signal) => {
            const jobs = jobsOf.get(worker.id) ?? false;
            jobsOf.delete(worker.id);
            if (stopping) {
                if (!jobsOf.size) {
                    resolve(0);
                }
                return;
            }
            const now = Date.now();
            restarts.push(now);
            while (restarts[0]! < now - RESTART_WINDOW_MS) {
                restarts.shift();
            }
            if (restarts.length > MAX_RESTARTS) {
                log.fatal({ pid: worker.process.pid, code, signal }, `workers keep exiting (${restarts.length} in ${RESTART_WINDOW_MS / 1000} s); stopping`);
                stopping = true;
                for (const other of Object.values(Cluster.workers ?? {})) {
                    other?.process.kill('SIGTERM');
                }
                resolve(1);
                return;
            }
            log.error({ pid: worker.process.pid, code, signal, jobs }, 'worker exited; starting a new one');
            fork(jobs);
        });
    });
    relayClusterBus(Cluster);
    Cluster.on('listening', (_worker, address) => {
        listening += 1;
        if (listening === config.workers) {
            log.info({ workers: config.workers, port: address.port, publicUrl: config.publicUrl, database: config.db.type }, 'Hallmark cluster listening');
        }
    });

    const shutdown = (signal: string) => {
        if (stopping) {
            return;
        }
        stopping = true;
        log.info({ signal, workers: jobsOf.size }, 'shutting down: stopping workers');
        for (const worker of Object.values(Cluster.workers ?? {})) {
            worker?.process.kill('SIGTERM');
        }
        if (!jobsOf.size) {
            process.exit(0);
        }
        setTimeout(() => {
            for (const worker of Object.values(Cluster.workers ?? {})) {
                worker?.process.kill('SIGKILL');
            }
        }, STOP_GRACE_MS).unref();
    };
    process.once('SIGTERM', () => shutdown('SIGTERM'));
    process.once('SIGINT', () => shutdown('SIGINT'));

    for (let i = 0; i < config.workers; i++) {
        fork(i === 0);
    }
    const code = await exited;
    log.info('stopped');
    process.exit(code);
};

const main = async (argv: string[]): Promise<void> => {
    const [command] = argv;
    if (!command || command === '--help' || command === '-h') {
        process.stdout.write(USAGE);
        return;
    }
    // Needs no service configuration: offline commands compose their own, remote ones take --url.
    if (command === 'config') {
        process.exitCode = await app().runConfigCommand(argv.slice(1), { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env });
        return;
    }
    let config: Config;
    try {
        config = loadConfig(process.env);
    }
    catch (err) {
        if (err instanceof ConfigError) {
            process.stderr.write(`${err.message}\n`);
            process.exit(2);
        }
        throw err;
    }
    const log = createLogger(config);

    switch (command) {
        case 'start':
            if (Cluster.isWorker && process.env[JOBS_ROLE] === 'prepare') {
                await prepare(config, log);
                process.exit(0);
            }
            else if (Cluster.isWorker && process.env[JOBS_ROLE]) {
                await start(workerConfig(config), log, config.manifest);
            }
            else if (config.workers > 1) {
                await startCluster(config, log);
            }
            else {
                await start(config, log, config.manifest);
            }
            return;
        case 'migrate': {
            const applied = await withComposedServer(config, log, (server) => app().migrateLatest(server.db.knex, server.migrations()));
            process.stdout.write(applied.length ? `Applied ${applied.length} migration(s):\n${applied.map((m) => `  ${m}`).join('\n')}\n` : 'Database is up to date.\n');
            return;
        }
        case 'migrate:status': {
            const status = await withComposedServer(config, log, (server) => app().migrationStatus(server.db.knex, server.migrations()));
            process.stdout.write([
                ...status.completed.map((m) => `applied  ${m}`),
                ...status.pending.map((m) => `pending  ${m}`),
                `${status.completed.length} applied, ${status.pending.length} pending`
            ].join('\n') + '\n');
            return;
        }
        case 'keys:rotate': {
            const kid = await withComposedServer(config, log, async (server) => {
                const { migrateLatest, ServiceKeys } = app();
                await migrateLatest(server.db.knex, server.migrations());
                const keys = new ServiceKeys(server.db, config.auth.tokenTtl);
                await keys.init();
                return keys.rotate();
            });
            process.stdout.write(`New token signing key ${kid} is active; running servers sign with it within 30 s. The old public key stays published until its tokens expire.\n`);
            return;
        }
        default:
            process.stderr.write(`Unknown command ${command}\n\n${USAGE}`);
            process.exit(2);
    }
};

main(process.argv.slice(2)).catch((err) => {
    // By name: the primary of a cluster never loads the database module.
    if (err instanceof Error && err.name === 'DatabaseUnreachableError') {
        process.stderr.write(`hallmark: ${err.message}\n`);
        process.exit(1);
    }
    process.stderr.write(`hallmark: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
    process.exit(1);
});
