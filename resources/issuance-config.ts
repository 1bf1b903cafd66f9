import Joi from 'joi';
import type { ResourceKind } from '../lib/registry/kind';
import { displayImageSchema } from './credential-config';

/** Issuer-wide display entry, published in the credential issuer metadata. */
export interface IssuerDisplay {
    locale: string;
    name: string;
    logo?: { uri: string };
}

/** Tenant-wide issuance settings (one per tenant, `issuance/issuance.json`). */
export interface IssuanceConfig {
    display?: IssuerDisplay[];
    /** Default 1. */
    batchSize?: number;
    /** Default false. */
    dPopRequired?: boolean;
    /** Default false; only false until wallet attestation is built. */
    walletAttestationRequired?: boolean;
    /** Default false: authorization code grants also answer a rotating refresh token. */
    refreshTokenEnabled?: boolean;
    /** Default 5. */
    txCodeMaxAttempts?: number;
    /** Since version 2: default lifetime of credential offers; an offer's own offerLifetimeSeconds wins. */
    offerLifetimeSeconds?: number;
}

export const issuerDisplaySchema = Joi.object<IssuerDisplay, true>({
    locale: Joi.string().min(1).max(35).required().description('BCP 47 language tag'),
    name: Joi.string().min(1).max(255).required(),
    logo: displayImageSchema
}).label('IssuerDisplay');

export const issuanceConfigSchema = Joi.object<IssuanceConfig, true>({
    display: Joi.array().items(issuerDisplaySchema).description('Issuer display entries of the credential issuer metadata'),
    batchSize: Joi.number().integer().min(1).max(100).default(1)
        .description('Credentials issued per credential request (batch issuance), 1 to 100'),
    dPopRequired: Joi.boolean().default(false).description('Require DPoP-bound access tokens'),
    walletAttestationRequired: Joi.boolean().default(false)
        .description('Require wallet attestation (attest_jwt_client_auth: a wallet provider of the tenant\'s trust lists) at PAR and at the token endpoint'),
    refreshTokenEnabled: Joi.boolean().default(false)
        .description('Answer authorization code grants with a rotating, single-use refresh token (bound to the DPoP key of the access token); a reused refresh token revokes its family'),
    txCodeMaxAttempts: Joi.number().integer().min(1).max(100).default(5)
        .description('Wrong transaction codes accepted before the pre-authorized code is locked'),
    offerLifetimeSeconds: Joi.number().integer().min(1)
        .description('Default lifetime of a credential offer in seconds; an offer can set its own')
}).label('IssuanceConfig');

export const issuanceConfigKind: ResourceKind<IssuanceConfig> = {
    kind: 'IssuanceConfig',
    file: 'IssuanceConfigFile',
    version: 2,
    schema: issuanceConfigSchema,
    // Version 2 only added the optional offerLifetimeSeconds.
    upgrades: { 1: (spec) => spec },
    dependsOn: ['Tenant'],
    singleton: true,
    id: () => 'IssuanceConfig',
    location: { file: 'issuance/issuance.json', bundleFile: 'issuance/config.json' }
};
