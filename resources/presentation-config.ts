import Joi from 'joi';
import { ValidationError, type ErrorDetail } from '../lib/errors';
import type { ResourceKind, StoreScope, Upgrade } from '../lib/registry/kind';
import type { JsonValue } from './credential-config';
import { keyChainKind } from './key-chain';
import { publicJwkOnly } from './shared/public-jwk';

/*
 * Presentation configuration (spec 2.1, 2.1.1, 7.4, 9): what a verifier asks a wallet for, as a DCQL query
 * (OpenID4VP 1.0 section 6), plus transaction data, registration certificate settings and request defaults.
 */

export const DCQL_FORMATS = ['mso_mdoc', 'dc+sd-jwt'] as const;
export type DcqlFormat = (typeof DCQL_FORMATS)[number];

/**
 * etsi_tl and openid_federation as spec 2.1.1 defines them; aki in addition, because HAIP 1.0 requires verifiers and
 * wallets to support it (values: base64url-encoded KeyIdentifiers of the Authority Key Identifier extension).
 */
export const TRUSTED_AUTHORITY_TYPES = ['aki', 'etsi_tl', 'openid_federation'] as const;
export type TrustedAuthorityType = (typeof TRUSTED_AUTHORITY_TYPES)[number];

export const STATUS_CHECK_MODES = ['strict', 'best_effort', 'disabled'] as const;
export type StatusCheckMode = (typeof STATUS_CHECK_MODES)[number];

/** Replaced at request time by the tenant base URL `{PUBLIC_URL}/issuers/{tenant}`; stored as text. */
export const TENANT_URL_PLACEHOLDER = '<TENANT_URL>';

/** Fields shown in answers only; rejected in request bodies and documents. */
export const PRESENTATION_CONFIG_READ_ONLY_FIELDS = ['createdAt', 'updatedAt', 'registrationCertCache'] as const;

/** Flat form fields converted into registration_cert when it is absent; never stored. */
export const REGISTRATION_CERT_FLAT_FIELDS = [
    'registrationCertImportJwt',
    'registrationCertImportId',
    'registrationCertBodyPrivacyPolicy',
    'registrationCertBodySupportUri',
    'registrationCertBodyIntermediary',
    'registrationCertBodyPurpose'
] as const;

// ---------------------------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------------------------

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

export interface TransactionData {
    type: string;
    /** Credential query ids the entry applies to. */
    credential_ids: string[];
    /** Required for TS12 (urn:eudi:sca:) types, and then validated against the type's payload schema. */
    payload?: JsonValue;
    /**
     * Hash algorithms the wallet may use for transaction_data_hashes (OpenID4VP); TS12 v1.0 section 4.2 lists it as
     * REQUIRED for SCA transaction data, so a configuration can carry it.
     */
    transaction_data_hashes_alg?: string[];
}

export interface RegistrationCertPurpose {
    lang: string;
    content: string;
}

export interface RegistrationCertBody {
    privacy_policy?: string;
    support_uri?: string;
    intermediary?: string;
    purpose?: RegistrationCertPurpose[];
    /** Inner fields not fixed by the contract. */
    credentials?: Array<Record<string, unknown>>;
    /** Credential type identifiers (v2 and later; v1 called it provided_attestations). */
    provides_attestations?: string[];
}

/** How the registration certificate is obtained: an imported JWT, a registrar-side id, or a body to register. */
export interface RegistrationCert {
    id?: string;
    jwt?: string;
    body?: RegistrationCertBody;
}

export interface Attachment {
    format: string;
    data: JsonValue;
    credential_ids?: string[];
}

/** A presentation configuration (spec 2.1): the stored, validated form. */
export interface PresentationConfig {
    id: string;
    description?: string | null;
    /** Seconds; default 300. */
    lifeTime?: number;
    /** Seconds; default 60. */
    skewSeconds?: number;
    statusCheckMode?: StatusCheckMode;
    /** May contain <TENANT_URL>, replaced at request time (see withTenantUrl). */
    dcql_query: DcqlQuery;
    transaction_data?: TransactionData[] | null;
    registration_cert?: RegistrationCert | null;
    webhookEndpointId?: string | null;
    attached?: Attachment[] | null;
    /** {sessionId} is replaced by the session id. */
    redirectUri?: string | null;
    accessKeyChainId?: string | null;
    /** Default false. ISO 18013-7 only. */
    readerAuth?: boolean | null;
}

