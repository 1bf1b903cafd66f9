/** The console's pages, one module per concern; main.ts routes to them. */
export { auditPage } from './audit';
export { bundlesPage } from './bundles';
export type { PageContext } from './common';
export { keysPage } from './keys';
export { KIND_PAGES, kindPage } from './kinds';
export { offersPage } from './offers';
export { sessionsPage } from './sessions';
export { statusPage } from './status';
export { tenantsPage } from './tenants';
