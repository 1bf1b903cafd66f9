import type { TrustServiceType } from '../../../lib/verify/trust';

/**
 * Service type identifiers of published lists, mapped to the service types of Hallmark's trust policy. ETSI TS 119
 * 612 trusted lists and ETSI TS 119 602 lists of trusted entities (LoTE) name their services by URI; the EUDI lists
 * of PID providers, wallet providers and public-sector EAA providers use the 119 602 URIs, trusted lists of the large
 * scale pilots the 119 612 (and pilot) URIs below. A service whose type is not here becomes `other`: its
 * certificates still identify a chain (trust_chain_not_trusted rather than no_trust_chain_to_root), but never make a
 * credential or attestation trusted. Revocation services are `other` for the same reason: they sign status, not
 * credentials.
 */
const SERVICE_TYPES: Readonly<Record<string, TrustServiceType>> = {
    // ETSI TS 119 602 (EUDI lists of trusted entities)
    'http://uri.etsi.org/19602/SvcType/PID/Issuance': 'pid-issuance',
    'http://uri.etsi.org/19602/SvcType/PubEAA/Issuance': 'eaa-issuance',
    'http://uri.etsi.org/19602/SvcType/EAA/Issuance': 'eaa-issuance',
    'http://uri.etsi.org/19602/SvcType/WalletSolution/Issuance': 'wallet-provider',
    // ETSI TS 119 612 v2.3+ (qualified and non-qualified EAA services)
    'http://uri.etsi.org/TrstSvc/Svctype/EAA/Q': 'eaa-issuance',
    'http://uri.etsi.org/TrstSvc/Svctype/EAA': 'eaa-issuance',
    'http://uri.etsi.org/TrstSvc/Svctype/EAA/Pub-EAA': 'eaa-issuance',
    // Trusted lists of the EUDI large scale pilots (EWC) that extend TS 119 612 with PID and wallet providers
    'https://ewc-consortium.github.io/ewc-trust-list/TrstSvc/Svctype/PID': 'pid-issuance',
    'https://ewc-consortium.github.io/ewc-trust-list/TrstSvc/Svctype/LPID': 'pid-issuance',
    'https://ewc-consortium.github.io/ewc-trust-list/TrstSvc/Svctype/NPWP': 'wallet-provider',
    'https://ewc-consortium.github.io/ewc-trust-list/TrstSvc/Svctype/LPWP': 'wallet-provider'
};

export const serviceTypeOf = (identifier: string | undefined): TrustServiceType =>
    (identifier ? SERVICE_TYPES[identifier.trim()] : undefined) ?? 'other';

/**
 * Service statuses under which a service's certificates count (TS 119 612 5.5.4 and the historical national
 * statuses); withdrawn, deprecated, revoked or unknown statuses take the service out. A LoTE service without a
 * status is in force: TS 119 602 lets a scheme leave the status to its StatusDeterminationApproach.
 */
const IN_FORCE = ['granted', 'recognisedatnationallevel', 'undersupervision', 'accredited', 'supervisionincessation', 'setbynationallaw'];

export const statusInForce = (status: string | undefined): boolean => {
    if (status === undefined) {
        return true;
    }
    const last = status.trim().replace(/\/+$/, '').split('/').pop()?.toLowerCase();
    return !!last && IN_FORCE.includes(last);
};

/** Base64 DER (whitespace allowed) → PEM; undefined when it is not base64. */
export const derBase64ToPem = (value: string): string | undefined => {
    const compact = value.replace(/\s+/g, '');
    if (!compact || !/^[A-Za-z0-9+/]+={0,2}$/.test(compact)) {
        return undefined;
    }
    return `-----BEGIN CERTIFICATE-----\n${compact.replace(/(.{64})/g, '$1\n').replace(/\n$/, '')}\n-----END CERTIFICATE-----`;
};