export interface RegistrationCertFlatPurpose {
    lang?: string;
    content?: string;
}

/** Flat form fields for registration_cert: accepted in input, converted when registration_cert is absent, never kept. */
export interface RegistrationCertFlatFields {
    registrationCertImportJwt?: string | null;
    registrationCertImportId?: string | null;
    registrationCertBodyPrivacyPolicy?: string | null;
    registrationCertBodySupportUri?: string | null;
    registrationCertBodyIntermediary?: string | null;
    registrationCertBodyPurpose?: RegistrationCertFlatPurpose[] | null;
}

/** Answer-only fields, named in the input type so that the schema can reject them with a clear message. */
export interface PresentationConfigReadOnlyFields {
    createdAt?: string;
    updatedAt?: string;
    registrationCertCache?: Record<string, unknown>;
}

/** What a request body or document may hold before validation turns it into a PresentationConfig. */
export interface PresentationConfigInput extends PresentationConfig, RegistrationCertFlatFields, PresentationConfigReadOnlyFields {}

// ---------------------------------------------------------------------------------------------------------------
// TS12 transaction data
// ---------------------------------------------------------------------------------------------------------------

/*
 * TS12 "Specification of Strong Customer Authentication (SCA) Implementation with the Wallet", version 1.0
 * (2025-12-05), section 4.2 "Transactional Data Object" and 4.3 "Payload Object", and its JSON Schemas (as of
 * v1.0.1) docs/technical-specifications/api/ts12-urn-eudi-sca-<type>-1-data-model.json in
 * https://github.com/eu-digital-identity-wallet/eudi-doc-standards-and-technical-specifications
 * (docs/technical-specifications/ts12-electronic-payments-SCA-implementation-with-wallet.md). Drafts up to v0.98
 * defined other types (urn:eudi:sca:payment_authentication:1 with amount {value, currency}); v1.0 replaced them.
 *
 * Supported: the four basic types of v1.0, which every wallet must support:
 *   urn:eudi:sca:payment:1                 (4.3.1 Payment Confirmation)
 *   urn:eudi:sca:login_risk_transaction:1  (4.3.2 Login and Risk-based Authentication)
 *   urn:eudi:sca:account_access:1          (4.3.3 Payment Account Information Access)
 *   urn:eudi:sca:emandate:1                (4.3.4 E-mandate)
 * Required fields, string lengths, the currency pattern, the frequency codes and additionalProperties: false follow
 * the v1.0 JSON Schemas. Two rules from the prose that the JSON Schemas leave out are enforced too: execution_date
 * must not be present with recurrence, and an e-mandate needs purpose unless it carries payment_payload (the prose
 * says "payment", the field is payment_payload). Dates are ISO 8601 dates or date-times (the prose says ISO 8601;
 * the schemas' format is an annotation only); "execution_date must not lie in the past" is a request-time matter and
 * is not checked in a stored configuration. The draft types are not supported. Payloads are validated without type conversion, so they are stored exactly as given (they are
 * hashed by the wallet).
 */

const TS12_PREFIX = 'urn:eudi:sca:';

const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const ISO_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T([01]\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d{1,9})?)?(Z|[+-]([01]\d|2[0-3]):?[0-5]\d)?$/;

/** An ISO 8601 calendar date, or date and time, naming a day that exists (no 2025-02-30). */
const isIsoDate = (value: string): boolean => {
    const match = ISO_DATE.exec(value) ?? ISO_DATE_TIME.exec(value);
    if (!match) {
        return false;
    }
    const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
    const date = new Date(Date.UTC(year, month - 1, day));
    return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
};

const iso8601 = Joi.string().custom((value: string, helpers) => (isIsoDate(value) ? value : helpers.error('ts12.date')))
    .messages({ 'ts12.date': '{{#label}} must be an ISO 8601 date or date and time' });

const transactionId = Joi.string().min(1).max(36);
const thirdParty = Joi.object({
    legal_name: Joi.string().required(),
    brand_name: Joi.string().required(),
    domain_name: Joi.string().required()
});

export const TS12_RECURRENCE_FREQUENCIES = ['INDA', 'DAIL', 'WEEK', 'TOWK', 'TWMN', 'MNTH', 'TOMN', 'QUTR', 'FOMN', 'SEMI', 'YEAR', 'TYEA'] as const;

