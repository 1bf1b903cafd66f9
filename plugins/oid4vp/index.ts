import type Hapi from '@hapi/hapi';
import { pluginOptions } from '../../lib/compose';
import { presentationConfigKind } from '../../resources/presentation-config';
import { trustListKind } from '../../resources/trust-list';
import { oid4vpOptionsSchema, type Oid4vpOptions } from './options';
import { managementRoutes } from './routes/management';
import { walletRoutes } from './routes/wallet';
import { PresentationRequests, type PresentationResponseType } from './services/requests';
import { PresentationResponses } from './services/responses';
import { TrustAnchors } from './services/trust-anchors';
import { InteractivePresentationVerifier } from './services/interactive-verifier';
import { StatusListChecker } from '../../lib/verify/status-list';

declare module '@hapi/hapi' {
    interface Server {
        /**
         * Adds a `response_type` of POST /api/verifier/offer that another plugin provides (the iso18013 plugin:
         * `iso-18013-7`); without it that response_type answers 400.
         */
        registerPresentationResponseType(type: 'iso-18013-7', handler: PresentationResponseType): void;
        /** The presentation services response types build on: sessions of prepared requests, verification, outcomes. */
        readonly presentations: { requests: PresentationRequests; responses: PresentationResponses };
    }
}

/**
 * OpenID4VP verification with DCQL. Registers: the PresentationConfig and TrustList kinds; /api/verifier/config,
 * /api/trust-lists and /api/verifier/offer (response types uri and dc-api, and those registered through
 * registerPresentationResponseType); the wallet-facing request object and response endpoints under
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
        server.decorate('server', 'presentations', { requests, responses });
        server.decorate('server', 'registerPresentationResponseType', (type: 'iso-18013-7', handler: PresentationResponseType) => {
            if (registry.sealed) {
                throw new Error('A presentation response type must be registered before the server starts');
            }
            requests.registerResponseType(type, handler);
        });
        server.registerPresentationVerifier(new InteractivePresentationVerifier({ registry, sessions, requests, responses }));
        server.route([...managementRoutes(requests), ...walletRoutes({ sessions, requests, responses })]);
    }
};
