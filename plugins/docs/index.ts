import type Hapi from '@hapi/hapi';
import Inert from '@hapi/inert';
import Vision from '@hapi/vision';
import './lean-requires';
import HapiSwagger from 'hapi-swagger';
import Joi from 'joi';
import { pluginOptions } from '../../lib/compose';
import { packageVersion } from '../../lib/package-info';

/** One line per tag of the /api routes; a test fails for a tag used without one. */
const TAGS: Array<{ name: string; description: string }> = [
    { name: 'oauth2', description: 'Management access tokens (client credentials grant) and the keys that verify them' },
    { name: 'clients', description: 'Management clients: roles, allowed configurations, secrets shown once' },
    { name: 'tenants', description: 'Tenants and their status (tenant:manage)' },
    { name: 'audit', description: 'Audit log of configuration changes, by tenant' },
    { name: 'key-chains', description: 'Signing keys with their certificate chains, and the KMS providers that hold them' },
    { name: 'issuance', description: 'OpenID4VCI: credential configurations, issuer settings, attribute providers, webhooks and credential offers' },
    { name: 'verification', description: 'OpenID4VP: presentation configurations, trust lists and presentation requests' },
    { name: 'sessions', description: 'Issuance and presentation sessions: search, results, live events, flow logs and retention settings' },
    { name: 'config-bundles', description: 'Configuration bundles: export a tenant, plan and import a bundle, operation reports' },
    { name: 'schemas', description: 'JSON Schemas of the configuration documents (no token needed)' },
    { name: 'health', description: 'Liveness and database reachability (no token needed)' }
];

/**
 * hapi-swagger puts the global `security` on every operation, so Swagger UI draws a padlock even on routes that take
 * no token. An empty list on those operations (read by hapi-swagger from the route's plugin settings) clears it.
 * Done once every plugin has added its routes.
 */
const markRoutesWithoutToken = (server: Hapi.Server): void => {
    for (const route of server.table()) {
        const settings = route.settings as { auth?: unknown; plugins?: Record<string, Record<string, unknown> | undefined> };
        if (settings.auth === false) {
            settings.plugins = { ...settings.plugins, 'hapi-swagger': { ...settings.plugins?.['hapi-swagger'], security: [] } };
        }
    }
};

/**
 * Swagger UI at /api/docs and the machine-readable description at /api/docs-json, generated from the joi schemas
 * of every route tagged `api`. GET /api leads to the UI.
 */
export const plugin: Hapi.Plugin<Record<string, never>> = {
    name: 'hallmark-docs',
    // The token flow the docs offer (Authorize) is the one the oauth2 plugin set up.
    dependencies: ['hallmark-core', 'hallmark-oauth2'],
    async register(server, options) {
        pluginOptions('hallmark-docs', Joi.object({}), options);
        const external = server.plugins['hallmark-oauth2'].mode === 'external';
        await server.register([
            Inert,
            Vision,
            {
                plugin: HapiSwagger,
                options: {
                    info: { title: 'Hallmark management API', version: packageVersion(), description: 'Configuration, offers, requests and sessions of a Hallmark tenant. Wallet-facing protocol endpoints are not part of this description.' },
                    documentationPath: '/api/docs',
                    jsonPath: '/api/docs-json',
                    swaggerUIPath: '/api/swaggerui/',
                    routesBasePath: '/api/swaggerui/',
                    grouping: 'tags',
                    sortEndpoints: 'ordered',
                    tags: TAGS,
                    auth: false,
                    // Relative: Swagger UI resolves it against the address the docs were loaded from, so Authorize works
                    // whatever host name the page was opened at (PUBLIC_URL may name another one).
                    securityDefinitions: external
                        ? { bearer: { type: 'apiKey', name: 'Authorization', in: 'header', description: 'Bearer <token from the identity provider>' } }
                        : { oauth2: { type: 'oauth2', flow: 'application', tokenUrl: '/api/oauth2/token', scopes: {}, description: 'Client credentials: client id and secret' } },
                    security: [external ? { bearer: [] } : { oauth2: [] }]
                } satisfies HapiSwagger.RegisterOptions
            }
        ]);
        server.ext('onPreStart', () => markRoutesWithoutToken(server));
        server.route({
            method: 'GET',
            path: '/api',
            options: { auth: false, description: 'Redirects to the API documentation at /api/docs' },
            handler: (_request, h) => h.redirect('/api/docs')
        });
    }
};
