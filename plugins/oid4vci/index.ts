import Crypto from 'node:crypto';
import type Hapi from '@hapi/hapi';
import { pluginOptions } from '../../lib/compose';
import { DpopVerifier } from '../../lib/oauth/dpop';
import { attributeProviderKind } from '../../resources/attribute-provider';
import { credentialConfigKind } from '../../resources/credential-config';
import { issuanceConfigKind } from '../../resources/issuance-config';
import { webhookEndpointKind } from '../../resources/webhook-endpoint';
import { TrustAnchors } from '../oid4vp/services/trust-anchors';
import { Issuer } from './issuer';
import { oid4vciOptionsSchema, type Oid4vciOptions } from './options';
import { attestationChallengeRoutes } from './routes/attestation-challenge';
import { managementRoutes } from './routes/management';
import { walletRoutes } from './routes/wallet';
import { ClientAttestationVerifier } from './services/client-attestation';
import { CredentialService } from './services/credentials';
import { MetadataService } from './services/metadata';
import { NotificationService } from './services/notifications';
import { OfferService } from './services/offers';
import { TokenEndpoint } from './services/tokens';

declare module '@hapi/hapi' {
    interface PluginProperties {
        'hallmark-oid4vci': {
            /** Wallet attestation (attestation-based client authentication) for the PAR and token endpoints. */
            clientAttestation: ClientAttestationVerifier;
        };
    }
}

/**
 * OpenID4VCI issuance (pre-authorized code flow). Registers: the CredentialConfig, IssuanceConfig,
 * AttributeProvider and WebhookEndpoint kinds; /api/issuer/* management routes; the wallet-facing metadata,
 * offer, token, nonce, credential, notification and deferred endpoints under /issuers/{tenant}.
 */
export const plugin: Hapi.Plugin<Oid4vciOptions> = {
    name: 'hallmark-oid4vci',
    dependencies: ['hallmark-core', 'hallmark-oauth2', 'hallmark-kms', 'hallmark-sessions'],
    register(server, rawOptions) {
        const { publicUrl, nonceSecret, multiConsumption } = pluginOptions('hallmark-oid4vci', oid4vciOptionsSchema, rawOptions);
        const { log } = server.app;
        const { registry, sessions, singleUse, signing, outbound } = server;
        for (const kind of [webhookEndpointKind, attributeProviderKind, issuanceConfigKind, credentialConfigKind]) {
            server.registerResource(kind);
        }

        const issuer = new Issuer({ registry });
        const offers = new OfferService({ publicUrl, sessionTtl: server.plugins['hallmark-sessions'].defaultTtl, issuer, sessions, registry, log });
        // DPoP nonces are derived from the service secret, so every replica accepts them.
        const dpop = new DpopVerifier(singleUse, { nonceSecret: Buffer.from(Crypto.hkdfSync('sha256', nonceSecret, 'hallmark', 'dpop-nonce/v1', 32)) });
        const tokens = new TokenEndpoint({ issuer, sessions, offers, dpop });
        const credentials = new CredentialService({ publicUrl, outbound, issuer, sessions, singleUse, signing, registry, log });
        const notifications = new NotificationService({ outbound, sessions, log });
        const metadata = new MetadataService({ publicUrl, issuer });

        const clientAttestation = new ClientAttestationVerifier({ trust: new TrustAnchors({ registry }), singleUse });
        server.expose('clientAttestation', clientAttestation);
        server.route(attestationChallengeRoutes({ issuer, clientAttestation, dpop }));

        server.route([...managementRoutes(offers), ...walletRoutes({ publicUrl, multiConsumption, issuer, sessions, metadata, tokens, credentials, notifications })]);
    }
};
