import Hapi from '@hapi/hapi';
import type Joi from 'joi';
import { ValidationError, joiDetails } from './errors';
import { createLogger, type Logger } from './logging';

/**
 * A deployment is a manifest: the server's address and the plugins to load with their options. A plugin may be
 * given as an object or as a module name (so a JSON manifest or a third-party npm package needs one line). Plugins
 * are registered in manifest order, except that a plugin always comes after the plugins its hapi `dependencies`
 * name: the order of the lines does not matter, a missing dependency fails with a message naming both.
 */
export interface ManifestEntry<Options = any> {
    plugin: Hapi.Plugin<Options> | string;
    options?: Options;
}

export interface Manifest {
    name: string;
    server?: {
        port?: number;
        host?: string;
        /** Validate every response against its route's schema (tests); production validates none. */
        validateResponses?: boolean;
    };
    plugins: ManifestEntry[];
}

export interface ComposeOptions {
    logger?: Logger;
}

declare module '@hapi/hapi' {
    interface ServerApplicationState {
        log: Logger;
        manifest: string;
    }
}

export const resolvePlugin = (entry: ManifestEntry): Hapi.Plugin<unknown> => {
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

export const nameOf = (plugin: Hapi.Plugin<unknown>): string => (plugin as { name?: string }).name ?? (plugin as { pkg?: { name?: string } }).pkg?.name ?? '(unnamed plugin)';

export const dependenciesOf = (plugin: Hapi.Plugin<unknown>): string[] => {
    const declared = plugin.dependencies;
    if (!declared) {
        return [];
    }
    return typeof declared === 'string' ? [declared] : Array.isArray(declared) ? declared : Object.keys(declared);
};

interface Resolved {
    plugin: Hapi.Plugin<unknown>;
    name: string;
    needs: string[];
    options: unknown;
}

/** Manifest order, moved only as far as each plugin's dependencies require. */
const registrationOrder = (manifest: Manifest): Resolved[] => {
    const entries = manifest.plugins.map((entry) => {
        const plugin = resolvePlugin(entry);
        return { plugin, name: nameOf(plugin), needs: dependenciesOf(plugin), options: entry.options ?? {} };
    });
    const listed = new Set(entries.map((e) => e.name));
    for (const entry of entries) {
        const missing = entry.needs.filter((name) => !listed.has(name));
        if (missing.length) {
            throw new Error(`Manifest ${manifest.name}: plugin ${entry.name} needs ${missing.join(', ')}, which the manifest does not list`);
        }
    }
    const ordered: Resolved[] = [];
    const placed = new Set<string>();
    const pending = [...entries];
    while (pending.length) {
        const next = pending.findIndex((e) => e.needs.every((name) => placed.has(name)));
        if (next < 0) {
            throw new Error(`Manifest ${manifest.name}: plugins ${pending.map((e) => e.name).join(', ')} depend on each other`);
        }
        const [entry] = pending.splice(next, 1);
        ordered.push(entry!);
        placed.add(entry!.name);
    }
    return ordered;
};

const MAX_PAYLOAD_BYTES = 1024 * 1024;

/** Used when the host passes no logger: info and above on the console, sensitive values redacted. */
const defaultLogger = () => createLogger({
    log: { level: 'info', redact: true, toFile: false, filePath: '', http: false, httpResponseBody: false, httpResponseBodyMaxLength: 0, session: false, sessionStore: 'off' }
});

export const createServer = async (manifest: Manifest, options: ComposeOptions = {}): Promise<Hapi.Server> => {
    const log = options.logger ?? defaultLogger();
    const plugins = registrationOrder(manifest);
    const server = Hapi.server({
        port: manifest.server?.port ?? 3000,
        host: manifest.server?.host ?? '0.0.0.0',
        router: { stripTrailingSlash: true },
        // gzip of a protocol message of a few KB (issuer metadata, a credential, a request object) cost ~0.2 ms of
        // CPU, three times a whole request of the floor, to save a kilobyte or two; lists, exports and docs still are.
        compression: { minBytes: 16384 },
        routes: {
            payload: { maxBytes: MAX_PAYLOAD_BYTES },
            validate: {
                failAction: (_request, _h, err) => {
                    const e = err as Error & { details?: Array<{ path: Array<string | number>; message: string }> };
                    throw new ValidationError(e.message, e.details ? joiDetails({ details: e.details }) : undefined);
                }
            },
            // Response schemas document every route; tests validate every answer against them, production none.
            response: { emptyStatusCode: 204, sample: manifest.server?.validateResponses ? 100 : 0 }
        }
    });

    Object.assign(server.app, { log, manifest: manifest.name });
    try {
        for (const { plugin, options: pluginOptions } of plugins) {
            await server.register({ plugin, options: pluginOptions });
        }
    }
    catch (err) {
        // What the plugins registered so far opened (the database) is closed by their onPostStop handlers.
        await server.stop().catch(() => undefined);
        throw err;
    }
    return server;
};

/**
 * A plugin's options, validated at register time: defaults applied, unknown keys refused, and every problem named
 * with the plugin and the option (`Plugin hallmark-sessions: invalid options: "ttl" must be a number`).
 */
export const pluginOptions = <T>(plugin: string, schema: Joi.ObjectSchema<T>, options: unknown): T => {
    const { value, error } = schema.validate(options ?? {}, { abortEarly: false });
    if (error) {
        throw new Error(`Plugin ${plugin}: invalid options: ${error.details.map((d) => d.message).join('; ')}`);
    }
    return value;
};
