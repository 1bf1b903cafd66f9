import Crypto from 'node:crypto';
import type Hapi from '@hapi/hapi';
import { pluginOptions } from '../../lib/compose';
import { DpopVerifier } from '../../lib/oauth/dpop';
import { attributeProviderKind } from '../../resources/attribute-provider';
import { ValidationError } from '../../lib/errors';
import { credentialConfigKind, statusManaged, statusUnavailable, type CredentialConfig } from '../../resources/credential-config';
import { issuanceConfigKind } from '../../resources/issuance-config';
import { webhookEndpointKind } from '../../resources/webhook-endpoint';
import { TrustAnchors } from '../oid4vp/services/trust-anchors';
import { Issuer } from './issuer';
import { oid4vciOptionsSchema, type Oid4vciOptions } from './options';
import { attestationChallengeRoutes } from './routes/attestation-challenge';
import { managementRoutes } from './routes/management';
import { authorizationRoutes } from './routes/authorization';
import { interactiveRoutes } from './routes/interactive';
import { walletRoutes } from './routes/wallet';
import { typeMetadataRoutes } from './routes/type-metadata';
import { AuthorizationService } from './services/authorization';
import { ClientAttestationVerifier } from './services/client-attestation';
import { ClientAuthenticator } from './services/client-authentication';
import { CredentialService, type CredentialStatusProvider } from './services/credentials';
import { DEFERRED_TIDY_UP_JOB, DeferredService } from './services/deferred';
import * as deferredIssuance from './migrations/20261126_0011_deferred_issuance';
import { InteractiveAuthorizationService, type PresentationVerifier } from './services/interactive';
import { MetadataService } from './services/metadata';
import { CredentialRequestDecryption } from './services/encryption';
import { NotificationService } from './services/notifications';
import { OfferService } from './services/offers';
import { ProofVerifier } from './services/proofs';
import { TokenEndpoint } from './services/tokens';

declare module '@hapi/hapi' {
    interface PluginProperties {
        'hallmark-oid4vci': {
            /** Wallet attestation (attestation-based client authentication) for the PAR and token endpoints. */
            clientAttestation: ClientAttestationVerifier;
        };
    }
    interface Server {
        /**
         * Gives issued credentials of configurations with statusManagement their status list entries; the status
         * plugin calls it at registration. Without a provider such configurations are refused (400).
         */
        registerCredentialStatusProvider(provider: CredentialStatusProvider): void;
        /**
         * Gives the interactive authorization endpoint its openid4vp_presentation steps; the oid4vp plugin calls it at
         * registration. Without one those steps answer server_error.
         */
        registerPresentationVerifier(verifier: PresentationVerifier): void;
    }
}

/**
 * OpenID4VCI issuance (pre-authorized and authorization code flows). Registers: the CredentialConfig,
 * IssuanceConfig, AttributeProvider and WebhookEndpoint kinds; /api/issuer/* management routes; the wallet-facing
 * metadata, offer, PAR, authorization, interactive authorization, token, nonce, credential, notification and deferred endpoints under
 * /issuers/{tenant}.
 */
