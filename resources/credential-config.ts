import Joi from 'joi';
import type { ResourceKind } from '../lib/registry/kind';
import { ValidationError, type ErrorDetail } from '../lib/errors';
import { tableResourceStore } from '../lib/registry/resource-store';
import { errorsArray, resourceId, stateAt } from './shared/custom-rules';
import { publicJwkOnly } from './shared/public-jwk';
import { notAvailableYet } from './shared/not-available';
import { claimValueViolation } from '../plugins/oid4vci/formats/constraints';
import type { KeyChain } from './key-chain';

export const CREDENTIAL_FORMATS = ['mso_mdoc', 'dc+sd-jwt'] as const;
export type CredentialFormat = (typeof CREDENTIAL_FORMATS)[number];

export const CLAIM_TYPES = ['string', 'number', 'integer', 'boolean', 'object', 'array'] as const;
export type ClaimType = (typeof CLAIM_TYPES)[number];

export const PROOF_TYPES = ['jwt', 'attestation'] as const;
export type ProofType = (typeof PROOF_TYPES)[number];

export const REUSE_DETAILS = ['once_only', 'limited_time', 'limited-time', 'rotating-batch', 'per-relying-party'] as const;
export type ReuseDetail = (typeof REUSE_DETAILS)[number];

export const ATTESTATION_LOS = ['iso_18045_high', 'iso_18045_moderate', 'iso_18045_enhanced-basic', 'iso_18045_basic'] as const;
export const BINDING_TYPES = ['claim', 'key', 'biometric', 'none'] as const;
export const FRAMEWORK_TYPES = ['aki', 'etsi_tl', 'openid_federation'] as const;
export const STATUS_BITS = [1, 2, 4, 8] as const;

/** The reuse policy id whose options the spec makes required. */
export const ARF_ANNEX_II = 'arf_annex_ii';

export interface DisplayImage {
    uri: string;
}

export interface CredentialDisplay {
    locale: string;
    name: string;
    description?: string;
    background_color?: string;
    text_color?: string;
    background_image?: DisplayImage;
    logo?: DisplayImage;
}

export interface KeyAttestationsRequired {
    key_storage?: string[];
    user_authentication?: string[];
}

export interface CredentialReuseOption {
    details: ReuseDetail[];
    /** Required for once_only, rotating-batch and per-relying-party; at least 2. */
    batch_size?: number;
    /** Required for once_only; lower than batch_size. */
    reissue_trigger_unused?: number;
    /** Seconds; required for limited_time, rotating-batch and per-relying-party. */
    reissue_trigger_lifetime_left?: number;
}

export interface CredentialReusePolicy {
    id: string;
    /** Required when id is arf_annex_ii. */
    options?: CredentialReuseOption[];
}

/** The issuer-metadata-facing part. */
export interface CredentialMetadataConfig {
    format: CredentialFormat;
    display: CredentialDisplay[];
    scope?: string;
    /** Required for mso_mdoc. */
    docType?: string;
    /** Only keys of a key attestation that meets these levels get credentials. */
    keyAttestationsRequired?: KeyAttestationsRequired;
    /** Accepted and published proof types. Default: both. */
    proofTypesSupported?: ProofType[];
    credentialReusePolicy?: CredentialReusePolicy;
}

export interface ClaimDisplay {
    locale: string;
    name: string;
    description?: string;
}

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** Path in the credential payload; a null element stands for every element of an array. */
export type ClaimPath = Array<string | number | null>;

export interface ClaimField {
    /** For mso_mdoc top-level fields: `[namespace, element]` or `[element]`. */
    path: ClaimPath | null;
    type: ClaimType;
    /** Of the field's type (null: no default). */
    defaultValue?: JsonValue;
    /** Default false. */
    mandatory?: boolean;
    /** Default false. */
    disclosable?: boolean;
    /** mso_mdoc only; default: the first segment of a two-segment path, otherwise the docType. */
    namespace?: string;
    display?: ClaimDisplay[];
    /** Keywords by type: string fields pattern, minLength, maxLength, format, enum; number and integer fields minimum, maximum, enum; boolean fields enum. */
    constraints?: ClaimConstraints;
    /** Only for object and array fields; their paths are relative to this field's, or repeat it in full. */
    children?: ClaimField[];
}

export const CLAIM_FORMATS = ['date', 'date-time', 'uri', 'email'] as const;

/** What a claim value must keep besides its type (checked at the credential endpoint). */
export interface ClaimConstraints {
    /** ECMAScript regular expression (unicode mode), not anchored: the value must contain a match. */
    pattern?: string;
    minLength?: number;
    maxLength?: number;
    minimum?: number;
    maximum?: number;
    enum?: Array<string | number | boolean>;
    format?: (typeof CLAIM_FORMATS)[number];
}

const CLAIM_PATTERN_MAX_LENGTH = 1024;

