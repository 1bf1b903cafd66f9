import { ChangeCache } from '../../lib/cache';
import type { Database } from '../../lib/db/database';
import { ClientModel } from './models/client';
import type { Registry } from '../../lib/registry/registry';
import { clientKind } from '../../resources/client';
import { tenantKind } from '../../resources/tenant';

/** What requests check of their client on every call: tenant and roles (tokens), allowed configurations. */
export type ClientState = Pick<ClientModel, 'tenantId' | 'roles' | 'allowedIssuanceConfigs' | 'allowedPresentationConfigs'>;

/** The clients of this service's own OAuth2 server by id; undefined for an unknown (or external) client. */
export type ClientCache = ChangeCache<[clientId: string], ClientState | undefined>;

declare module '@hapi/hapi' {
    interface Server {
        /** Decorated by hallmark-oauth2. */
        clientCache: ClientCache;
    }
}

/** Other replicas' client changes apply within this; this process's own at once. */
const CACHE_TTL_MS = 5_000;

/**
 * Clients as they are now, read at most every few seconds per process (tokens and offers are frequent; clients
 * change rarely). A client's change drops its entry; a tenant's change drops all (a deleted tenant takes its
 * clients along without a change of each).
 */
export const clientCache = (db: Database, registry: Registry): ClientCache =>
    new ChangeCache({
        ttlMs: CACHE_TTL_MS,
        load: (clientId: string) => db.model(ClientModel).query().findById(clientId)
            .select('tenantId', 'roles', 'allowedIssuanceConfigs', 'allowedPresentationConfigs')
            .then((row): ClientState | undefined => row ?? undefined)
    })
        .dropOnChange(registry, [clientKind], (change) => [change.id])
        .dropOnChange(registry, [tenantKind], () => 'all');
