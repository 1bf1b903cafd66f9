import type Hapi from '@hapi/hapi';
import { ClientModel } from '../db/models/client';
import { ForbiddenError } from '../errors';
import { callerContext } from './context';
import { clientKind } from '../../resources/client';

export type ConfigUse = 'issuance' | 'presentation';

/**
 * Resource-level restriction of a client: when its allowedIssuanceConfigs / allowedPresentationConfigs list is
 * non-empty, every configuration a request uses must be on it (403 otherwise). Clients of an external provider have
 * no such lists here and are not restricted.
 */
const CACHE_TTL_MS = 5_000;
const cache = new WeakMap<object, Map<string, { at: number; client: Promise<Pick<ClientModel, 'allowedIssuanceConfigs' | 'allowedPresentationConfigs'> | undefined> }>>();

/**
 * The allowed lists of a client, read at most every few seconds per process (offers are frequent; clients change
 * rarely). A change through this process applies at once (registry change listener); another replica's within
 * CACHE_TTL_MS.
 */
const allowedLists = (request: Hapi.Request, clientId: string) => {
    const { registry, db } = request.server;
    let perServer = cache.get(db);
    if (!perServer) {
        const fresh = new Map();
        perServer = fresh;
        cache.set(db, fresh);
        registry.onChange(clientKind, (_tenant, id) => fresh.delete(id));
    }
    const hit = perServer.get(clientId);
    if (hit && Date.now() - hit.at < CACHE_TTL_MS) {
        return hit.client;
    }
    const client = db.model(ClientModel).query().findById(clientId).select('allowedIssuanceConfigs', 'allowedPresentationConfigs')
        .then((row) => row ?? undefined);
    perServer.set(clientId, { at: Date.now(), client });
    return client;
};

export const assertConfigsAllowed = async (request: Hapi.Request, use: ConfigUse, configIds: string[]): Promise<void> => {
    const { clientId } = callerContext(request);
    const client = await allowedLists(request, clientId);
    const allowed = use === 'issuance' ? client?.allowedIssuanceConfigs : client?.allowedPresentationConfigs;
    if (!allowed?.length) {
        return;
    }
    const refused = configIds.filter((id) => !allowed.includes(id));
    if (refused.length) {
        throw new ForbiddenError(`This client may not use the ${use} configuration${refused.length > 1 ? 's' : ''} ${refused.join(', ')}`);
    }
};
