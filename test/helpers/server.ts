import type Hapi from '@hapi/hapi';
import Pino from 'pino';
import { createServer, dependenciesOf, nameOf, resolvePlugin, type Manifest, type ManifestEntry } from '../../lib/compose';
import { loadConfig, type Config } from '../../manifests/environment';
import { manifest as defaultManifest } from '../../manifests/default';
import { createTestDatabase, type DialectName, type TestDatabase } from './databases';

export const ROOT_CLIENT = { id: 'root', secret: 'root-secret-for-tests-0123456789' };

/** The environment of a test server: development-free, quiet, no background jobs unless asked. */
export const testEnv = (db: TestDatabase, extra: Record<string, string> = {}): Record<string, string> => ({
    NODE_ENV: 'test',
    PUBLIC_URL: 'http://hallmark.test',
    MASTER_SECRET: 'test-master-secret-0123456789-abcdefghij',
    AUTH_CLIENT_ID: ROOT_CLIENT.id,
    AUTH_CLIENT_SECRET: ROOT_CLIENT.secret,
    LOG_LEVEL: 'error',
    WORKER: 'off',
    PORT: '0',
    HOST: '127.0.0.1',
    ...db.env,
    ...extra
});

/** A manifest, or a function of the test environment's configuration that makes one (as manifests/default.ts). */
export type TestManifest = Manifest | ((config: Config) => Manifest);

/** The default manifest plus the given plugins. */
export const defaultManifestWith = (name: string, ...extra: ManifestEntry[]) => (config: Config): Manifest => {
    const base = defaultManifest(config);
    return { ...base, name, plugins: [...base.plugins, ...extra] };
};

/** Only the named plugins of the default manifest, with the options it gives them. */
export const defaultManifestOnly = (name: string, ...plugins: string[]) => (config: Config): Manifest => {
    const base = defaultManifest(config);
    return { ...base, name, plugins: base.plugins.filter((e) => plugins.includes((e.plugin as { name: string }).name)) };
};

/**
 * A plugin's own manifest: the plugins of the default manifest named (with the options it gives them) or manifest
 * entries of the test's own (a fixture plugin), and the default-manifest plugins their hapi `dependencies` name,
 * transitively; nothing else. So a plugin that uses another without declaring it fails its own tests. Name the
 * plugin under test first, then what the test exercises beyond it.
 */
export const manifestFor = (...plugins: Array<string | ManifestEntry>) => (config: Config): Manifest => {
    const base = defaultManifest(config);
    const byName = new Map(base.plugins.map((entry) => [nameOf(resolvePlugin(entry)), entry]));
    const own = plugins.filter((p): p is ManifestEntry => typeof p !== 'string');
    const wanted = new Set<string>();
    const want = (name: string) => {
        const entry = byName.get(name);
        if (!entry) {
            throw new Error(`The default manifest has no plugin ${name}`);
        }
        if (!wanted.has(name)) {
            wanted.add(name);
            dependenciesOf(resolvePlugin(entry)).forEach(want);
        }
    };
    plugins.filter((p): p is string => typeof p === 'string').forEach(want);
    // A fixture's dependencies outside the default manifest are its test's business: compose names any missing one.
    own.forEach((entry) => dependenciesOf(resolvePlugin(entry)).filter((name) => byName.has(name)).forEach(want));
    const first = plugins[0]!;
    const name = typeof first === 'string' ? first : nameOf(resolvePlugin(first));
    return { ...base, name: `only-${name}`, plugins: [...base.plugins.filter((entry) => wanted.has(nameOf(resolvePlugin(entry)))), ...own] };
};

/**
 * A manifest a host composed itself: the test server's address and response validation around it, so a test
 * server can start it.
 */
const withTestServer = (manifest: Manifest, config: Config): Manifest =>
    ({ ...manifest, server: { port: config.port, host: config.host, validateResponses: true, ...manifest.server } });

export interface TestServer {
    server: Hapi.Server;
    config: Config;
    database: TestDatabase;
    stop(): Promise<void>;
}

/** A fresh server on a fresh database, initialized (migrated, registry sealed, import done) but not listening. */
export const startTestServer = async (dialect: DialectName, options: { manifest?: TestManifest; env?: Record<string, string>; listen?: boolean; logger?: Pino.Logger } = {}): Promise<TestServer> => {
    const database = await createTestDatabase(dialect);
    const config = loadConfig(testEnv(database, options.env));
    const manifest = typeof options.manifest === 'function' ? options.manifest(config) : options.manifest ?? defaultManifest(config);
    const server = await createServer(withTestServer(manifest, config), { logger: options.logger ?? Pino({ level: 'silent' }) });
    try {
        await (options.listen ? server.start() : server.initialize());
    }
    catch (err) {
        await server.stop().catch(() => undefined);
        await database.drop();
        throw err;
    }
    return {
        server,
        config,
        database,
        async stop() {
            await server.stop();
            await database.drop();
        }
    };
};
