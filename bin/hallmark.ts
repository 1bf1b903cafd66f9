import type Hapi from '@hapi/hapi';
import { createServer, type Manifest } from '../lib/compose';
import { ConfigError, loadConfig, type Config } from '../manifests/environment';
import { Database, DatabaseUnreachableError } from '../lib/db/database';
import { migrateLatest, migrationStatus } from '../lib/db/migrate';
import { createLogger, type Logger } from '../lib/logging';
import { ServiceKeys } from '../plugins/oauth2/service-keys';
import { runConfigCommand } from '../lib/cli/config';

const USAGE = `Usage: hallmark <command>

Commands:
  start               start the service (manifest: HALLMARK_MANIFEST or the default manifest)
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

const main = async (argv: string[]): Promise<void> => {
    const [command] = argv;
    if (!command || command === '--help' || command === '-h') {
        process.stdout.write(USAGE);
        return;
    }
    // Needs no service configuration: offline commands compose their own, remote ones take --url.
    if (command === 'config') {
        process.exitCode = await runConfigCommand(argv.slice(1), { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env });
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
            await start(config, log, config.manifest);
            return;
        case 'migrate': {
            const applied = await withComposedServer(config, log, (server) => migrateLatest(server.db.knex, server.migrations()));
            process.stdout.write(applied.length ? `Applied ${applied.length} migration(s):\n${applied.map((m) => `  ${m}`).join('\n')}\n` : 'Database is up to date.\n');
            return;
        }
        case 'migrate:status': {
            const status = await withComposedServer(config, log, (server) => migrationStatus(server.db.knex, server.migrations()));
            process.stdout.write([
                ...status.completed.map((m) => `applied  ${m}`),
                ...status.pending.map((m) => `pending  ${m}`),
                `${status.completed.length} applied, ${status.pending.length} pending`
            ].join('\n') + '\n');
            return;
        }
        case 'keys:rotate': {
            const kid = await withComposedServer(config, log, async (server) => {
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
    if (err instanceof DatabaseUnreachableError) {
        process.stderr.write(`hallmark: ${err.message}\n`);
        process.exit(1);
    }
    process.stderr.write(`hallmark: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
    process.exit(1);
});
