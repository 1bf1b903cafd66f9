import type Hapi from '@hapi/hapi';
import { pluginOptions } from '../../lib/compose';
import { presentationConfigKind } from '../../resources/presentation-config';
import { trustListKind } from '../../resources/trust-list';
import { oid4vpOptionsSchema, type Oid4vpOptions } from './options';
import { managementRoutes } from './routes/management';
import { walletRoutes } from './routes/wallet';
import { PresentationRequests } from './services/requests';
import { PresentationResponses } from './services/responses';
import { TrustAnchors } from './services/trust-anchors';
import { InteractivePresentationVerifier } from './services/interactive-verifier';
import { StatusListChecker } from '../../lib/verify/status-list';

/**
 * OpenID4VP verification with DCQL. Registers: the PresentationConfig and TrustList kinds; /api/verifier/config,
 * /api/trust-lists and /api/verifier/offer; the wallet-facing request object and response endpoints under
 * /presentations/{walletNonce}.
 */
export const plugin: Hapi.Plugin<Oid4vpOptions> = {
    name: 'hallmark-oid4vp',
    dependencies: ['hallmark-core', 'hallmark-oauth2', 'hallmark-kms', 'hallmark-sessions', 'hallmark-oid4vci'],
    register(server, rawOptions) {
        const { publicUrl } = pluginOptions('hallmark-oid4vp', oid4vpOptionsSchema, rawOptions);
        const { log } = server.app;
        const { registry, sessions, signing, outbound } = server;
        server.registerResource(trustListKind);
        server.registerResource(presentationConfigKind);
        const requests = new PresentationRequests({ publicUrl, outbound, registry, sessions, signing, log });
        const responses = new PresentationResponses({ outbound, sessions, trust: new TrustAnchors({ registry }), status: new StatusListChecker({ outbound }), log });
        server.registerPresentationVerifier(new InteractivePresentationVerifier({ registry, sessions, requests, responses }));
        server.route([...managementRoutes(requests), ...walletRoutes({ sessions, requests, responses })]);
    }
};
