import Crypto from 'node:crypto';
import type Hapi from '@hapi/hapi';
import { requirePlugins } from '../../lib/compose';
import { DpopVerifier } from '../../lib/oauth/dpop';
import { attributeProviderKind } from '../../resources/attribute-provider';
import { credentialConfigKind } from '../../resources/credential-config';
import { issuanceConfigKind } from '../../resources/issuance-config';
import { webhookEndpointKind } from '../../resources/webhook-endpoint';
import { Issuer } from './issuer';
import { managementRoutes } from './routes/management';
import { walletRoutes } from './routes/wallet';
import { CredentialService } from './services/credentials';
import { MetadataService } from './services/metadata';
import { NotificationService } from './services/notifications';
import { OfferService } from './services/offers';
import { TokenEndpoint } from './services/tokens';

/**
 * OpenID4VCI issuance (pre-authorized code flow). Registers: the CredentialConfig, IssuanceConfig,
 * AttributeProvider and WebhookEndpoint kinds; /api/issuer/* management routes; the wallet-facing metadata,
 * offer, token, nonce, credential, notification and deferred endpoints under /issuers/{tenant}.
 */
export const plugin: Hapi.Plugin<Record<string, never>> = {
    name: 'hallmark-oid4vci',
    register(server) {
        requirePlugins(server, 'hallmark-oid4vci', ['hallmark-core', 'hallmark-oauth2', 'hallmark-kms', 'hallmark-sessions']);
        const { config, log } = server.app;
        const { db, registry, sessions, singleUse, signing } = server;
        for (const kind of [webhookEndpointKind, attributeProviderKind, issuanceConfigKind, credentialConfigKind]) {
            server.registerResource(kind);
        }

        const issuer = new Issuer({ db, registry });
        const offers = new OfferService({ config, issuer, sessions, registry, db, log });
        // DPoP nonces are derived from the service secret, so every replica accepts them.
        const dpop = new DpopVerifier(singleUse, { nonceSecret: Buffer.from(Crypto.hkdfSync('sha256', config.secrets.masterSecret ?? config.secrets.encryptionKey!, 'hallmark', 'dpop-nonce/v1', 32)) });
        const tokens = new TokenEndpoint({ issuer, sessions, offers, dpop });
        const credentials = new CredentialService({ config, issuer, sessions, singleUse, signing, registry, db, log });
        const notifications = new NotificationService({ config, sessions, log });
        const metadata = new MetadataService({ config, issuer });

        server.route([...managementRoutes(offers), ...walletRoutes({ config, issuer, sessions, metadata, tokens, credentials, notifications })]);
    }
};