/** SD-JWT VC type metadata. */
export interface VctMetadata {
    vct?: string;
    name?: string;
    description?: string;
    extends?: string;
    'extends#integrity'?: string;
    schema_uri?: string;
    'schema_uri#integrity'?: string;
}

/** Spec 2.6: the status object beside the boolean statusManagement. */
export interface CredentialStatusConfig {
    enabled: boolean;
    /** Absent: the tenant's statusListConfig.bits, else 1. */
    bits?: (typeof STATUS_BITS)[number];
    /** Default false: lists shared in the tenant. */
    credentialConfigurationBound?: boolean;
}

export interface ActiveCredentialsPolicy {
    enabled: boolean;
    tracking?: 'internal';
}

export interface Openid4vpPresentationAction {
    type: 'openid4vp_presentation';
    presentationConfigId: string;
    label?: string;
}

export interface RedirectToWebAction {
    type: 'redirect_to_web';
    url: string;
    label?: string;
    description?: string;
    callbackUrl?: string;
}

/** Spec 2.1a: a step of the interactive authorization endpoint. */
export type IaeAction = Openid4vpPresentationAction | RedirectToWebAction;

export interface SchemaUriEntry {
    credentialConfigId?: string;
    format?: string;
    meta?: Record<string, unknown>;
    uri?: string;
}

/** A public JWK (RFC 7517); members beyond kty vary by key type. */
export interface PublicJwk {
    kty: string;
    [member: string]: unknown;
}

/** A reference (a DID URL, key id or similar) or the key itself as a public JWK. */
export type VerificationMethod = string | PublicJwk;

export interface TrustedAuthority {
    trustListId?: string;
    frameworkType?: (typeof FRAMEWORK_TYPES)[number];
    value?: string;
    verificationMethod?: VerificationMethod;
}

export interface SchemaMeta {
    version: string;
    attestationLoS: (typeof ATTESTATION_LOS)[number];
    bindingType: (typeof BINDING_TYPES)[number];
    id?: string;
    name?: string;
    rulebookURI?: string;
    schemaURIs?: SchemaUriEntry[];
    trustedAuthorities?: TrustedAuthority[];
}

/** What a relying party must present to be given this credential: DCQL-shaped. */
export interface AttestationRequirement {
    credentials: Array<Record<string, unknown>>;
    claims?: Array<Record<string, unknown>>;
    credential_sets?: Array<Record<string, unknown>>;
}

export type EmbeddedDisclosurePolicy =
    | { policy: 'attestationBased'; values: AttestationRequirement[] }
    | { policy: 'allowList'; values: string[] }
    | { policy: 'rootOfTrust'; values: string }
    | { policy: 'none' };

/** A credential configuration (spec 2.2): what the issuer publishes for one credential type and how it issues it. */
export interface CredentialConfig {
    id: string;
    description?: string | null;
    config: CredentialMetadataConfig;
    fields: ClaimField[];
    attributeProviderId?: string | null;
    /** Stored but unused: notifications go to the webhookEndpointId of the credential offer. */
    webhookEndpointId?: string | null;
    /** Required for dc+sd-jwt (a string, or an object with vct). */
    vct?: string | VctMetadata | null;
    /** Default true. */
    keyBinding?: boolean;
    keyChainId?: string;
    /** Refused (400) where no status provider is registered, i.e. without the status plugin. */
    statusManagement?: boolean;
    status?: CredentialStatusConfig;
    /** Only with statusManagement true. */
    activeCredentials?: ActiveCredentialsPolicy | null;
    iaeActions?: IaeAction[] | null;
    /** Default x5c. */
    sdJwtTrustFormat?: 'x5c' | 'federation' | null;
    lifeTime?: number;
    schemaMeta?: SchemaMeta | null;
    embeddedDisclosurePolicy?: EmbeddedDisclosurePolicy | null;
}

/** Whether issued credentials of the configuration carry a status list entry: either switch turns it on. */
export const statusManaged = (spec: Pick<CredentialConfig, 'statusManagement' | 'status'>): boolean =>
    spec.statusManagement === true || spec.status?.enabled === true;

/**
 * The 400 details for a configuration that turns status management on where nothing could give its credentials a
 * status entry (the deployment does not load the status plugin): a stored setting without effect.
 */
export const statusUnavailable = (spec: Pick<CredentialConfig, 'statusManagement' | 'status'>): ErrorDetail[] => {
    const message = (path: string) => `"${path}": token status lists are not available in this deployment (the status plugin is not loaded)`;
    return [
        ...(spec.statusManagement === true ? [{ path: 'statusManagement', message: message('statusManagement') }] : []),
        ...(spec.status?.enabled === true ? [{ path: 'status.enabled', message: message('status.enabled') }] : [])
    ];
};

const text = Joi.string().max(2000);
const httpUrl = Joi.string().uri({ scheme: ['http', 'https'] }).max(2048);

