import Joi from 'joi';
import { errorAt, errorsArray, reportAll } from '../shared/custom-rules';
import { publicJwkOnly } from '../shared/public-jwk';
import { versionTarget } from '../../lib/registry/schema-url';

/* The DCQL query of a presentation configuration (OpenID4VP 1.0 section 6, spec 2.1.1). */

export const DCQL_FORMATS = ['mso_mdoc', 'dc+sd-jwt'] as const;
export type DcqlFormat = (typeof DCQL_FORMATS)[number];

/**
 * etsi_tl and openid_federation as spec 2.1.1 defines them; aki in addition, because HAIP 1.0 requires verifiers and
 * wallets to support it (values: base64url-encoded KeyIdentifiers of the Authority Key Identifier extension).
 */
export const TRUSTED_AUTHORITY_TYPES = ['aki', 'etsi_tl', 'openid_federation'] as const;
export type TrustedAuthorityType = (typeof TRUSTED_AUTHORITY_TYPES)[number];

/** A claim path: a string names an object member, an integer (>= 0) an array element, null every element. */
export type DcqlClaimPath = Array<string | number | null>;

/** A value a disclosed claim must equal, in type and value. */
export type DcqlClaimValue = string | number | boolean;

export interface DcqlClaimQuery {
    /** Unique within the credential query; what claim_sets refer to. */
    id?: string;
    path: DcqlClaimPath;
    /** Non-empty; strings, integers and booleans. */
    values?: DcqlClaimValue[];
}

/** mso_mdoc claims may also say whether the verifier intends to keep the value (ISO 18013-5 IntentToRetain). */
export interface DcqlMdocClaimQuery extends DcqlClaimQuery {
    intent_to_retain?: boolean;
}

/** One trust anchor of an etsi_tl authority: a tenant trust list, a list URL, or a direct verifier key or certificate. */
export interface EtsiTlAnchor {
    trustListId?: string;
    url?: string;
    /** A public JWK. */
    verifierKey?: Record<string, unknown>;
    /** A certificate, DER in base64. */
    verifierX509Der?: string;
}

export interface EtsiTlTrustedAuthority {
    type: 'etsi_tl';
    values: EtsiTlAnchor[];
}

export interface OpenidFederationTrustedAuthority {
    type: 'openid_federation';
    /** Entity identifiers of trust anchors. */
    values: string[];
}

/** HAIP: base64url-encoded Authority Key Identifier KeyIdentifiers. */
export interface AkiTrustedAuthority {
    type: 'aki';
    values: string[];
}

export type TrustedAuthority = EtsiTlTrustedAuthority | OpenidFederationTrustedAuthority | AkiTrustedAuthority;

interface DcqlCredentialQueryBase {
    /** Letters, digits, _ and -; unique in the query. */
    id: string;
    multiple?: boolean;
    /** Each entry lists claim ids of this credential query. */
    claim_sets?: string[][];
    trusted_authorities?: TrustedAuthority[];
}

export interface DcqlMdocMeta {
    doctype_value: string;
}

export interface DcqlSdJwtMeta {
    vct_values: string[];
}

export interface DcqlMdocCredentialQuery extends DcqlCredentialQueryBase {
    format: 'mso_mdoc';
    meta: DcqlMdocMeta;
    claims?: DcqlMdocClaimQuery[];
}

export interface DcqlSdJwtCredentialQuery extends DcqlCredentialQueryBase {
    format: 'dc+sd-jwt';
    meta: DcqlSdJwtMeta;
    claims?: DcqlClaimQuery[];
}

export type DcqlCredentialQuery = DcqlMdocCredentialQuery | DcqlSdJwtCredentialQuery;

export interface DcqlCredentialSet {
    /** Alternatives, each a combination of credential query ids. */
    options: string[][];
    /** Default true. */
    required?: boolean;
}

export interface DcqlQuery {
    credentials: DcqlCredentialQuery[];
    credential_sets?: DcqlCredentialSet[];
}

const DCQL_ID = /^[A-Za-z0-9_-]+$/;

const claimPathSchema = Joi.array().items(Joi.string(), Joi.number().integer().min(0), Joi.valid(null)).min(1)
    .description('Path in the credential: a string names a member, an integer an array element, null every element');

// Strict: a value must equal the disclosed one in type too, so "18" never becomes 18.
const claimValuesSchema = Joi.array().items(Joi.string().allow('').strict(), Joi.number().integer().strict(), Joi.boolean().strict()).min(1)
    .messages({ 'array.includes': '{{#label}} must be a string, an integer or a boolean' })
    .description('Accepted values: strings, integers, booleans; at least one')
    // Before PresentationConfigFile version 3, values were strings only and could be empty (spec 9).
    .alter(Object.fromEntries([1, 2].map((v) => [versionTarget('PresentationConfigFile', v), () => Joi.array().items(Joi.string().allow('')).description('Accepted values: strings')])));