const ts12PaymentSchema = Joi.object({
    transaction_id: transactionId.required(),
    date_time: iso8601,
    payee: Joi.object({
        name: Joi.string().required(),
        id: Joi.string().required(),
        // Resolvable or data: URL (RFC 2397).
        logo: Joi.string().uri(),
        website: Joi.string().uri({ scheme: ['http', 'https'] })
    }).required(),
    pisp: thirdParty,
    execution_date: iso8601.when('recurrence', { is: Joi.exist(), then: Joi.forbidden() })
        .messages({ 'any.unknown': '{{#label}} must not be present with recurrence' }),
    currency: Joi.string().pattern(/^[A-Z]{3}$/, 'ISO 4217 alpha-3 code').required(),
    amount: Joi.number().required(),
    amount_estimated: Joi.boolean(),
    amount_earmarked: Joi.boolean(),
    sct_inst: Joi.boolean(),
    recurrence: Joi.object({
        start_date: iso8601,
        end_date: iso8601,
        number: Joi.number().integer(),
        frequency: Joi.string().valid(...TS12_RECURRENCE_FREQUENCIES).required(),
        mit_options: Joi.object({
            amount_variable: Joi.boolean(),
            min_amount: Joi.number(),
            max_amount: Joi.number(),
            total_amount: Joi.number(),
            initial_amount: Joi.number(),
            initial_amount_number: Joi.number().integer(),
            apr: Joi.number()
        })
    })
});

const ts12LoginRiskSchema = Joi.object({
    transaction_id: transactionId.required(),
    date_time: iso8601,
    service: Joi.string().max(100),
    action: Joi.string().max(140).required()
});

const ts12AccountAccessSchema = Joi.object({
    transaction_id: transactionId.required(),
    date_time: iso8601,
    aisp: thirdParty,
    description: Joi.string().max(140)
});

const ts12EmandateSchema = Joi.object({
    transaction_id: transactionId.required(),
    date_time: iso8601,
    start_date: iso8601,
    end_date: iso8601,
    reference_number: Joi.string().min(1).max(50),
    creditor_id: Joi.string().min(1).max(50),
    purpose: Joi.string().max(1000).when('payment_payload', { not: Joi.exist(), then: Joi.required() })
        .messages({ 'any.required': '{{#label}} is required unless payment_payload is present' }),
    payment_payload: ts12PaymentSchema
});

/** Payload schemas of the supported TS12 transaction data types. */
export const TS12_PAYLOAD_SCHEMAS: Readonly<Record<string, Joi.ObjectSchema>> = {
    'urn:eudi:sca:payment:1': ts12PaymentSchema,
    'urn:eudi:sca:login_risk_transaction:1': ts12LoginRiskSchema,
    'urn:eudi:sca:account_access:1': ts12AccountAccessSchema,
    'urn:eudi:sca:emandate:1': ts12EmandateSchema
};

export const TS12_TRANSACTION_TYPES = Object.keys(TS12_PAYLOAD_SCHEMAS);

export const isTs12Type = (type: string): boolean => type.startsWith(TS12_PREFIX);

// ---------------------------------------------------------------------------------------------------------------
// Schema helpers
// ---------------------------------------------------------------------------------------------------------------

/** Joi's typings mark the state's path and localize() optional; at validation time they are always there. */
const stateAt = (helpers: Joi.CustomHelpers, ...segments: Array<string | number>): Joi.State =>
    helpers.state.localize!([...helpers.state.path ?? [], ...segments]);

/** Several reports from one custom rule; joi supports it at runtime, its typings do not say so. */
const errorsArray = (helpers: Joi.CustomHelpers): Joi.ErrorReport[] =>
    (helpers as unknown as { errorsArray(): Joi.ErrorReport[] }).errorsArray();

const reportAll = <T>(value: T, errors: Joi.ErrorReport[]): T | Joi.ErrorReport => (errors.length ? errors as unknown as Joi.ErrorReport : value);

/** A path the way joi labels it (`a.b[0].c`). */
const pathLabel = (path: Array<string | number>): string =>
    path.reduce<string>((label, segment) => (typeof segment === 'number' ? `${label}[${segment}]` : label ? `${label}.${segment}` : segment), '');

