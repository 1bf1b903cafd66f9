import type Hapi from '@hapi/hapi';
import { pluginOptions } from '../../lib/compose';
import * as bundleTables from './migrations/20261126_0012_config_bundles';
import { bundlesOptionsSchema, type BundlesOptions } from './options';
import { bundleRoutes } from './routes';
import { BundleService } from './service';

export type { BundlesOptions } from './options';

/**
 * Configuration bundles (spec 2.9, 4.8): export a tenant's configuration, plan and import a bundle (JSON or ZIP)
 * through the registry's write path in one transaction, one import per tenant at a time, with operation reports.
 * Works for every registered kind, third-party ones included. Registers /api/config-bundles/*.
 */
export const plugin: Hapi.Plugin<BundlesOptions> = {
    name: 'hallmark-bundles',
    // The kinds it exports and imports come from these plugins; kms defines the KeyChain kind.
    dependencies: ['hallmark-core', 'hallmark-oauth2', 'hallmark-kms'],
    register(server, rawOptions) {
        const options = pluginOptions('hallmark-bundles', bundlesOptionsSchema, rawOptions);
        server.registerMigrations([{ name: '20261126_0012_config_bundles', ...bundleTables }]);
        const service = new BundleService({ db: server.db, registry: server.registry, variables: options.variables, zipLimits: options.zipLimits });
        server.route(bundleRoutes(service));
    }
};