const claimQueryKeys = {
    id: Joi.string().min(1).max(255).description('Unique within the credential query'),
    path: claimPathSchema.required(),
    values: claimValuesSchema
};

const sdJwtClaimQuerySchema = Joi.object<DcqlClaimQuery, true>(claimQueryKeys).label('DcqlClaimQuery');
const mdocClaimQuerySchema = Joi.object<DcqlMdocClaimQuery, true>({
    ...claimQueryKeys,
    intent_to_retain: Joi.boolean().description('mso_mdoc only: the verifier intends to retain the value')
}).label('DcqlMdocClaimQuery');

const verifierKeySchema = publicJwkOnly('VerifierKey');

const etsiTlAnchorSchema = Joi.object<EtsiTlAnchor, true>({
    trustListId: Joi.string().max(255).description('A trust list of the tenant'),
    url: Joi.string().max(2048).description('URL of a trusted list'),
    verifierKey: verifierKeySchema.description('A public JWK'),
    verifierX509Der: Joi.string().base64({ paddingRequired: false }).description('A certificate, DER in base64')
}).min(1).messages({ 'object.min': '{{#label}} must name a trustListId, url, verifierKey or verifierX509Der' });

export const trustedAuthoritySchema = Joi.alternatives().conditional('.type', {
    switch: [
        {
            is: 'etsi_tl',
            then: Joi.object<EtsiTlTrustedAuthority, true>({
                type: Joi.string().valid('etsi_tl').required(),
                values: Joi.array().items(etsiTlAnchorSchema).min(1).required()
            }).label('EtsiTlTrustedAuthority')
        },
        {
            is: 'openid_federation',
            then: Joi.object<OpenidFederationTrustedAuthority, true>({
                type: Joi.string().valid('openid_federation').required(),
                values: Joi.array().items(Joi.string().min(1).max(2048)).min(1).required().description('Entity identifiers')
            }).label('OpenidFederationTrustedAuthority')
        },
        {
            is: 'aki',
            then: Joi.object<AkiTrustedAuthority, true>({
                type: Joi.string().valid('aki').required(),
                values: Joi.array().items(Joi.string().base64({ urlSafe: true, paddingRequired: false })
                    .messages({ 'string.base64': '{{#label}} must be base64url' })).min(1).required()
                    .description('base64url-encoded Authority Key Identifier KeyIdentifiers (HAIP)')
            }).label('AkiTrustedAuthority')
        }
    ],
    // Names the known types instead of a bare "does not match any of the allowed types".
    otherwise: Joi.object({ type: Joi.string().valid(...TRUSTED_AUTHORITY_TYPES).required() }).unknown(true)
}).label('TrustedAuthority');

const CLAIM_ID_DUPLICATE = 'dcql.claimIdDuplicate';
const CLAIM_SET_UNKNOWN = 'dcql.claimSetUnknownId';

/** Claim ids are unique in a credential query, and claim_sets name only those ids. */
const checkClaimReferences = (query: DcqlCredentialQuery, helpers: Joi.CustomHelpers): DcqlCredentialQuery | Joi.ErrorReport => {
    const errors = errorsArray(helpers);
    const ids = new Map<string, number>();
    (query.claims ?? []).forEach((claim: DcqlClaimQuery, i) => {
        if (claim.id === undefined) {
            return;
        }
        const first = ids.get(claim.id);
        if (first === undefined) {
            ids.set(claim.id, i);
        }
        else {
            errors.push(errorAt(helpers, CLAIM_ID_DUPLICATE, { dupePos: first }, 'claims', i, 'id'));
        }
    });
    (query.claim_sets ?? []).forEach((set, i) => set.forEach((id, j) => {
        if (!ids.has(id)) {
            errors.push(errorAt(helpers, CLAIM_SET_UNKNOWN, { id }, 'claim_sets', i, j));
        }
    }));
    return reportAll(query, errors);
};

const credentialQueryMessages = {
    [CLAIM_ID_DUPLICATE]: '{{#at}} repeats the id of claims[{{#dupePos}}]',
    [CLAIM_SET_UNKNOWN]: '{{#at}} names no claim id of this credential query'
};