/**
 * An error of a custom rule at a path below the value it checks. Errors take the label of the schema that raises
 * them, so the messages of these codes use {{#at}}, the path itself, instead of {{#label}}.
 */
const errorAt = (helpers: Joi.CustomHelpers, code: string, local: Record<string, unknown>, ...segments: Array<string | number>): Joi.ErrorReport => {
    const state = stateAt(helpers, ...segments);
    return helpers.error(code, { ...local, at: `"${pathLabel(state.path ?? [])}"` }, state);
};

const resourceId = (name: string) => Joi.string().pattern(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, name)
    .description('Letters, digits, _ . and -, up to 128 characters');

const DCQL_ID = /^[A-Za-z0-9_-]+$/;

// ---------------------------------------------------------------------------------------------------------------
// DCQL
// ---------------------------------------------------------------------------------------------------------------

const claimPathSchema = Joi.array().items(Joi.string(), Joi.number().integer().min(0), Joi.valid(null)).min(1)
    .description('Path in the credential: a string names a member, an integer an array element, null every element');

// Strict: a value must equal the disclosed one in type too, so "18" never becomes 18.
const claimValuesSchema = Joi.array().items(Joi.string().allow('').strict(), Joi.number().integer().strict(), Joi.boolean().strict()).min(1)
    .messages({ 'array.includes': '{{#label}} must be a string, an integer or a boolean' })
    .description('Accepted values: strings, integers, booleans; at least one');

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

// ---------------------------------------------------------------------------------------------------------------
// Transaction data
// ---------------------------------------------------------------------------------------------------------------

const TS12_UNSUPPORTED = 'transactionData.ts12Unsupported';
const CREDENTIAL_ID_UNKNOWN = 'transactionData.unknownCredentialId';

/** One transaction_data entry; credential ids are checked against a DCQL query by checkTransactionDataCredentialIds. */
export const transactionDataEntrySchema = Joi.object<TransactionData, true>({
    type: Joi.string().min(1).max(255).required()
        .custom((type: string, helpers) => (isTs12Type(type) && !TS12_PAYLOAD_SCHEMAS[type] ? helpers.error(TS12_UNSUPPORTED, { types: TS12_TRANSACTION_TYPES.join(', ') }) : type))
        .messages({ [TS12_UNSUPPORTED]: '{{#label}} is not a supported TS12 transaction data type (supported: {{#types}})' })
        .description(`Transaction data type; ${TS12_PREFIX} types must be one of ${TS12_TRANSACTION_TYPES.join(', ')}`),
    credential_ids: Joi.array().items(Joi.string().min(1)).min(1).required().description('Credential query ids the entry applies to'),
    // Validated without conversion: the wallet hashes what it is sent, so the stored payload is exactly the one given.
    payload: Joi.when('type', {
        switch: TS12_TRANSACTION_TYPES.map((type) => ({
            is: type,
            then: TS12_PAYLOAD_SCHEMAS[type]!.required().prefs({ convert: false })
                .messages({ 'any.required': `{{#label}} is required for ${type}` })
        })),
        otherwise: Joi.any()
    }).description('Transaction details; required for TS12 types and checked against the type\'s payload schema'),
    transaction_data_hashes_alg: Joi.array().items(Joi.string().min(1)).min(1)
        .description('Hash algorithms for transaction_data_hashes, e.g. sha-256 (required by TS12 for SCA types)')
}).label('TransactionData');

/** [entry index, credential_ids index, id] of every credential id that names no credential query of the DCQL query. */
const unknownCredentialIds = (entries: TransactionData[], query: DcqlQuery | undefined): Array<[number, number, string]> => {
    const ids = new Set((query?.credentials ?? []).map((c) => c?.id));
    return entries.flatMap((entry, i) => (entry?.credential_ids ?? []).flatMap((id, j): Array<[number, number, string]> => (ids.has(id) ? [] : [[i, j, id]])));
};

/**
 * For transaction_data given elsewhere (e.g. in a presentation request): one problem per credential id that names no
 * credential query of the DCQL query, with paths relative to the transaction_data array.
 */
export const checkTransactionDataCredentialIds = (entries: TransactionData[], query: DcqlQuery): ErrorDetail[] =>
    unknownCredentialIds(entries, query).map(([i, j, id]) => ({ path: `${i}.credential_ids.${j}`, message: `names no credential query of the DCQL query (${JSON.stringify(id)})` }));

