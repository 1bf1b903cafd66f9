import type Hapi from '@hapi/hapi';
import { clientCache } from './clients';
import { pluginOptions } from '../../lib/compose';
import { withStartupLock } from '../../lib/db/lock';
import type { Logger } from '../../lib/logging';
import { clientKind } from '../../resources/client';
import { bootstrapRootClient } from './bootstrap';
import * as auth from './migrations/20261125_0002_auth';
import * as clientLockout from './migrations/20261125_0007_client_lockout_in_memory';
import { KeycloakAdmin } from './oidc/keycloak-admin';
import { OidcVerifier } from './oidc/verifier';
import { clientRoutes } from './routes/clients';
import { jwksRoutes } from './routes/jwks';
import { tokenRoutes } from './routes/token';
import { bearerScheme } from './scheme';
import { ServiceKeys } from './service-keys';
import { oauth2OptionsSchema, type OAuth2Options, type OidcOptions } from './options';
import { TokenService } from './token-service';
import type { TokenVerifier } from './verifier';

declare module '@hapi/hapi' {
    interface PluginProperties {
        'hallmark-oauth2': {
            /** integrated: this service issues the management tokens; external: an OpenID Connect provider does. */
            mode: 'integrated' | 'external';
        };
    }
}

/** External mode: tokens come from the provider; the root client is created there (Keycloak admin API). */
interface AuthMode {
    verifier: TokenVerifier;
    routes: Hapi.ServerRoute[];
}

const externalProvider = (server: Hapi.Server, oidc: OidcOptions, config: OAuth2Options, log: Logger): AuthMode => {
    const verifier = new OidcVerifier({ issuer: oidc.issuer, internalIssuer: oidc.internalIssuer, audience: oidc.audience, tenantClaim: oidc.tenantClaim, log });
    if (!oidc.audience) {
        log.warn('OIDC_AUDIENCE is not set: tokens the provider issued for any audience are accepted; set it to this service\'s audience');
    }
    server.ext('onPreStart', async () => {
        // A provider that is not up yet must not keep the service down: discovery is retried on the first token.
        await verifier.init().catch((err: Error) => log.warn({ err: err.message }, 'OIDC discovery failed; retrying on the first request'));
        const { clientId, clientSecret } = config;
        if (clientId && clientSecret && oidc.clientId && oidc.clientSecret) {
            const admin = new KeycloakAdmin({ issuer: oidc.issuer, internalIssuer: oidc.internalIssuer, clientId: oidc.clientId, clientSecret: oidc.clientSecret, log });
            const changes = await admin.ensureRootClient({ clientId, secret: clientSecret, roles: ['tenant:manage'] });
            log.info({ clientId, ...changes }, 'root client ensured in the identity provider');
        }
    });
    return { verifier, routes: [] };
};

/** Integrated mode: this service is the OAuth2 server. */
const integratedServer = (server: Hapi.Server, config: OAuth2Options & { publicUrl: string }, log: Logger): AuthMode => {
    const { db, registry } = server;
    const keys = new ServiceKeys(db, config.tokenTtl);
    const tokens = new TokenService(db, keys, server.clientCache, { issuer: config.publicUrl, ttlSeconds: config.tokenTtl, bus: server.bus });
    registry.onChange(clientKind, (_tenantId, id) => tokens.forgetClient(id));
    // Replicas starting together on a fresh database take turns: the first makes the signing key and the root
    // client, the others find them (without the lock each made a key of its own).
    server.ext('onPreStart', () => withStartupLock(db.knex, 'oauth2-bootstrap', async () => {
        await keys.init();
        await bootstrapRootClient(config, registry, log);
    }));
    return { verifier: tokens, routes: [...tokenRoutes(tokens), ...jwksRoutes(keys), ...clientRoutes] };
};

/**
 * Management authentication. Registers: the bearer scheme as the default auth strategy (every route added after
 * it needs a token unless it says `auth: false`) and the Client kind. Integrated mode (OIDC unset) adds the OAuth2
 * server: /api/oauth2/token, /api/oauth2/jwks, /api/clients, service keys and the root-client bootstrap. External
 * mode (OIDC set) validates the provider's tokens; clients live in the provider.
 */
export const plugin: Hapi.Plugin<OAuth2Options> = {
    name: 'hallmark-oauth2',
    dependencies: ['hallmark-core'],
    register(server, options) {
        const config = pluginOptions('hallmark-oauth2', oauth2OptionsSchema, options);
        const { log } = server.app;
        // The clients and service_keys tables (models/). 0002 also adds an index to core's audit_logs: released
        // migrations keep their name and content, so it stays here whole.
        server.registerMigrations([
            { name: '20261125_0002_auth', ...auth },
            { name: '20261125_0007_client_lockout_in_memory', ...clientLockout }
        ]);
        server.registerResource(clientKind);
        server.decorate('server', 'clientCache', clientCache(server.db, server.registry));

        const mode = config.oidc ? externalProvider(server, config.oidc, config, log) : integratedServer(server, { ...config, publicUrl: config.publicUrl! }, log);
        server.expose('mode', config.oidc ? 'external' : 'integrated');
        server.auth.scheme('hallmark-bearer', bearerScheme(mode.verifier));
        server.auth.strategy('hallmark', 'hallmark-bearer');
        // Routes added from here on, here and in later plugins, need a token unless they say `auth: false`.
        server.auth.default('hallmark');
        server.route(mode.routes);
    }
};
