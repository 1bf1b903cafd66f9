import * as X509 from '@peculiar/x509';
import Joi from 'joi';
import type { ResourceKind } from '../lib/registry/kind';
import { errorAt } from './shared/custom-rules';

/*
 * Trust list (contract "Resource bodies" → Trust list): the certificates a verifier trusts, given inline as entities
 * and/or as the URL of an ETSI TS 119 612 trusted list (XML) or a JWT list of trusted entities (ETSI TS 119 602). A
 * credential verifies when its x5c chain ends in a certificate of a pid-issuance or eaa-issuance entry. A url list
 * counts only once its signature verifies with one of signerCertificates and before its NextUpdate (plugins/trust,
 * docs/trust.md); until then, and without signer certificates, it is unavailable (trust_list_unavailable).
 */

export const TRUST_LIST_SERVICE_TYPES = ['pid-issuance', 'eaa-issuance', 'wallet-provider', 'other'] as const;
export type TrustListServiceType = (typeof TRUST_LIST_SERVICE_TYPES)[number];

export interface TrustListEntity {
    name?: string;
    serviceType: TrustListServiceType;
    /** PEM certificates, at least one. */
    certificates: string[];
}

export interface TrustList {
    id: string;
    description?: string | null;
    entities?: TrustListEntity[];
    /** http(s) URL of an ETSI TS 119 612 trusted list (XML) or a JWT list of trusted entities. */
    url?: string;
    /** PEM certificates that may sign the list at url. */
    signerCertificates?: string[];
}

/** Exactly one PEM certificate block; whitespace inside the base64 body is allowed. */
const PEM_CERTIFICATE = /^\s*-----BEGIN CERTIFICATE-----\s*[A-Za-z0-9+/=\s]+-----END CERTIFICATE-----\s*$/;

const NOT_A_CERTIFICATE = 'trustList.notCertificate';

/** A PEM certificate that @peculiar/x509 can parse; the value is kept as given. */
export const pemCertificateSchema = Joi.string().max(65536)
    .pattern(PEM_CERTIFICATE, 'PEM certificate')
    .custom((pem: string, helpers) => {
        if (!PEM_CERTIFICATE.test(pem)) {
            // Reported by the pattern.
            return pem;
        }
        try {
            new X509.X509Certificate(pem);
            return pem;
        }
        catch {
            return helpers.error(NOT_A_CERTIFICATE);
        }
    }, 'X.509 certificate')
    .messages({
        'string.pattern.name': '{{#label}} must be one PEM certificate (-----BEGIN CERTIFICATE----- … -----END CERTIFICATE-----)',
        [NOT_A_CERTIFICATE]: '{{#label}} does not hold a parsable X.509 certificate'
    })
    .description('One X.509 certificate in PEM');

export const trustListEntitySchema = Joi.object<TrustListEntity, true>({
    name: Joi.string().min(1).max(255),
    serviceType: Joi.string().valid(...TRUST_LIST_SERVICE_TYPES).required()
        .description('pid-issuance and eaa-issuance entries make credentials verify; the others only identify a chain'),
    certificates: Joi.array().items(pemCertificateSchema).min(1).required()
}).label('TrustListEntity');

const NO_SOURCE = 'trustList.noSource';
const NO_SIGNERS = 'trustList.noSigners';

/**
 * Entities or a url; a url list names the certificates that may sign it, for without them it could never be trusted
 * (refused rather than stored without effect). An object rule, so a PATCH of the url alone keeps the stored signers.
 */
const checkSources = (list: TrustList, helpers: Joi.CustomHelpers): TrustList | Joi.ErrorReport => {
    if (!list.entities?.length && !list.url) {
        return helpers.error(NO_SOURCE);
    }
    return list.url && !list.signerCertificates?.length ? errorAt(helpers, NO_SIGNERS, {}, 'signerCertificates') : list;
};

export const trustListSchema = Joi.object<TrustList, true>({
    id: Joi.string().pattern(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, 'trust list id').required()
        .description('Identifier within the tenant: letters, digits, _ . and -, up to 128 characters'),
    description: Joi.string().max(2000).allow(null),
    entities: Joi.array().items(trustListEntitySchema).description('Trusted entities and their certificates'),
    url: Joi.string().uri({ scheme: ['http', 'https'] }).max(2048)
        .description('An ETSI TS 119 612 trusted list (XML) or a JWT list of trusted entities'),
    signerCertificates: Joi.array().items(pemCertificateSchema).min(1)
        .description('Certificates that may sign the list at url (the scheme operator\'s); required with url')
}).custom(checkSources, 'entities or url, and a url\'s signers')
    .messages({ [NO_SOURCE]: '{{#label}} needs at least one entity or a url', [NO_SIGNERS]: '{{#at}} is required with url: the certificates that may sign the list' })
    .label('TrustList');

export const trustListKind: ResourceKind<TrustList> = {
    kind: 'TrustList',
    file: 'TrustListConfigFile',
    version: 1,
    schema: trustListSchema,
    dependsOn: ['Tenant'],
    outboundUrls: ['url'],
    id: (spec) => spec.id,
    location: { dir: 'trust-lists' }
};
