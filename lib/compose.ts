import Hapi from '@hapi/hapi';
import type { Config } from './config';
import { ValidationError, joiDetails } from './errors';
import { createLogger, type Logger } from './logging';

/**
 * A deployment is a manifest: the plugins to load, in order, with their options. A plugin may be given as an
 * object or as a module name (so a JSON manifest or a third-party npm package needs one line).
 */
export interface ManifestEntry<Options = any> {
    plugin: Hapi.Plugin<Options> | string;
    options?: Options;
}

export interface Manifest {
    name: string;
    plugins: ManifestEntry[];
}

export interface ComposeOptions {
    logger?: Logger;
}

declare module '@hapi/hapi' {
    interface ServerApplicationState {
        config: Config;
        log: Logger;
        manifest: string;
    }
}

const resolvePlugin = (entry: ManifestEntry): Hapi.Plugin<unknown> => {
    if (typeof entry.plugin !== 'string') {
        return entry.plugin;
    }
    const mod = require(entry.plugin);
    const plugin = mod.plugin ?? mod.default ?? mod;
    if (!plugin || typeof plugin.register !== 'function') {
        throw new Error(`Manifest entry ${entry.plugin} does not export a hapi plugin`);
    }
    return plugin;
};

const MAX_PAYLOAD_BYTES = 1024 * 1024;

export const createServer = async (manifest: Manifest, config: Config, options: ComposeOptions = {}): Promise<Hapi.Server> => {
    const log = options.logger ?? createLogger(config);
    const server = Hapi.server({
        port: config.port,
        host: config.host,
        router: { stripTrailingSlash: true },
        routes: {
            payload: { maxBytes: MAX_PAYLOAD_BYTES },
            validate: {
                failAction: (_request, _h, err) => {
                    const e = err as Error & { details?: Array<{ path: Array<string | number>; message: string }> };
                    throw new ValidationError(e.message, e.details ? joiDetails({ details: e.details }) : undefined);
                }
            },
            // Response schemas document every route; tests validate every answer against them, production none.
            response: { emptyStatusCode: 204, sample: config.env === 'test' ? 100 : 0 }
        }
    });

    Object.assign(server.app, { config, log, manifest: manifest.name });
    for (const entry of manifest.plugins) {
        await server.register({ plugin: resolvePlugin(entry), options: entry.options ?? {} });
    }
    return server;
};

/** Fails plugin registration with a clear message when a plugin it builds on is not registered before it. */
export const requirePlugins = (server: Hapi.Server, plugin: string, needs: string[]): void => {
    const registered = server.registrations as Record<string, unknown>;
    const missing = needs.filter((name) => !registered[name]);
    if (missing.length) {
        throw new Error(`Plugin ${plugin} needs ${missing.join(', ')} registered before it in the manifest`);
    }
};
