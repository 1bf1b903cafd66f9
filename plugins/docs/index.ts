import type Hapi from '@hapi/hapi';
import Inert from '@hapi/inert';
import Vision from '@hapi/vision';
import './lean-requires';
import HapiSwagger from 'hapi-swagger';

/**
 * Swagger UI at /api/docs and the machine-readable description at /api/docs-json, generated from the joi schemas
 * of every route tagged `api`. GET /api leads to the UI.
 */
export const plugin: Hapi.Plugin<Record<string, never>> = {
    name: 'hallmark-docs',
    dependencies: ['hallmark-core'],
    async register(server) {
        const { config } = server.app;
        await server.register([
            Inert,
            Vision,
            {
                plugin: HapiSwagger,
                options: {
                    info: { title: 'Hallmark management API', version: config.version, description: 'Configuration, offers, requests and sessions of a Hallmark tenant. Wallet-facing protocol endpoints are not part of this description.' },
                    documentationPath: '/api/docs',
                    jsonPath: '/api/docs-json',
                    swaggerUIPath: '/api/swaggerui/',
                    routesBasePath: '/api/swaggerui/',
                    grouping: 'tags',
                    sortEndpoints: 'ordered',
                    auth: false,
                    securityDefinitions: config.auth.oidc
                        ? { bearer: { type: 'apiKey', name: 'Authorization', in: 'header', description: 'Bearer <token from the identity provider>' } }
                        : { oauth2: { type: 'oauth2', flow: 'application', tokenUrl: `${config.publicUrl}/api/oauth2/token`, scopes: {}, description: 'Client credentials: client id and secret' } },
                    security: [config.auth.oidc ? { bearer: [] } : { oauth2: [] }]
                } satisfies HapiSwagger.RegisterOptions
            }
        ]);
        server.route({
            method: 'GET',
            path: '/api',
            options: { auth: false, description: 'Redirects to the API documentation at /api/docs' },
            handler: (_request, h) => h.redirect('/api/docs')
        });
    }
};
