import type Hapi from '@hapi/hapi';
import { requirePlugins } from '../../lib/compose';
import { tenantKind } from '../../resources/tenant';

/** Tenants: the Tenant resource kind (so the startup import and bundles can create tenants). */
export const plugin: Hapi.Plugin<Record<string, never>> = {
    name: 'hallmark-tenancy',
    dependencies: ['hallmark-core'],
    register(server) {
        requirePlugins(server, 'hallmark-tenancy', ['hallmark-core']);
        server.registerResource(tenantKind);
    }
};