export const plugin: Hapi.Plugin<Oid4vciOptions> = {
    name: 'hallmark-oid4vci',
    dependencies: ['hallmark-core', 'hallmark-oauth2', 'hallmark-kms', 'hallmark-sessions'],
    register(server, rawOptions) {
        const { publicUrl, nonceSecret, multiConsumption } = pluginOptions('hallmark-oid4vci', oid4vciOptionsSchema, rawOptions);
        const { log } = server.app;
        const { registry, sessions, singleUse, signing, outbound } = server;
        server.registerMigrations([{ name: '20261126_0011_deferred_issuance', ...deferredIssuance }]);
        for (const kind of [webhookEndpointKind, attributeProviderKind, issuanceConfigKind]) {
            server.registerResource(kind);
        }
        let statusProvider: CredentialStatusProvider | undefined;
        server.decorate('server', 'registerCredentialStatusProvider', (provider: CredentialStatusProvider) => {
            if (registry.sealed) {
                throw new Error('A credential status provider must be registered before the server starts');
            }
            if (statusProvider) {
                throw new Error('A credential status provider is registered twice');
            }
            statusProvider = provider;
        });
        let presentationVerifier: PresentationVerifier | undefined;
        server.decorate('server', 'registerPresentationVerifier', (verifier: PresentationVerifier) => {
            if (registry.sealed || presentationVerifier) {
                throw new Error('A presentation verifier is registered once, before the server starts');
            }
            presentationVerifier = verifier;
        });
        // Per server: whether status management can be turned on depends on this server's plugins.
        server.registerResource({
            ...credentialConfigKind,
            async check(scope, spec: CredentialConfig) {
                if (!statusProvider && statusManaged(spec)) {
                    const details = statusUnavailable(spec);
                    throw new ValidationError(`${credentialConfigKind.file} is invalid: ${details.map((d) => d.message).join('; ')}`, details);
                }
                await credentialConfigKind.check?.(scope, spec);
            }
        });

        const issuer = new Issuer({ registry });
        // nonceSecret is the service secret (MASTER_SECRET, else ENCRYPTION_KEY): offer subjects are hashed under a key of their own.
        const subjectKey = Buffer.from(Crypto.hkdfSync('sha256', nonceSecret, 'hallmark', 'offer-subject-hash/v1', 32));
        const offers = new OfferService({ publicUrl, sessionTtl: server.plugins['hallmark-sessions'].defaultTtl, issuer, sessions, registry, log, subjectKey });
        // DPoP nonces are derived from the service secret, so every replica accepts them.
        const dpop = new DpopVerifier(singleUse, { nonceSecret: Buffer.from(Crypto.hkdfSync('sha256', nonceSecret, 'hallmark', 'dpop-nonce/v1', 32)) });
        // One cache of the tenants' trust lists for wallet attestations and key attestations.
        const trust = new TrustAnchors({ registry });
        const clientAttestation = new ClientAttestationVerifier({ trust, singleUse });
        server.expose('clientAttestation', clientAttestation);
        const clients = new ClientAuthenticator({ publicUrl, issuer, attestation: clientAttestation });
        const tokens = new TokenEndpoint({ issuer, sessions, offers, dpop, clients });
        const authorization = new AuthorizationService({ publicUrl, issuer, sessions, offers, singleUse, dpop, clients, secret: Buffer.from(nonceSecret) });
        const deferred: DeferredService = new DeferredService({ db: server.db, sessions, issuer, outbound, log, signer: (): CredentialService => credentials });
        const credentials: CredentialService = new CredentialService({ publicUrl, outbound, issuer, sessions, signing, registry, log, proofs: new ProofVerifier({ publicUrl, singleUse, trust }), statusProvider: () => statusProvider, deferred });
        const notifications = new NotificationService({ outbound, sessions, log });
        const requestDecryption = new CredentialRequestDecryption(Buffer.from(Crypto.hkdfSync('sha256', nonceSecret, 'hallmark', 'credential-request-encryption/v1', 32)));
        const metadata = new MetadataService({ publicUrl, issuer, requestDecryption, registry, signing });
        const interactive = new InteractiveAuthorizationService({ issuer, sessions, authorization, clients, presentations: () => presentationVerifier, log });

        server.registerJob({
            name: DEFERRED_TIDY_UP_JOB,
            schedule: { everySeconds: 300 },
            async run({ log: jobLog }) {
                const removed = await deferred.tidyUp();
                jobLog[removed ? 'info' : 'debug']({ removed }, 'deferred issuances of anonymized sessions removed');
            }
        });

        server.route([
            ...managementRoutes(offers, deferred),
            ...walletRoutes({ publicUrl, multiConsumption, issuer, sessions, metadata, tokens, credentials, notifications, dpop, deferred, requestDecryption }),
            ...authorizationRoutes({ publicUrl, issuer, authorization }),
            ...interactiveRoutes({ publicUrl, issuer, interactive }),
            ...attestationChallengeRoutes({ issuer, clientAttestation, dpop }),
            ...typeMetadataRoutes(metadata)
        ]);
    }
};