/** A URI with a scheme; anything else is a name relative to something, e.g. a file of the tenant folder's images/. */
const hasScheme = (uri: string) => /^[a-z][a-z0-9+.-]*:/i.test(uri);

// Wallets fetch the image themselves (OpenID4VCI display logo / background_image): an https: URL or a data: URI.
export const displayImageSchema = Joi.object<DisplayImage, true>({
    uri: notAvailableYet(Joi.string().min(1).max(65536), 'image files of the tenant folder are not served by this service; give an https: or data: URI', (uri: string) => !hasScheme(uri))
        .custom((uri: string, helpers) => (!hasScheme(uri) || /^https:\/\/[^\s/?#]+\S*$/i.test(uri) || /^data:[\w/.+-]+;\w+,/i.test(uri) ? uri : helpers.error('displayImage.uri')))
        .messages({ 'displayImage.uri': '{{#label}} must be an https: URL or a data: URI' })
        .required().description('https: URL or data: URI (e.g. data:image/png;base64,…) the wallet loads the image from')
}).label('DisplayImage');

export const credentialDisplaySchema = Joi.object<CredentialDisplay, true>({
    locale: Joi.string().min(1).max(35).required().description('BCP 47 language tag'),
    name: Joi.string().min(1).max(255).required(),
    description: text,
    background_color: Joi.string().max(64),
    text_color: Joi.string().max(64),
    background_image: displayImageSchema,
    logo: displayImageSchema
}).label('CredentialDisplay');

/** True when a reuse option's details name one of the methods. */
const detailsInclude = (...methods: ReuseDetail[]) => Joi.array().has(Joi.valid(...methods)).required();

export const credentialReuseOptionSchema = Joi.object<CredentialReuseOption, true>({
    details: Joi.array().items(Joi.string().valid(...REUSE_DETAILS)).min(1).unique().required(),
    batch_size: Joi.number().integer().min(2)
        .when('details', { is: detailsInclude('once_only', 'rotating-batch', 'per-relying-party'), then: Joi.required() })
        .messages({ 'any.required': '{{#label}} is required for once_only, rotating-batch and per-relying-party' }),
    reissue_trigger_unused: Joi.number().integer().min(0)
        .when('details', { is: detailsInclude('once_only'), then: Joi.required() })
        // Without batch_size there is nothing to compare with; that absence is reported on batch_size.
        .when('batch_size', { is: Joi.number().required(), then: Joi.number().less(Joi.ref('batch_size')) })
        .messages({ 'any.required': '{{#label}} is required for once_only', 'number.less': '{{#label}} must be lower than batch_size' }),
    reissue_trigger_lifetime_left: Joi.number().integer().min(0)
        .when('details', { is: detailsInclude('limited_time', 'rotating-batch', 'per-relying-party'), then: Joi.required() })
        .messages({ 'any.required': '{{#label}} is required for limited_time, rotating-batch and per-relying-party' })
        .description('Seconds of lifetime left that trigger reissuance')
}).label('CredentialReuseOption');

export const credentialReusePolicySchema = Joi.object<CredentialReusePolicy, true>({
    id: Joi.string().min(1).max(255).required(),
    options: Joi.array().items(credentialReuseOptionSchema)
        .when('id', { is: ARF_ANNEX_II, then: Joi.array().min(1).required() })
        .messages({ 'any.required': '{{#label}} is required when id is arf_annex_ii' })
}).label('CredentialReusePolicy');

/** key_storage / user_authentication values, e.g. iso_18045_high (OpenID4VCI D.2); ecosystems may define others. */
const attestationLevels = Joi.array().items(Joi.string().min(1).max(255)).min(1).max(20).unique();

export const credentialMetadataConfigSchema = Joi.object<CredentialMetadataConfig, true>({
    format: Joi.string().valid(...CREDENTIAL_FORMATS).required(),
    display: Joi.array().items(credentialDisplaySchema).required().description('Wallet display entries'),
    scope: Joi.string().min(1).max(255)
        .description('Published as scope in the issuer metadata only; wallets select credentials with authorization_details'),
    docType: Joi.string().min(1).max(255)
        .when('format', { is: 'mso_mdoc', then: Joi.required() })
        .messages({ 'any.required': '{{#label}} is required for mso_mdoc' })
        .description('mDoc document type, e.g. org.iso.18013.5.1.mDL; required for mso_mdoc'),
    // An empty list could never be met; an empty object asks for a key attestation of any level.
    keyAttestationsRequired: Joi.object<KeyAttestationsRequired, true>({
        key_storage: attestationLevels.description('Accepted key storage levels: the key attestation must assert one of them'),
        user_authentication: attestationLevels.description('Accepted user authentication levels: the key attestation must assert one of them')
    }).label('KeyAttestationsRequired')
        .description('Credentials are only bound to keys of a key attestation (HAIP Annex D) from a wallet provider of the tenant\'s trust lists; published as key_attestations_required'),
    // An empty list would publish proof_types_supported without any proof type, which OpenID4VCI does not allow.
    proofTypesSupported: Joi.array().items(Joi.string().valid(...PROOF_TYPES)).min(1).unique()
        .default(() => [...PROOF_TYPES]).description('Proof types accepted at the credential endpoint and published in the issuer metadata. Default: jwt and attestation'),
    // OpenID4VCI 1.0 has no issuer metadata member for it, and the issuer does not act on it.
    credentialReusePolicy: notAvailableYet(credentialReusePolicySchema, 'credential reuse policies (and their batch_size) are not available yet: OpenID4VCI 1.0 defines no issuer metadata member to publish them in and the issuer does not act on them; batch issuance is the issuance config\'s batchSize')
}).label('CredentialMetadataConfig');

/** At `i`: a quantifier that repeats without a fixed count (`*`, `+`, `{n,}`, `{n,m}`). */
const openQuantifierAt = (pattern: string, i: number): boolean =>
    pattern[i] === '*' || pattern[i] === '+' || (pattern[i] === '{' && /^\{\d+,\d*\}/.test(pattern.slice(i)) && !/^\{(\d+),\1\}/.test(pattern.slice(i)));

/**
 * A repeated group that itself repeats something (`(a+)+`, `(\w*)*`, `(x{1,5})+`): the shape behind catastrophic
 * backtracking. Read without a regex parser, so it errs on the side of refusing.
 */
const nestedQuantifier = (pattern: string): boolean => {
    const groups: boolean[] = [];
    let inClass = false;
    for (let i = 0; i < pattern.length; i++) {
        const c = pattern[i];
        if (c === '\\') {
            i++;
        }
        else if (inClass) {
            inClass = c !== ']';
        }
        else if (c === '[') {
            inClass = true;
        }
        else if (c === '(') {
            groups.push(false);
        }
        else if (c === ')') {
            const repeatsInside = groups.pop() ?? false;
            if (repeatsInside && openQuantifierAt(pattern, i + 1)) {
                return true;
            }
            // The enclosing group repeats whatever this one did.
            if (repeatsInside && groups.length) {
                groups[groups.length - 1] = true;
            }
        }
        else if (openQuantifierAt(pattern, i) && groups.length) {
            groups[groups.length - 1] = true;
        }
    }
    return false;
};

const PATTERN_INVALID = 'claimConstraints.patternInvalid';
const PATTERN_NESTED = 'claimConstraints.patternNested';

const patternSchema = Joi.string().min(1).max(CLAIM_PATTERN_MAX_LENGTH).custom((pattern: string, helpers) => {
    try {
        new RegExp(pattern, 'u');
    }
    catch (err) {
        return helpers.error(PATTERN_INVALID, { reason: (err as Error).message });
    }
    return nestedQuantifier(pattern) ? helpers.error(PATTERN_NESTED) : pattern;
}).messages({
    [PATTERN_INVALID]: '{{#label}} is not a valid regular expression: {{#reason}}',
    [PATTERN_NESTED]: '{{#label}} repeats a group that itself repeats (nested quantifiers such as (a+)+ can take exponential time)'
}).description('ECMAScript regular expression (unicode mode), not anchored; it runs at most 50 ms on a value, and values longer than 4096 characters fail it');

const lengthSchema = Joi.number().integer().min(0).max(1_000_000);

const enumSchema = (item: Joi.Schema, max = 1000) => Joi.array().items(item).min(1).max(max).unique()
    // Set here: the fields array's own message for a repeat speaks of paths.
    .messages({ 'array.unique': '{{#label}} repeats the value of entry {{#dupePos}}' });

/** The keywords each claim type takes; any other keyword is refused, as it would have no effect. */
const constraintKeywords = (type: ClaimType): Joi.PartialSchemaMap<ClaimConstraints> => {
    switch (type) {
        case 'string':
            return {
                pattern: patternSchema,
                minLength: lengthSchema,
                maxLength: lengthSchema.when('minLength', { is: Joi.number().required(), then: Joi.number().min(Joi.ref('minLength')) }),
                format: Joi.string().valid(...CLAIM_FORMATS),
                enum: enumSchema(Joi.string().strict())
            };
        case 'number':
        case 'integer': {
            const number = type === 'integer' ? Joi.number().integer().strict() : Joi.number().strict();
            return {
                minimum: Joi.number().strict(),
                maximum: Joi.number().strict().when('minimum', { is: Joi.number().required(), then: Joi.number().min(Joi.ref('minimum')) }),
                enum: enumSchema(number)
            };
        }
        case 'boolean':
            return { enum: enumSchema(Joi.boolean().strict(), 2) };
        default:
            return {};
    }
};

const constraintsFor = (type: ClaimType) => {
    const keys = constraintKeywords(type);
    const supported = Object.keys(keys);
    return Joi.object<ClaimConstraints>(keys).messages({
        'object.unknown': `{{#label}} is not a constraint of ${type} fields (${supported.length ? `supported: ${supported.join(', ')}` : 'they take none'})`
    });
};

const claimDisplaySchema = Joi.object<ClaimDisplay, true>({
    locale: Joi.string().min(1).max(35).required(),
    name: Joi.string().min(1).max(255).required(),
    description: text
}).label('ClaimDisplay');

const sameJson = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

/** Sibling fields naming the same path: the second one could never be told apart from the first. */
const uniquePaths = (a: ClaimField, b: ClaimField): boolean => !!a && !!b && a.path !== undefined && sameJson(a.path, b.path);

const claimPathSchema = Joi.array().items(Joi.string().min(1).max(255), Joi.number().integer().min(0), Joi.valid(null)).min(1).max(32)
    .allow(null).description('Path in the credential payload; a null element stands for every element of an array');

const DEFAULT_BREAKS_RULES = 'claimField.defaultBreaksRules';

export const claimFieldSchema: Joi.ObjectSchema<ClaimField> = Joi.object<ClaimField, true>({
    path: claimPathSchema.required(),
    type: Joi.string().valid(...CLAIM_TYPES).required(),
    // Strict: a default of the wrong type would only surface when a credential is issued.
    defaultValue: Joi.when('type', {
        switch: [
            { is: 'string', then: Joi.string().strict() },
            { is: 'number', then: Joi.number().strict() },
            { is: 'integer', then: Joi.number().integer().strict() },
            { is: 'boolean', then: Joi.boolean().strict() },
            { is: 'object', then: Joi.object().unknown(true) },
            { is: 'array', then: Joi.array() }
        ],
        otherwise: Joi.any()
    }).allow(null).description('Value used when none is supplied at issuance; of the field\'s type'),
    mandatory: Joi.boolean().default(false).description('Required at issuance'),
    disclosable: Joi.boolean().default(false).description('Selectively disclosable'),
    namespace: Joi.string().min(1).max(255)
        .description('mso_mdoc only. Default: the first segment of a [namespace, element] path, otherwise the docType'),
    display: Joi.array().items(claimDisplaySchema),
    constraints: (Joi.when('type', {
        switch: CLAIM_TYPES.map((type) => ({ is: type, then: constraintsFor(type) })),
        otherwise: Joi.object()
    // Typed as the object every branch is.
    }) as unknown as Joi.ObjectSchema<ClaimConstraints>).description('Rules a value must keep at issuance. string: pattern, minLength, maxLength, format (date, date-time, uri, email), enum; number and integer: minimum, maximum, enum; boolean: enum; object and array: none'),
    children: Joi.array().items(Joi.link('#ClaimField')).unique(uniquePaths)
        .when('type', { not: Joi.valid('object', 'array'), then: Joi.forbidden() })
        .messages({ 'any.unknown': '{{#label}} is only allowed on object and array fields', 'array.unique': '{{#label}} repeats the path of entry {{#dupePos}}' })
        .description('Nested definitions of an object or array field; paths relative to the parent\'s, or repeating it in full')
}).custom((field: ClaimField, helpers) => {
    // A default that breaks the field's own rules would fail every credential request that relies on it.
    const reason = field.defaultValue === undefined || field.defaultValue === null || !field.constraints
        ? undefined
        : claimValueViolation(field.defaultValue, field.type, field.constraints);
    // Named by path: this object's label is its model name in the API docs.
    const name = [...helpers.state.path ?? [], 'defaultValue'].reduce<string>((label, segment) => (typeof segment === 'number' ? `${label}[${segment}]` : label ? `${label}.${segment}` : String(segment)), '');
    return reason ? helpers.error(DEFAULT_BREAKS_RULES, { reason, name }, stateAt(helpers, 'defaultValue')) : field;
}).messages({ [DEFAULT_BREAKS_RULES]: '"{#name}" {#reason}' }).id('ClaimField').label('ClaimField');

const MDOC_PATH = 'credentialConfig.mdocPath';
const MDOC_NAMESPACE = 'credentialConfig.mdocNamespace';
const MDOC_DUPLICATE = 'credentialConfig.mdocDuplicate';

/**
 * mso_mdoc top-level fields name a data element: `[namespace, element]`, or `[element]` in the field's namespace,
 * else the docType. Two spellings of the same element are duplicates too.
 */
const checkMdocFields = (fields: ClaimField[], helpers: Joi.CustomHelpers): ClaimField[] | Joi.ErrorReport => {
    const root = helpers.state.ancestors?.[0] as Partial<CredentialConfig> | undefined;
    if (root?.config?.format !== 'mso_mdoc' || !Array.isArray(fields)) {
        return fields;
    }
    const errors = errorsArray(helpers);
    const seen = new Map<string, number>();
    fields.forEach((field: Partial<ClaimField> | null, i) => {
        // Entries that are not objects have their own error already.
        if (!field || typeof field !== 'object') {
            return;
        }
        const path = field.path;
        if (!Array.isArray(path) || path.length < 1 || path.length > 2 || !path.every((s) => typeof s === 'string' && s.length > 0)) {
            errors.push(helpers.error(MDOC_PATH, {}, stateAt(helpers, i, 'path')));
            return;
        }
        if (path.length === 2 && field.namespace !== undefined && field.namespace !== path[0]) {
            errors.push(helpers.error(MDOC_NAMESPACE, {}, stateAt(helpers, i, 'namespace')));
            return;
        }
        const namespace = path.length === 2 ? path[0] : field.namespace ?? root.config?.docType;
        const key = JSON.stringify([namespace, path[path.length - 1]]);
        const first = seen.get(key);
        if (first === undefined) {
            seen.set(key, i);
        }
        // Identical paths are already reported by unique().
        else if (!sameJson(fields[first]?.path, path)) {
            errors.push(helpers.error(MDOC_DUPLICATE, { dupePos: first }, stateAt(helpers, i, 'path')));
        }
    });
    // An array of reports is how a custom rule returns more than one error.
    return errors.length ? errors as unknown as Joi.ErrorReport : fields;
};

const SD_JWT_ISSUER_CLAIM = 'credentialConfig.sdJwtIssuerClaim';

/** Top-level claims of an SD-JWT VC that the issuer sets itself (or that hold its disclosures): no field may name one. */
const SD_JWT_ISSUER_CLAIMS = new Set(['iss', 'vct', 'vct#integrity', 'iat', 'nbf', 'exp', 'cnf', 'status', '_sd', '_sd_alg']);

/**
 * An SD-JWT VC field at one of SD_JWT_ISSUER_CLAIMS would be overwritten by the issuer's own claim or, disclosable,
 * make every issuance fail (a protected claim cannot be a disclosure): refused when the configuration is stored.
 */
const checkSdJwtFields = (fields: ClaimField[], helpers: Joi.CustomHelpers): ClaimField[] | Joi.ErrorReport => {
    const root = helpers.state.ancestors?.[0] as Partial<CredentialConfig> | undefined;
    if (root?.config?.format === 'mso_mdoc' || !Array.isArray(fields)) {
        return fields;
    }
    const errors = errorsArray(helpers);
    fields.forEach((field: Partial<ClaimField> | null, i) => {
        const name = Array.isArray(field?.path) ? field.path[0] : undefined;
        if (typeof name === 'string' && SD_JWT_ISSUER_CLAIMS.has(name)) {
            errors.push(helpers.error(SD_JWT_ISSUER_CLAIM, { claim: name }, stateAt(helpers, i, 'path')));
        }
    });
    return errors.length ? errors as unknown as Joi.ErrorReport : fields;
};

const vctMetadataKeys = {
    vct: Joi.string().min(1).max(2048),
    name: Joi.string().max(255),
    description: text,
    extends: Joi.string().max(2048),
    'extends#integrity': Joi.string().max(512),
    schema_uri: Joi.string().max(2048),
    'schema_uri#integrity': Joi.string().max(512)
};
const vctMetadataSchema = Joi.object<VctMetadata, true>(vctMetadataKeys).label('VctMetadata');
const vctString = Joi.string().min(1).max(2048);

const statusConfigSchema = Joi.object<CredentialStatusConfig, true>({
    // Two switches for one thing must not say different things.
    enabled: Joi.boolean().required().custom((enabled: boolean, helpers) => {
        const statusManagement = (helpers.state.ancestors?.[1] as Partial<CredentialConfig> | undefined)?.statusManagement;
        return typeof statusManagement === 'boolean' && enabled !== statusManagement ? helpers.error('credentialConfig.statusDisagrees') : enabled;
    }).messages({ 'credentialConfig.statusDisagrees': '{{#label}} must equal statusManagement' })
        .description('Enables status management; must equal statusManagement when both are given. Needs the status plugin'),
    // No default here: an absent value falls back to the tenant's statusListConfig.bits before 1.
    bits: Joi.number().valid(...STATUS_BITS).description('Bits per status entry: 1, 2, 4 or 8. Default: the tenant default, else 1'),
    credentialConfigurationBound: Joi.boolean().default(false)
        .description('true: dedicated status lists for this configuration; false: lists shared in the tenant')
}).label('CredentialStatusConfig');

const activeCredentialsSchema = Joi.object<ActiveCredentialsPolicy, true>({
    enabled: Joi.boolean().required().description('A subject has at most one active credential of this configuration'),
    tracking: Joi.string().valid('internal').description('Only internal: pseudonymous, issuer-side')
}).label('ActiveCredentialsPolicy');

export const iaeActionSchema = Joi.alternatives().conditional('.type', {
    switch: [
        {
            is: 'openid4vp_presentation',
            then: Joi.object<Openid4vpPresentationAction, true>({
                type: Joi.string().valid('openid4vp_presentation').required(),
                presentationConfigId: Joi.string().min(1).max(255).required(),
                label: Joi.string().max(255)
            }).label('Openid4vpPresentationAction')
        },
        {
            is: 'redirect_to_web',
            then: Joi.object<RedirectToWebAction, true>({
                type: Joi.string().valid('redirect_to_web').required(),
                url: httpUrl.required().description('Stored, not sent to the wallet'),
                label: Joi.string().max(255),
                description: text.description('Stored, not sent to the wallet'),
                callbackUrl: httpUrl.description('Stored, not sent to the wallet')
            }).label('RedirectToWebAction')
        }
    ],
    otherwise: Joi.object({ type: Joi.string().valid('openid4vp_presentation', 'redirect_to_web').required() }).unknown(true)
}).label('IaeAction');

const publicJwkSchema = publicJwkOnly('PublicJwk').keys({ kty: Joi.string().min(1).required() });

const trustedAuthoritySchema = Joi.object<TrustedAuthority, true>({
    trustListId: Joi.string().max(255),
    frameworkType: Joi.string().valid(...FRAMEWORK_TYPES),
    value: Joi.string().max(4096).description('Framework-specific authority value'),
    verificationMethod: Joi.alternatives().try(Joi.string().min(1).max(4096), publicJwkSchema)
        .description('A reference (DID URL, key id) or the authority\'s public JWK')
}).label('TrustedAuthority');

export const schemaMetaSchema = Joi.object<SchemaMeta, true>({
    version: Joi.string().min(1).max(64).required(),
    attestationLoS: Joi.string().valid(...ATTESTATION_LOS).required(),
    bindingType: Joi.string().valid(...BINDING_TYPES).required(),
    id: Joi.string().max(255),
    name: Joi.string().max(255),
    rulebookURI: Joi.string().max(2048),
    schemaURIs: Joi.array().items(Joi.object<SchemaUriEntry, true>({
        credentialConfigId: Joi.string().max(255),
        format: Joi.string().max(64),
        meta: Joi.object().unknown(true),
        uri: Joi.string().max(2048)
    }).label('SchemaUri')),
    trustedAuthorities: Joi.array().items(trustedAuthoritySchema)
}).label('SchemaMeta');

const dcqlObjects = Joi.array().items(Joi.object().unknown(true));

export const embeddedDisclosurePolicySchema = Joi.alternatives().conditional('.policy', {
    switch: [
        {
            is: 'attestationBased',
            then: Joi.object({
                policy: Joi.string().valid('attestationBased').required(),
                values: Joi.array().items(Joi.object<AttestationRequirement, true>({
                    // As in a DCQL query, a requirement names at least one credential.
                    credentials: dcqlObjects.min(1).required(),
                    claims: dcqlObjects,
                    credential_sets: dcqlObjects
                }).label('AttestationRequirement')).required()
            }).label('AttestationBasedPolicy')
        },
        {
            is: 'allowList',
            then: Joi.object({ policy: Joi.string().valid('allowList').required(), values: Joi.array().items(Joi.string().min(1)).required() }).label('AllowListPolicy')
        },
        {
            is: 'rootOfTrust',
            then: Joi.object({ policy: Joi.string().valid('rootOfTrust').required(), values: Joi.string().min(1).required() }).label('RootOfTrustPolicy')
        },
        { is: 'none', then: Joi.object({ policy: Joi.string().valid('none').required() }).label('NoPolicy') }
    ],
    otherwise: Joi.object({ policy: Joi.string().valid('attestationBased', 'allowList', 'rootOfTrust', 'none').required() }).unknown(true)
}).label('EmbeddedDisclosurePolicy');

export const credentialConfigSchema = Joi.object<CredentialConfig, true>({
    id: resourceId('credential configuration id').required(),
    description: text.allow(null).description('For operators'),
    config: credentialMetadataConfigSchema.required(),
    fields: Joi.array().items(claimFieldSchema).unique(uniquePaths).required()
        .custom(checkMdocFields, 'mso_mdoc claim paths')
        .custom(checkSdJwtFields, 'SD-JWT VC claim paths')
        .messages({
            [SD_JWT_ISSUER_CLAIM]: '{{#label}} names {{#claim}}, a claim the issuer sets itself in an SD-JWT VC',
            'array.unique': '{{#label}} repeats the path of entry {{#dupePos}}',
            [MDOC_PATH]: '{{#label}} must be [namespace, element] or [element] for mso_mdoc',
            [MDOC_NAMESPACE]: '{{#label}} differs from the namespace in path',
            [MDOC_DUPLICATE]: '{{#label}} names the same mso_mdoc element as entry {{#dupePos}}'
        }),
    attributeProviderId: Joi.string().max(255).allow(null).description('Attribute provider that resolves claim values'),
    webhookEndpointId: Joi.string().max(255).allow(null)
        .description('Stored but unused: notifications use the webhookEndpointId of the credential offer'),
    vct: Joi.when('config.format', {
        switch: [
            {
                is: 'dc+sd-jwt',
                then: Joi.alternatives().try(vctString, vctMetadataSchema.keys({ vct: vctMetadataKeys.vct.required() })).required()
                    .messages({ 'any.required': '{{#label}} is required for dc+sd-jwt' })
            },
            // An mdoc has its docType: a vct would be stored without any effect.
            { is: 'mso_mdoc', then: Joi.valid(null).messages({ 'any.only': '{{#label}} applies to dc+sd-jwt only (mso_mdoc uses config.docType)' }) }
        ]
    }).description('SD-JWT VC type: a string, or type metadata published at {tenant}/vct/{id} (the credential carries vct#integrity of it); required for dc+sd-jwt, only null for mso_mdoc'),
    // An mdoc cannot be issued without a device key: false would only fail every credential request.
    keyBinding: Joi.boolean().default(true)
        .when('config.format', { is: 'mso_mdoc', then: Joi.invalid(false).messages({ 'any.invalid': '{{#label}} must be true for mso_mdoc: an mdoc always carries the device key' }) })
        // Unbound credentials take no proofs, so a key attestation requirement could never apply.
        .when('config.keyAttestationsRequired', { is: Joi.exist(), then: Joi.invalid(false).messages({ 'any.invalid': '{{#label}} must be true with config.keyAttestationsRequired: an unbound credential has no key to attest' }) })
        .description('The credential carries the holder key (cnf.jwk / deviceKey). Default true; always true for mso_mdoc'),
    keyChainId: Joi.string().max(255).description('Attestation key chain that signs the credentials'),
    statusManagement: Joi.boolean()
        .description('Issued credentials carry a status list entry (token status lists). Refused unless the deployment loads the status plugin'),
    status: statusConfigSchema,
    activeCredentials: activeCredentialsSchema.allow(null)
        .when('statusManagement', { not: Joi.valid(true).required(), then: Joi.valid(null) })
        .messages({ 'any.only': '"activeCredentials" requires statusManagement true' }),
    iaeActions: Joi.array().items(iaeActionSchema).allow(null).description('Steps of the interactive authorization endpoint'),
    // A pattern, not valid(): a value of an allowed set would skip the refusal.
    sdJwtTrustFormat: notAvailableYet(Joi.string().pattern(/^(?:x5c|federation)$/).messages({ 'string.pattern.base': '{{#label}} must be one of [x5c, federation]' }), 'OpenID Federation trust for SD-JWT VCs is not available yet: only x5c', (format) => format === 'federation')
        .allow(null).default('x5c')
        .description('x5c (default): the X.509 chain in the header; federation (OpenID Federation) is refused until it is built'),
    lifeTime: Joi.number().integer().min(1).description('Credential lifetime in seconds'),
    // An attestation scheme's catalogue entry (ARF): no OpenID4VCI or SD-JWT VC member carries it.
    schemaMeta: notAvailableYet(schemaMetaSchema, 'schema metadata is not available yet: neither the issuer metadata nor the credential carries it')
        .allow(null).description('Refused until it is published; null is accepted'),
    // Only "no policy" has the effect it asks for: the issuer has no way to tell relying parties of a policy.
    embeddedDisclosurePolicy: notAvailableYet(embeddedDisclosurePolicySchema, 'embedded disclosure policies are not available yet: only the policy none', (policy?: EmbeddedDisclosurePolicy) => policy !== undefined && policy.policy !== 'none')
        .allow(null).description('Only {policy: none} (or null) until disclosure policies are published')
}).label('CredentialConfig');

export const credentialConfigKind: ResourceKind<CredentialConfig> = {
    kind: 'CredentialConfig',
    file: 'CredentialConfigFile',
    version: 1,
    schema: credentialConfigSchema,
    dependsOn: ['Tenant', 'KeyChain', 'AttributeProvider', 'WebhookEndpoint'],
    references: { keyChainId: 'KeyChain', attributeProviderId: 'AttributeProvider', webhookEndpointId: 'WebhookEndpoint' },
    id: (spec) => spec.id,
    location: { dir: 'issuance/credentials' },
    async check(scope, spec) {
        // ISO 18013-5 requires the issuer certificate to name a country.
        if (spec.config.format !== 'mso_mdoc' || !spec.keyChainId || !scope.tenantId) {
            return;
        }
        const keyChains = await tableResourceStore.get({ ...scope, kind: { kind: 'KeyChain' } as ResourceKind }, spec.keyChainId);
        if (keyChains && !(keyChains.spec as KeyChain).subject?.country) {
            throw new ValidationError(`Key chain ${spec.keyChainId} has no country in its subject, which an mso_mdoc issuer certificate needs (ISO 18013-5)`, [{ path: 'keyChainId', message: 'the key chain subject needs a country' }]);
        }
    }
};
