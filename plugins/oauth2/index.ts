import type Hapi from '@hapi/hapi';
import { clientCache } from '../../lib/auth/clients';
import { requirePlugins } from '../../lib/compose';
import type { Config } from '../../lib/config';
import type { Logger } from '../../lib/logging';
import { clientKind } from '../../resources/client';
import { bootstrapRootClient } from './bootstrap';
import { KeycloakAdmin } from './oidc/keycloak-admin';
import { OidcVerifier } from './oidc/verifier';
import { clientRoutes } from './routes/clients';
import { jwksRoutes } from './routes/jwks';
import { tokenRoutes } from './routes/token';
import { bearerScheme } from './scheme';
import { ServiceKeys } from './service-keys';
import { TokenService } from './token-service';
import type { TokenVerifier } from './verifier';

type OidcConfig = NonNullable<Config['auth']['oidc']>;

/** External mode: tokens come from the provider; the root client is created there (Keycloak admin API). */
interface AuthMode {
    verifier: TokenVerifier;
    routes: Hapi.ServerRoute[];
}

const externalProvider = (server: Hapi.Server, oidc: OidcConfig, config: Config, log: Logger): AuthMode => {
    const verifier = new OidcVerifier({ issuer: oidc.issuer, internalIssuer: oidc.internalIssuer, audience: oidc.audience, tenantClaim: oidc.tenantClaim, log });
    if (!oidc.audience) {
        log.warn('OIDC_AUDIENCE is not set: tokens the provider issued for any audience are accepted; set it to this service\'s audience');
    }
    server.ext('onPreStart', async () => {
        // A provider that is not up yet must not keep the service down: discovery is retried on the first token.
        await verifier.init().catch((err: Error) => log.warn({ err: err.message }, 'OIDC discovery failed; retrying on the first request'));
        const { clientId, clientSecret } = config.auth;
        if (clientId && clientSecret && oidc.clientId && oidc.clientSecret) {
            const admin = new KeycloakAdmin({ issuer: oidc.issuer, internalIssuer: oidc.internalIssuer, clientId: oidc.clientId, clientSecret: oidc.clientSecret, log });
            const changes = await admin.ensureRootClient({ clientId, secret: clientSecret, roles: ['tenant:manage'] });
            log.info({ clientId, ...changes }, 'root client ensured in the identity provider');
        }
    });
    return { verifier, routes: [] };
};

/** Integrated mode: this service is the OAuth2 server. */
const integratedServer = (server: Hapi.Server, config: Config, log: Logger): AuthMode => {
    const { db, registry } = server;
    const keys = new ServiceKeys(db, config.auth.tokenTtl);
    const tokens = new TokenService(db, keys, server.clientCache, { issuer: config.publicUrl, ttlSeconds: config.auth.tokenTtl });
    registry.onChange('Client', (_tenantId, id) => tokens.forgetClient(id));
    server.ext('onPreStart', async () => {
        await keys.init();
        await bootstrapRootClient(config, registry, db, log);
    });
    return { verifier: tokens, routes: [...tokenRoutes(tokens), ...jwksRoutes(keys), ...clientRoutes] };
};

/**
 * Management authentication. Registers: the bearer scheme as the default auth strategy (every route added after
 * it needs a token unless it says `auth: false`) and the Client kind. Integrated mode (OIDC unset) adds the OAuth2
 * server: /api/oauth2/token, /api/oauth2/jwks, /api/clients, service keys and the root-client bootstrap. External
 * mode (OIDC set) validates the provider's tokens; clients live in the provider.
 */
export const plugin: Hapi.Plugin<Record<string, never>> = {
    name: 'hallmark-oauth2',
    register(server) {
        requirePlugins(server, 'hallmark-oauth2', ['hallmark-core']);
        const { config, log } = server.app;
        server.registerResource(clientKind);
        server.decorate('server', 'clientCache', clientCache(server.db, server.registry));

        const mode = config.auth.oidc ? externalProvider(server, config.auth.oidc, config, log) : integratedServer(server, config, log);
        server.auth.scheme('hallmark-bearer', bearerScheme(mode.verifier));
        server.auth.strategy('hallmark', 'hallmark-bearer');
        // Routes added from here on, here and in later plugins, need a token unless they say `auth: false`.
        server.auth.default('hallmark');
        server.route(mode.routes);
    }
};
