import type Hapi from '@hapi/hapi';
import { requirePlugins } from '../../lib/compose';
import { presentationConfigKind } from '../../resources/presentation-config';
import { trustListKind } from '../../resources/trust-list';
import { managementRoutes } from './routes/management';
import { walletRoutes } from './routes/wallet';
import { PresentationRequests } from './services/requests';
import { PresentationResponses } from './services/responses';
import { TrustAnchors } from './services/trust-anchors';

/**
 * OpenID4VP verification with DCQL. Registers: the PresentationConfig and TrustList kinds; /api/verifier/config,
 * /api/trust-lists and /api/verifier/offer; the wallet-facing request object and response endpoints under
 * /presentations/{walletNonce}.
 */
export const plugin: Hapi.Plugin<Record<string, never>> = {
    name: 'hallmark-oid4vp',
    register(server) {
        requirePlugins(server, 'hallmark-oid4vp', ['hallmark-core', 'hallmark-oauth2', 'hallmark-kms', 'hallmark-sessions']);
        const { config, log } = server.app;
        const { registry, sessions, signing } = server;
        server.registerResource(trustListKind);
        server.registerResource(presentationConfigKind);
        const requests = new PresentationRequests({ config, registry, sessions, signing, log });
        const responses = new PresentationResponses({ config, sessions, trust: new TrustAnchors({ registry }), log });
        server.route([...managementRoutes(requests), ...walletRoutes({ sessions, requests, responses })]);
    }
};
