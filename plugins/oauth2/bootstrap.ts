import type { Config } from '../../lib/config';
import type { Logger } from '../../lib/logging';
import type { Registry } from '../../lib/registry/registry';
import { clientKind } from '../../resources/client';

/**
 * The root client (AUTH_CLIENT_ID / AUTH_CLIENT_SECRET): tenant:manage, no tenant. Idempotent; a changed secret
 * replaces the stored hash, through the registry so the change is audited.
 */
export const bootstrapRootClient = async (config: Config, registry: Registry, log: Logger): Promise<void> => {
    const { clientId, clientSecret } = config.auth;
    if (!clientId || !clientSecret) {
        return;
    }
    const result = await registry.write({ clientId: 'system:bootstrap', roles: [] }, clientKind, {
        clientId,
        description: 'Root client from AUTH_CLIENT_ID',
        roles: ['tenant:manage'],
        secret: clientSecret
    });
    if (result.action !== 'unchanged') {
        log.info({ clientId, action: result.action }, 'root client bootstrapped');
    }
};
