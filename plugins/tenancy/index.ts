import type Hapi from '@hapi/hapi';
import { tenantKind } from '../../resources/tenant';

/** Tenants: the Tenant resource kind (so the startup import and bundles can create tenants). */
export const plugin: Hapi.Plugin<Record<string, never>> = {
    name: 'hallmark-tenancy',
    dependencies: ['hallmark-core'],
    register(server) {
        server.registerResource(tenantKind);
    }
};
