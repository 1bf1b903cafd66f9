import Fs from 'node:fs';
import Path from 'node:path';
import type Hapi from '@hapi/hapi';
import Inert from '@hapi/inert';
import { pluginOptions } from '../../lib/compose';
import { NotFoundError } from '../../lib/errors';
import { projectRoot } from '../../lib/package-info';
import { consoleOptionsSchema, type ConsoleOptions } from './options';

export type { ConsoleOptions };

/**
 * The console loads nothing from anywhere but this service: its own script and stylesheet, no inline code, no
 * frames, no form posts. The API calls go to this origin; in external OIDC mode the sign-in also goes to the
 * provider's origin, and nowhere else.
 */
export const contentSecurityPolicy = (extraConnect: string[] = []): string => [
    'default-src \'none\'',
    'script-src \'self\'',
    'style-src \'self\'',
    'img-src \'self\'',
    `connect-src 'self'${extraConnect.map((o) => ` ${o}`).join('')}`,
    'base-uri \'none\'',
    'form-action \'none\'',
    'frame-ancestors \'none\''
].join('; ');

/** Content-hashed file names (esbuild's `[name]-[hash]`) never change content, so browsers keep them a year. */
const IMMUTABLE = 'public, max-age=31536000, immutable';

/**
 * The operator console: a static single-page application (built by `npm run build` into dist/console, see
 * docs/console.md) served at /console, plus its start-up settings at /console/config.json (the sign-in mode and the
 * configuration kinds with their schema versions, so forms load the matching JSON Schema). The console speaks only
 * to the management API with the token it signs in for; these routes need no token and serve no tenant data.
 */
export const plugin: Hapi.Plugin<ConsoleOptions> = {
    name: 'hallmark-console',
    dependencies: ['hallmark-core', 'hallmark-oauth2'],
    async register(server, rawOptions) {
        const options = pluginOptions('hallmark-console', consoleOptionsSchema, rawOptions);
        const root = options.assets ?? Path.join(projectRoot, 'dist', 'console');
        const external = server.plugins['hallmark-oauth2'].mode === 'external';
        if (external && !options.oidcIssuer) {
            throw new Error('hallmark-console: external OIDC mode needs the oidcIssuer option');
        }
        const issuer = external ? options.oidcIssuer : undefined;
        const csp = contentSecurityPolicy(issuer ? [new URL(issuer).origin] : []);
        await server.register(Inert);

        const secure = (request: Hapi.Request, h: Hapi.ResponseToolkit) => {
            const { response } = request;
            const headers = 'isBoom' in response && response.isBoom ? response.output.headers : (response as Hapi.ResponseObject).headers;
            Object.assign(headers, {
                'content-security-policy': csp,
                'x-content-type-options': 'nosniff',
                'referrer-policy': 'no-referrer',
                'x-frame-options': 'DENY',
                'cross-origin-opener-policy': 'same-origin'
            });
            return h.continue;
        };
        const ext = { onPreResponse: { method: secure } };
        const assetExt = {
            onPreResponse: {
                method: (request: Hapi.Request, h: Hapi.ResponseToolkit) => {
                    const { response } = request;
                    // Only a found file: a 404 must not be kept, the file may come with the next deployment.
                    if (!('isBoom' in response && response.isBoom) && [200, 304].includes((response as Hapi.ResponseObject).statusCode)) {
                        (response as Hapi.ResponseObject).header('cache-control', IMMUTABLE);
                    }
                    return secure(request, h);
                }
            }
        };
        const index = Path.join(root, 'index.html');
        const built = () => Fs.existsSync(index);
        server.ext('onPostStart', () => {
            if (!built()) {
                server.app.log.warn({ assets: root }, 'console assets are not built: run npm run build');
            }
        });

        server.route([
            {
                method: 'GET',
                path: '/console',
                options: { auth: false, ext, description: 'Operator console (single-page application)' },
                handler: (_request, h) => {
                    if (!built()) {
                        return h.response('The console is not built: run npm run build.\n').type('text/plain').code(503);
                    }
                    // Revalidated on every load (ETag), so a new build is picked up at once.
                    return h.file(index, { confine: false }).header('cache-control', 'no-cache');
                }
            },
            {
                method: 'GET',
                path: '/console/config.json',
                options: { auth: false, ext, description: 'Start-up settings of the operator console' },
                handler: (request, h) => h.response({
                    auth: issuer ? { mode: 'external', issuer } : { mode: 'integrated', tokenEndpoint: '/api/oauth2/token' },
                    kinds: request.server.registry.ordered().map((k) => ({ kind: k.kind, file: k.file, version: k.version }))
                }).header('cache-control', 'no-cache')
            },
            {
                method: 'GET',
                path: '/console/{path*}',
                // Anything else under /console is a 404 carrying the console's headers too (the pages live in the hash).
                options: { auth: false, ext, description: 'Unknown console path' },
                handler: () => {
                    throw new NotFoundError();
                }
            },
            {
                method: 'GET',
                path: '/console/assets/{file*}',
                options: {
                    auth: false,
                    ext: assetExt,
                    description: 'Operator console assets (content-hashed names)',
                    // Not found stays 404 with the Boom body; no directory listings, no dot files.
                    handler: { directory: { path: Path.join(root, 'assets'), listing: false, showHidden: false, redirectToSlash: false, index: false } }
                }
            }
        ]);
    }
};