const transactionDataSchema = Joi.array().items(transactionDataEntrySchema)
    .custom((entries: TransactionData[], helpers) => {
        const root = helpers.state.ancestors?.[0] as Partial<PresentationConfig> | undefined;
        if (!Array.isArray(root?.dcql_query?.credentials)) {
            // The missing or broken query has its own error.
            return entries;
        }
        const errors = errorsArray(helpers);
        for (const [i, j, id] of unknownCredentialIds(entries, root.dcql_query)) {
            errors.push(errorAt(helpers, CREDENTIAL_ID_UNKNOWN, { id }, i, 'credential_ids', j));
        }
        return reportAll(entries, errors);
    }, 'credential ids of the DCQL query')
    .messages({ [CREDENTIAL_ID_UNKNOWN]: '{{#at}} names no credential query of dcql_query' });

// ---------------------------------------------------------------------------------------------------------------
// Registration certificate
// ---------------------------------------------------------------------------------------------------------------

const purposeSchema = Joi.object<RegistrationCertPurpose, true>({
    lang: Joi.string().min(1).max(35).required().description('BCP 47 language tag'),
    content: Joi.string().min(1).max(2000).required()
}).label('RegistrationCertPurpose');

export const registrationCertBodySchema = Joi.object<RegistrationCertBody, true>({
    privacy_policy: Joi.string().max(2048),
    support_uri: Joi.string().max(2048),
    intermediary: Joi.string().max(2048),
    purpose: Joi.array().items(purposeSchema),
    credentials: Joi.array().items(Joi.object().unknown(true)),
    provides_attestations: Joi.array().items(Joi.string().min(1).max(2048)).description('Credential type identifiers')
}).label('RegistrationCertBody');

export const registrationCertSchema = Joi.object<RegistrationCert, true>({
    id: Joi.string().min(1).max(255).description('Registrar-side registration certificate id'),
    jwt: Joi.string().min(1).max(65536).description('An imported registration certificate (JWT)'),
    body: registrationCertBodySchema.description('Registration request body')
}).label('RegistrationCert');

/** Flat strings may come from forms: empty and null both mean "not set". */
const flatText = (max: number) => Joi.string().allow('', null).max(max);

const FLAT_PURPOSE_INCOMPLETE = 'registrationCert.flatPurposeIncomplete';

const present = (value: string | null | undefined): value is string => typeof value === 'string' && value.length > 0;

/**
 * registration_cert from the flat fields when it is absent (spec 2.1); the flat fields are never kept. A flat purpose
 * row with neither lang nor content is an empty form row and skipped; one with only one of them is an error.
 */
const convertFlatFields = (input: PresentationConfigInput, helpers: Joi.CustomHelpers): PresentationConfig | Joi.ErrorReport => {
    const {
        registrationCertImportJwt: jwt,
        registrationCertImportId: id,
        registrationCertBodyPrivacyPolicy: privacyPolicy,
        registrationCertBodySupportUri: supportUri,
        registrationCertBodyIntermediary: intermediary,
        registrationCertBodyPurpose: flatPurpose,
        ...config
    } = input;
    if (config.registration_cert !== undefined) {
        return config;
    }
    const errors = errorsArray(helpers);
    const purpose: RegistrationCertPurpose[] = [];
    (flatPurpose ?? []).forEach((row, i) => {
        if (!present(row.lang) && !present(row.content)) {
            return;
        }
        if (present(row.lang) && present(row.content)) {
            purpose.push({ lang: row.lang, content: row.content });
            return;
        }
        const missing = present(row.lang) ? 'content' : 'lang';
        errors.push(errorAt(helpers, FLAT_PURPOSE_INCOMPLETE, {}, 'registrationCertBodyPurpose', i, missing));
    });
    if (errors.length) {
        return errors as unknown as Joi.ErrorReport;
    }
    const body: RegistrationCertBody = {
        ...(present(privacyPolicy) ? { privacy_policy: privacyPolicy } : {}),
        ...(present(supportUri) ? { support_uri: supportUri } : {}),
        ...(present(intermediary) ? { intermediary } : {}),
        ...(purpose.length ? { purpose } : {})
    };
    const cert: RegistrationCert = {
        ...(present(id) ? { id } : {}),
        ...(present(jwt) ? { jwt } : {}),
        ...(Object.keys(body).length ? { body } : {})
    };
    return Object.keys(cert).length ? { ...config, registration_cert: cert } : config;
};

