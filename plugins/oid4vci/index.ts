import Crypto from 'node:crypto';
import type Hapi from '@hapi/hapi';
import { pluginOptions } from '../../lib/compose';
import { DpopVerifier } from '../../lib/oauth/dpop';
import { attributeProviderKind } from '../../resources/attribute-provider';
import { credentialConfigKind } from '../../resources/credential-config';
import { issuanceConfigKind } from '../../resources/issuance-config';
import { webhookEndpointKind } from '../../resources/webhook-endpoint';
import { Issuer } from './issuer';
import { oid4vciOptionsSchema, type Oid4vciOptions } from './options';
import { managementRoutes } from './routes/management';
import { authorizationRoutes } from './routes/authorization';
import { walletRoutes } from './routes/wallet';
import { AuthorizationService } from './services/authorization';
import { ClientAuthenticator } from './services/client-authentication';
import { CredentialService } from './services/credentials';
import { MetadataService } from './services/metadata';
import { NotificationService } from './services/notifications';
import { OfferService } from './services/offers';
import { TokenEndpoint } from './services/tokens';

/**
 * OpenID4VCI issuance (pre-authorized and authorization code flows). Registers: the CredentialConfig,
 * IssuanceConfig, AttributeProvider and WebhookEndpoint kinds; /api/issuer/* management routes; the wallet-facing
 * metadata, offer, PAR, authorization, token, nonce, credential, notification and deferred endpoints under
 * /issuers/{tenant}.
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
        const clients = new ClientAuthenticator();
        const tokens = new TokenEndpoint({ issuer, sessions, offers, dpop, clients });
        const authorization = new AuthorizationService({ publicUrl, issuer, sessions, offers, singleUse, dpop, clients, secret: Buffer.from(nonceSecret) });
        const credentials = new CredentialService({ publicUrl, outbound, issuer, sessions, singleUse, signing, registry, log });
        const notifications = new NotificationService({ outbound, sessions, log });
        const metadata = new MetadataService({ publicUrl, issuer });

        server.route([
            ...managementRoutes(offers),
            ...walletRoutes({ publicUrl, multiConsumption, issuer, sessions, metadata, tokens, credentials, notifications, dpop }),
            ...authorizationRoutes({ publicUrl, issuer, authorization })
        ]);
    }
};
