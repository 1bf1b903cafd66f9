import type Hapi from '@hapi/hapi';
import { requirePlugins } from '../../lib/compose';
import { clientKind } from '../../resources/client';
import { bootstrapRootClient } from './bootstrap';
import { clientRoutes } from './routes/clients';
import { jwksRoutes } from './routes/jwks';
import { tokenRoutes } from './routes/token';
import { bearerScheme } from './scheme';
import { ServiceKeys } from './service-keys';
import { TokenService } from './token-service';

/**
 * Management authentication. Registers: the bearer scheme as the default auth strategy (every route added after
 * it needs a token unless it says `auth: false`), the Client kind and /api/clients. Integrated mode (OIDC unset)
 * adds the OAuth2 server: /api/oauth2/token, /api/oauth2/jwks, service keys and the root-client bootstrap.
 */
export const plugin: Hapi.Plugin<Record<string, never>> = {
    name: 'hallmark-oauth2',
    register(server) {
        requirePlugins(server, 'hallmark-oauth2', ['hallmark-core']);
        const { config, log } = server.app;
        const { db, registry } = server;

        if (config.auth.oidc) {
            throw new Error('External OIDC mode is being wired');
        }
        const keys = new ServiceKeys(db, config.auth.tokenTtl);
        const tokens = new TokenService(db, keys, { issuer: config.publicUrl, ttlSeconds: config.auth.tokenTtl });
        server.ext('onPreStart', async () => {
            await keys.init();
            await bootstrapRootClient(config, registry, db, log);
        });

        server.auth.scheme('hallmark-bearer', bearerScheme(tokens));
        server.auth.strategy('hallmark', 'hallmark-bearer');
        server.auth.default('hallmark');

        server.registerResource(clientKind);
        server.route([...tokenRoutes(tokens), ...jwksRoutes(keys), ...clientRoutes]);
    }
};