// ---------------------------------------------------------------------------------------------------------------
// Presentation configuration
// ---------------------------------------------------------------------------------------------------------------

const readOnly = <S extends Joi.Schema>(schema: S): S => schema.forbidden()
    .messages({ 'any.unknown': '{{#label}} is read-only' })
    .description('Read-only: shown in answers, rejected in requests') as S;

const REDIRECT_URI = 'presentationConfig.redirectUri';

/**
 * Clock skew tolerance in seconds, of a configuration and of a request that overrides it. The spec sets only a
 * minimum; joi's integer rule already refuses values beyond Number.MAX_SAFE_INTEGER, and the time checks compare
 * plain numbers, so a larger skew only loosens the checks and cannot overflow.
 */
export const skewSecondsSchema = Joi.number().integer().min(0);

export const presentationConfigSchema = Joi.object<PresentationConfig, true, PresentationConfigInput>({
    id: resourceId('presentation configuration id').required().description('Identifier; the requestId of presentation requests'),
    description: Joi.string().max(2000).allow(null).description('Internal only; hidden from the wallet user'),
    lifeTime: Joi.number().integer().min(1).default(300).description('Seconds until a request expires. Default 300'),
    skewSeconds: skewSecondsSchema.default(60).description('Clock skew tolerance in seconds. Default 60'),
    statusCheckMode: Joi.string().valid(...STATUS_CHECK_MODES)
        .description('strict: fail when a status list cannot be checked; best_effort: continue without it; disabled: no check'),
    dcql_query: dcqlQuerySchema.required(),
    transaction_data: transactionDataSchema.allow(null).description('Sent with every request unless the request sets its own'),
    registration_cert: registrationCertSchema.allow(null),
    registrationCertImportJwt: flatText(65536).description('Flat form field: registration_cert.jwt when registration_cert is absent; not stored'),
    registrationCertImportId: flatText(255).description('Flat form field: registration_cert.id when registration_cert is absent; not stored'),
    registrationCertBodyPrivacyPolicy: flatText(2048).description('Flat form field: registration_cert.body.privacy_policy; not stored'),
    registrationCertBodySupportUri: flatText(2048).description('Flat form field: registration_cert.body.support_uri; not stored'),
    registrationCertBodyIntermediary: flatText(2048).description('Flat form field: registration_cert.body.intermediary; not stored'),
    registrationCertBodyPurpose: Joi.array().items(Joi.object<RegistrationCertFlatPurpose, true>({
        lang: flatText(35),
        content: flatText(2000)
    }).label('RegistrationCertFlatPurpose')).allow(null).description('Flat form field: registration_cert.body.purpose; not stored'),
    webhookEndpointId: Joi.string().max(255).allow(null).description('Webhook endpoint that receives presentation results'),
    attached: Joi.array().items(Joi.object<Attachment, true>({
        format: Joi.string().min(1).max(255).required(),
        // Any JSON value (alternatives only because the strict typing wants one for a union type).
        data: Joi.alternatives().try(Joi.any()).required(),
        credential_ids: Joi.array().items(Joi.string().min(1))
    }).label('Attachment')).allow(null).description('Stored with the configuration; currently not sent to the wallet'),
    redirectUri: Joi.string().max(2048).allow(null)
        .custom((uri: string, helpers) => {
            // {sessionId} is not URI syntax; the URI it becomes must be absolute.
            try {
                new URL(uri.replaceAll('{sessionId}', 'session'));
                return uri;
            }
            catch {
                return helpers.error(REDIRECT_URI);
            }
        })
        .messages({ [REDIRECT_URI]: '{{#label}} must be an absolute URI ({sessionId} may appear in it)' })
        .description('Same-device redirect target; {sessionId} is replaced by the session id'),
    accessKeyChainId: Joi.string().max(255).allow(null).description('Access key chain that signs the request and determines the client_id'),
    readerAuth: Joi.boolean().allow(null).default(false).description('ISO 18013-7 only: sign the DeviceRequest. Default false'),
    createdAt: readOnly(Joi.string()),
    updatedAt: readOnly(Joi.string()),
    registrationCertCache: readOnly(Joi.object())
}).custom(convertFlatFields, 'registration certificate flat fields')
    .messages({ [FLAT_PURPOSE_INCOMPLETE]: '{{#at}} is required to convert the purpose into registration_cert' })
    .label('PresentationConfig');

