import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { NotFoundError } from '../../../lib/errors';
import type { DpopVerifier } from '../../../lib/oauth/dpop';
import { tenantIdSchema } from '../../../resources/tenant';
import type { Issuer } from '../issuer';
import type { ClientAttestationVerifier } from '../services/client-attestation';

export interface AttestationChallengeRouteDeps {
    issuer: Issuer;
    clientAttestation: ClientAttestationVerifier;
    dpop: DpopVerifier;
}

const challengeResponse = Joi.object({
    attestation_challenge: Joi.string().required().description('A single-use challenge for the next OAuth-Client-Attestation-PoP')
}).label('AttestationChallenge');

/**
 * The challenge endpoint of attestation-based client authentication (draft section 6.3): a fresh, single-use
 * `attestation_challenge` for the wallet's next client attestation PoP, uncacheable. The DPoP server nonce rides along
 * in `DPoP-Nonce`, as the draft asks of servers that issue DPoP nonces, so a wallet gets both in one round trip.
 */
export const attestationChallengeRoutes = (deps: AttestationChallengeRouteDeps): ServerRoute[] => [
    {
        method: 'POST',
        path: '/issuers/{tenant}/authorize/challenge',
        options: {
            auth: false,
            app: { protocol: true },
            // Wallet-facing: not in the management API description (no `api` tag).
            tags: ['issuance', 'wallet'],
            description: 'A single-use challenge for wallet attestation PoPs (OAuth attestation-based client authentication)',
            // The request has no body; whatever a client sends is ignored rather than refused.
            payload: { failAction: 'ignore' },
            validate: { params: Joi.object({ tenant: tenantIdSchema.required() }) },
            response: { status: { 200: challengeResponse } }
        },
        handler: async (request, h) => {
            const tenantId = request.params.tenant as string;
            if (!(await deps.issuer.tenant(tenantId))) {
                throw new NotFoundError('Unknown issuer');
            }
            return h.response({ attestation_challenge: await deps.clientAttestation.challenge(tenantId) })
                .header('Cache-Control', 'no-store')
                .header('Pragma', 'no-cache')
                .header('DPoP-Nonce', deps.dpop.nonce());
        }
    }
];
