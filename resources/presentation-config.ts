import Joi from 'joi';
import { ValidationError, type ErrorDetail } from '../lib/errors';
import type { ResourceKind, StoreScope, Upgrade } from '../lib/registry/kind';
import type { JsonValue } from './credential-config';
import { keyChainKind } from './key-chain';
import { dcqlQuerySchema, type DcqlQuery } from './presentation/dcql';
import { convertFlatFields, registrationCertFlatFieldKeys, registrationCertFlatFieldMessages, registrationCertSchema, type RegistrationCert, type RegistrationCertFlatFields } from './presentation/registration-cert';
import { transactionDataSchema, type TransactionData } from './presentation/transaction-data';
import { resourceId } from './shared/custom-rules';

/*
 * Presentation configuration (spec 2.1, 2.1.1, 7.4, 9): what a verifier asks a wallet for, as a DCQL query
 * (OpenID4VP 1.0 section 6), plus transaction data, registration certificate settings and request defaults. The
 * DCQL query, the transaction data and the registration certificate each have their own file in presentation/.
 */

export const STATUS_CHECK_MODES = ['strict', 'best_effort', 'disabled'] as const;
export type StatusCheckMode = (typeof STATUS_CHECK_MODES)[number];

/** Replaced at request time by the tenant base URL `{PUBLIC_URL}/issuers/{tenant}`; stored as text. */
export const TENANT_URL_PLACEHOLDER = '<TENANT_URL>';

/** Fields shown in answers only; rejected in request bodies and documents. */
export const PRESENTATION_CONFIG_READ_ONLY_FIELDS = ['createdAt', 'updatedAt', 'registrationCertCache'] as const;

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
    /** Default x509_hash; x509_san_dns needs a DNS subjectAltName in the access certificate (contract "Presentation"). */
    clientIdPrefix?: ClientIdPrefix | null;
}

export const CLIENT_ID_PREFIXES = ['x509_hash', 'x509_san_dns'] as const;
export type ClientIdPrefix = (typeof CLIENT_ID_PREFIXES)[number];

/** Answer-only fields, named in the input type so that the schema can reject them with a clear message. */
export interface PresentationConfigReadOnlyFields {
    createdAt?: string;
    updatedAt?: string;
    registrationCertCache?: Record<string, unknown>;
}

/** What a request body or document may hold before validation turns it into a PresentationConfig. */
export interface PresentationConfigInput extends PresentationConfig, RegistrationCertFlatFields, PresentationConfigReadOnlyFields {}

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
    ...registrationCertFlatFieldKeys,
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
    clientIdPrefix: Joi.string().valid(...CLIENT_ID_PREFIXES).allow(null)
        .description('client_id prefix of requests: x509_hash (default) or x509_san_dns (the access certificate\'s first DNS SAN)'),
    createdAt: readOnly(Joi.string()),
    updatedAt: readOnly(Joi.string()),
    registrationCertCache: readOnly(Joi.object())
}).custom(convertFlatFields, 'registration certificate flat fields')
    .messages(registrationCertFlatFieldMessages)
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