// ---------------------------------------------------------------------------------------------------------------
// Versions
// ---------------------------------------------------------------------------------------------------------------

/** v1 → v2: registration_cert.body.provided_attestations is replaced by provides_attestations; the old field is dropped. */
const upgradeV1: Upgrade = (spec, warn) => {
    const body = spec?.registration_cert?.body;
    if (body && typeof body === 'object' && 'provided_attestations' in body) {
        delete body.provided_attestations;
        warn({
            code: 'PROVIDED_ATTESTATIONS_REMOVED',
            message: 'registration_cert.body.provided_attestations was removed in PresentationConfigFile version 2 and is dropped; list the credential types in registration_cert.body.provides_attestations'
        });
    }
    return spec;
};

/** v2 → v3: values may now be integers and booleans too (v2 documents stay as they are), but must not be empty. */
const upgradeV2: Upgrade = (spec) => {
    const credentials: unknown = spec?.dcql_query?.credentials;
    const problems: ErrorDetail[] = [];
    if (Array.isArray(credentials)) {
        credentials.forEach((query: { claims?: unknown } | null, i) => {
            if (!Array.isArray(query?.claims)) {
                return;
            }
            query.claims.forEach((claim: { values?: unknown } | null, j) => {
                if (Array.isArray(claim?.values) && claim.values.length === 0) {
                    problems.push({ path: `dcql_query.credentials.${i}.claims.${j}.values`, message: 'is empty: version 3 requires at least one value (omit values to accept any value)' });
                }
            });
        });
    }
    if (problems.length) {
        throw new ValidationError('PresentationConfigFile version 2 cannot be upgraded to version 3: DCQL claim values must not be empty', problems);
    }
    return spec;
};

/** The access key chain (a registry reference) must also be of usage `access`: it signs the request. */
const checkPresentationConfig = async (scope: StoreScope, spec: PresentationConfig): Promise<void> => {
    if (!scope.tenantId || !spec.accessKeyChainId) {
        return;
    }
    const chain = await scope.get(keyChainKind, spec.accessKeyChainId);
    const usage = chain?.spec.usageType;
    if (usage && usage !== 'access') {
        throw new ValidationError(`accessKeyChainId names key chain ${spec.accessKeyChainId} of usage ${usage}; a presentation request is signed by an access key chain`, [{ path: 'accessKeyChainId', message: `key chain ${spec.accessKeyChainId} has usageType ${usage}, not access` }]);
    }
};

export const presentationConfigKind: ResourceKind<PresentationConfig> = {
    kind: 'PresentationConfig',
    file: 'PresentationConfigFile',
    version: 3,
    schema: presentationConfigSchema,
    upgrades: { 1: upgradeV1, 2: upgradeV2 },
    dependsOn: ['Tenant', 'KeyChain', 'WebhookEndpoint', 'TrustList'],
    references: {
        webhookEndpointId: 'WebhookEndpoint',
        accessKeyChainId: 'KeyChain',
        'dcql_query.credentials.*.trusted_authorities.*.values.*.trustListId': 'TrustList'
    },
    id: (spec) => spec.id,
    location: { dir: 'presentation' },
    check: checkPresentationConfig
};

// ---------------------------------------------------------------------------------------------------------------
// Request time
// ---------------------------------------------------------------------------------------------------------------

const replaceDeep = (value: unknown, replace: (s: string) => string): unknown => {
    if (typeof value === 'string') {
        return replace(value);
    }
    if (Array.isArray(value)) {
        return value.map((v) => replaceDeep(v, replace));
    }
    if (value && typeof value === 'object') {
        return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, replaceDeep(v, replace)]));
    }
    return value;
};

/**
 * A deep copy of the configuration's dcql_query with every occurrence of <TENANT_URL> in a string value replaced by
 * the tenant base URL ({PUBLIC_URL}/issuers/{tenant}). The stored configuration keeps the placeholder.
 */
export const withTenantUrl = (config: Pick<PresentationConfig, 'dcql_query'>, tenantUrl: string): DcqlQuery =>
    replaceDeep(config.dcql_query, (s) => s.replaceAll(TENANT_URL_PLACEHOLDER, tenantUrl)) as DcqlQuery;