const credentialQueryKeys = {
    id: Joi.string().pattern(DCQL_ID).required()
        .messages({ 'string.pattern.base': '{{#label}} must contain only letters, digits, _ and -' })
        .description('Letters, digits, _ and -; unique in the query'),
    multiple: Joi.boolean().description('Allow several matching credentials'),
    claim_sets: Joi.array().items(Joi.array().items(Joi.string()).min(1)).min(1)
        .description('Alternative combinations of claim ids of this credential query'),
    trusted_authorities: Joi.array().items(trustedAuthoritySchema).min(1)
};

const mdocCredentialQuerySchema = Joi.object<DcqlMdocCredentialQuery, true>({
    ...credentialQueryKeys,
    format: Joi.string().valid('mso_mdoc').required(),
    meta: Joi.object<DcqlMdocMeta, true>({
        doctype_value: Joi.string().min(1).max(255).required().description('mDoc document type, e.g. org.iso.18013.5.1.mDL')
    }).required(),
    claims: Joi.array().items(mdocClaimQuerySchema).min(1)
}).custom(checkClaimReferences, 'claim ids').messages(credentialQueryMessages).label('DcqlMdocCredentialQuery');

const sdJwtCredentialQuerySchema = Joi.object<DcqlSdJwtCredentialQuery, true>({
    ...credentialQueryKeys,
    format: Joi.string().valid('dc+sd-jwt').required(),
    meta: Joi.object<DcqlSdJwtMeta, true>({
        vct_values: Joi.array().items(Joi.string().min(1).max(2048)).min(1).required().description('Accepted vct values, at least one')
    }).required(),
    claims: Joi.array().items(sdJwtClaimQuerySchema).min(1)
}).custom(checkClaimReferences, 'claim ids').messages(credentialQueryMessages).label('DcqlSdJwtCredentialQuery');

export const dcqlCredentialQuerySchema = Joi.alternatives().conditional('.format', {
    switch: [
        { is: 'mso_mdoc', then: mdocCredentialQuerySchema },
        { is: 'dc+sd-jwt', then: sdJwtCredentialQuerySchema }
    ],
    otherwise: Joi.object({ format: Joi.string().valid(...DCQL_FORMATS).required() }).unknown(true)
}).label('DcqlCredentialQuery');

const QUERY_ID_DUPLICATE = 'dcql.queryIdDuplicate';
const CREDENTIAL_SET_UNKNOWN = 'dcql.credentialSetUnknownId';

const uniqueQueryIds = (queries: DcqlCredentialQuery[], helpers: Joi.CustomHelpers): DcqlCredentialQuery[] | Joi.ErrorReport => {
    const errors = errorsArray(helpers);
    const seen = new Map<string, number>();
    queries.forEach((query, i) => {
        const first = seen.get(query.id);
        if (first === undefined) {
            seen.set(query.id, i);
        }
        else {
            errors.push(errorAt(helpers, QUERY_ID_DUPLICATE, { dupePos: first }, i, 'id'));
        }
    });
    return reportAll(queries, errors);
};

const checkCredentialSets = (query: DcqlQuery, helpers: Joi.CustomHelpers): DcqlQuery | Joi.ErrorReport => {
    const errors = errorsArray(helpers);
    const ids = new Set(query.credentials.map((c) => c.id));
    (query.credential_sets ?? []).forEach((set, i) => set.options.forEach((option, j) => option.forEach((id, k) => {
        if (!ids.has(id)) {
            errors.push(errorAt(helpers, CREDENTIAL_SET_UNKNOWN, { id }, 'credential_sets', i, 'options', j, k));
        }
    })));
    return reportAll(query, errors);
};

export const dcqlQuerySchema = Joi.object<DcqlQuery, true>({
    credentials: Joi.array().items(dcqlCredentialQuerySchema).min(1).required()
        .custom(uniqueQueryIds, 'unique credential query ids')
        .messages({ [QUERY_ID_DUPLICATE]: '{{#at}} repeats the id of credentials[{{#dupePos}}]' })
        .description('Credential queries, at least one'),
    credential_sets: Joi.array().items(Joi.object<DcqlCredentialSet, true>({
        options: Joi.array().items(Joi.array().items(Joi.string()).min(1)).min(1).required()
            .description('Alternative combinations of credential query ids'),
        required: Joi.boolean().default(true)
    }).label('DcqlCredentialSet')).min(1)
}).custom(checkCredentialSets, 'credential set ids')
    .messages({ [CREDENTIAL_SET_UNKNOWN]: '{{#at}} names no credential query' })
    .description('DCQL query (OpenID4VP 1.0 section 6); <TENANT_URL> anywhere in it is replaced by the tenant base URL');
