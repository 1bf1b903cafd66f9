import type Hapi from '@hapi/hapi';
import { ForbiddenError } from '../../lib/errors';
import './clients';
import { callerContext } from '../../lib/auth/context';

export type ConfigUse = 'issuance' | 'presentation';

/**
 * Resource-level restriction of a client: when its allowedIssuanceConfigs / allowedPresentationConfigs list is
 * non-empty, every configuration a request uses must be on it (403 otherwise). Clients of an external provider have
 * no such lists here and are not restricted.
 */
export const assertConfigsAllowed = async (request: Hapi.Request, use: ConfigUse, configIds: string[]): Promise<void> => {
    const { clientId } = callerContext(request);
    const client = await request.server.clientCache.get(clientId);
    const allowed = use === 'issuance' ? client?.allowedIssuanceConfigs : client?.allowedPresentationConfigs;
    if (!allowed?.length) {
        return;
    }
    const refused = configIds.filter((id) => !allowed.includes(id));
    if (refused.length) {
        throw new ForbiddenError(`This client may not use the ${use} configuration${refused.length > 1 ? 's' : ''} ${refused.join(', ')}`);
    }
};
