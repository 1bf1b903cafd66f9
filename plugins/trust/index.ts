import type Hapi from '@hapi/hapi';
import { pluginOptions } from '../../lib/compose';
import { registrarConfigKind } from '../../resources/registrar-config';
import * as trustTables from './migrations/20261126_0015_trust';
import { trustOptionsSchema, type TrustOptions } from './options';
import { registrarRoutes } from './routes/registrar';
import { attachRegistrationCerts, REFRESH_JOB as CERT_REFRESH_JOB, RegistrationCerts } from './services/registration-certs';
import { attachRemoteTrustLists, REFRESH_JOB as LIST_REFRESH_JOB, RemoteTrustLists } from './services/remote-lists';
import { presentationConfigKind, type PresentationConfig } from '../../resources/presentation-config';
import { trustListKind } from '../../resources/trust-list';

export type { TrustOptions } from './options';

/**
 * Trust from published lists and registrars (docs/trust.md). Registers: the trust_list_snapshots and
 * registration_certs tables; the remote trust list loader (ETSI TS 119 612 XML and TS 119 602 JWT lists at a TrustList
 * url) that the TrustAnchors of oid4vp (credential issuers) and oid4vci (wallet providers) use, so both sides decide
 * trust through one module; the RegistrarConfig kind with /api/registrar/config; registration certificates for
 * presentation configurations (the reissue route, registrationCertCache in /api/verifier/config answers, verifier_info
 * in request objects); the refresh jobs of both.
 *
 * A plugin rather than a lib module because it owns tables, jobs, a kind and routes. The consumers find its services
 * through the server's registry (remoteTrustListsOf, registrationCertsOf), so oid4vp and oid4vci need no dependency
 * on it: without it in the manifest, url lists fail closed (trust_list_unavailable) and no certificate is sent.
 */
export const plugin: Hapi.Plugin<TrustOptions> = {
    name: 'hallmark-trust',
    dependencies: ['hallmark-core', 'hallmark-oauth2'],
    register(server, rawOptions) {
        const options = pluginOptions('hallmark-trust', trustOptionsSchema, rawOptions);
        const { log } = server.app;
        server.registerMigrations([{ name: '20261126_0015_trust', ...trustTables }]);
        server.registerResource(registrarConfigKind);

        const lists = new RemoteTrustLists({ db: server.db, registry: server.registry, outbound: server.outbound, log, fetchTimeoutMs: options.fetchTimeoutMs! });
        attachRemoteTrustLists(server.registry, lists);
        const certs = new RegistrationCerts({ db: server.db, registry: server.registry, outbound: server.outbound, log });
        attachRegistrationCerts(server.registry, certs);
        server.expose('remoteTrustLists', lists);
        server.expose('registrationCerts', certs);

        server.registerJob({
            name: LIST_REFRESH_JOB,
            schedule: { everySeconds: options.refreshIntervalSeconds! },
            async run({ log: jobLog }) {
                const result = await lists.refreshDue();
                jobLog[result.refreshed || result.failed || result.removed ? 'info' : 'debug'](result, 'remote trust lists refreshed');
            }
        });
        server.registerJob({
            name: CERT_REFRESH_JOB,
            schedule: { everySeconds: options.refreshIntervalSeconds! },
            async run({ log: jobLog }) {
                const result = await certs.refreshDue();
                jobLog[result.refreshed || result.failed || result.removed ? 'info' : 'debug'](result, 'registration certificates refreshed');
            }
        });

        // Work that a write makes due is started at once, off the request path: the first fetch of a remote list, and
        // the registration certificate of a changed presentation configuration (spec 2.1: refreshed in the background).
        server.registry.onChange(trustListKind, (tenantId, id) => {
            if (tenantId) {
                lists.prefetch(tenantId, id);
            }
        });
        server.registry.onChange(presentationConfigKind, (tenantId, id) => {
            if (tenantId) {
                certs.refreshInBackground(tenantId, id);
            }
        });

        server.route(registrarRoutes(certs));

        // Spec 2.1: answers about presentation configurations show registrationCertCache (read-only). The oid4vp
        // plugin owns those routes; the cache is this plugin's state, so it is added to their answers here.
        server.ext('onPreResponse', async (request, h) => {
            const { response } = request;
            const path = request.route.path;
            if ((path !== '/api/verifier/config' && path !== '/api/verifier/config/{id}') || !response || ('isBoom' in response && response.isBoom)) {
                return h.continue;
            }
            const source = (response as Hapi.ResponseObject).source as { items?: PresentationConfig[] } & PresentationConfig | null;
            const tenantId = request.auth.credentials?.app?.tenantId;
            if (!source || typeof source !== 'object' || !tenantId) {
                return h.continue;
            }
            const configs = Array.isArray(source.items) ? source.items : source.id && source.dcql_query ? [source] : [];
            const caches = await certs.cachedMany(tenantId, configs.filter((c) => c?.id && c.dcql_query));
            for (const config of configs) {
                const cache = caches.get(config.id);
                if (cache) {
                    (config as PresentationConfig & { registrationCertCache?: unknown }).registrationCertCache = cache;
                }
            }
            return h.continue;
        });
    }
};
