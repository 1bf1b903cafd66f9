import Os from 'node:os';
import Path from 'node:path';
import Joi from 'joi';
import type { DatabaseConfig } from '../lib/db/config';
import type { LogSettings } from '../lib/logging';
import { coreOptionsSchema, type DatabaseOptions, type ServiceSecrets } from '../plugins/core/options';
import { kmsOptionsSchema, type KmsOptions } from '../plugins/kms/options';
import { oauth2OptionsSchema, type OAuth2Options } from '../plugins/oauth2/options';
import { observabilityOptionsSchema, type ObservabilityOptions } from '../plugins/observability/options';
import { sessionsOptionsSchema, type SessionsOptions } from '../plugins/sessions/options';
import { tenancyOptionsSchema, type AuditRetention } from '../plugins/tenancy/options';
import type { ConfigImportOptions } from '../lib/config-import/options';
import type { OutboundPolicy } from '../lib/outbound';
import { packageVersion } from '../lib/package-info';

/**
 * The one place that reads the process environment: the contractual variable names, validated and mapped into the
 * options of the plugins (manifests/default.ts passes each plugin its group). It lives beside the manifests, not in
 * lib, because it knows the plugins' option schemas and lib never imports a plugin. Booleans accept
 * true/false/1/0/yes/no/on/off so container platforms can pass them as they like.
 */

const bool = (fallback: boolean) => Joi.boolean().truthy('1', 'yes', 'on').falsy('0', 'no', 'off').default(fallback);
// A variable that sets one plugin option takes that option's rule and default: declared once, in the plugin.
const core = (path: string) => coreOptionsSchema.extract(path);
const oauth2 = (path: string) => oauth2OptionsSchema.extract(path);
const sessions = (path: string) => sessionsOptionsSchema.extract(path);

const encryptionKey = core('secrets.encryptionKey');

const envSchema = Joi.object({
    NODE_ENV: Joi.string().valid('development', 'production', 'test').default('production'),
    PORT: Joi.number().port().default(3000),
    HOST: Joi.string().default('0.0.0.0'),
    PUBLIC_URL: Joi.string().uri({ scheme: ['http', 'https'] }).pattern(/[^/]$/, 'no trailing slash')
        .when('NODE_ENV', { is: 'development', then: Joi.optional().default('http://localhost:3000'), otherwise: Joi.required() }),
    FOLDER: Joi.string().default(() => Path.resolve(process.cwd(), '../../tmp')),
    WORKER: Joi.string().valid('on', 'off').default('on'),
    // Server processes of `hallmark start` (node:cluster): every core by default; tests (NODE_ENV=test) use one.
    WORKERS: Joi.number().integer().min(1).max(256)
        .when('NODE_ENV', { is: 'test', then: Joi.number().default(1), otherwise: Joi.number().default(() => Os.availableParallelism()) }),
    HALLMARK_MANIFEST: Joi.string(),

    DB_TYPE: Joi.string().valid('sqlite', 'postgres').default('sqlite'),
    DB_HOST: Joi.string().when('DB_TYPE', { is: 'postgres', then: Joi.required() }),
    DB_PORT: Joi.number().port().when('DB_TYPE', { is: 'postgres', then: Joi.required() }),
    DB_USERNAME: Joi.string().when('DB_TYPE', { is: 'postgres', then: Joi.required() }),
    DB_PASSWORD: Joi.string().allow('').when('DB_TYPE', { is: 'postgres', then: Joi.required() }),
    DB_DATABASE: Joi.string().when('DB_TYPE', { is: 'postgres', then: Joi.required() }),
    DB_SSL: bool(false),
    DB_SSL_REJECT_UNAUTHORIZED: bool(true),
    DB_SSL_CA_PATH: Joi.string(),
    DB_SSL_CERT_PATH: Joi.string(),
    DB_SSL_KEY_PATH: Joi.string(),
    DB_SSL_KEY_PASSPHRASE: Joi.string(),
    DB_MIGRATIONS_RUN: bool(true),
    DB_SYNCHRONIZE: bool(false),

    MASTER_SECRET: core('secrets.masterSecret'),
    ENCRYPTION_KEY: encryptionKey,
    ENCRYPTION_KEY_PREVIOUS: Joi.string().custom((value: string, helpers) => {
        for (const key of value.split(',')) {
            if (encryptionKey.validate(key.trim()).error) {
                return helpers.message({ custom: '"ENCRYPTION_KEY_PREVIOUS" must be a comma-separated list of 32-byte keys (hex or base64)' });
            }
        }
        return value;
    }),
    AUTH_CLIENT_ID: oauth2('clientId'),
    AUTH_CLIENT_SECRET: oauth2('clientSecret'),
    AUTH_TOKEN_TTL: oauth2('tokenTtl'),
    OIDC: Joi.string().uri({ scheme: ['http', 'https'] }),
    OIDC_INTERNAL_ISSUER_URL: Joi.string().uri({ scheme: ['http', 'https'] }),
    OIDC_CLIENT_ID: Joi.string(),
    OIDC_CLIENT_SECRET: Joi.string(),
    OIDC_AUDIENCE: Joi.string(),
    OIDC_TENANT_CLAIM: oauth2('oidc.tenantClaim'),

    KMS_TIMEOUT_MS: kmsOptionsSchema.extract('timeoutMs'),
    SESSION_TTL: sessions('ttl'),
    SESSION_CLEANUP_MODE: sessions('cleanupMode'),
    SESSION_TIDY_UP_INTERVAL: sessions('tidyUpInterval'),
    ISSUER_MULTI_CONSUMPTION: bool(false),
    OUTBOUND_URL_ALLOW_HTTP: bool(false),
    OUTBOUND_URL_ALLOW_PRIVATE_NETWORK: bool(false),
    OUTBOUND_URL_ALLOWED_HOSTS: Joi.string().allow(''),
    CONFIG_FOLDER: Joi.string(),
    CONFIG_VARIABLE_STRICT: Joi.string().valid('skip', 'abort', 'true', 'ignore', 'false').default('skip'),

    LOG_LEVEL: Joi.string().valid('debug', 'info', 'warn', 'error').default('debug'),
    LOG_ENABLE_HTTP_LOGGER: bool(false),
    LOG_HTTP_RESPONSE_BODY: bool(false),
    LOG_HTTP_RESPONSE_BODY_MAX_LENGTH: core('httpLog.responseBodyMaxLength'),
    LOG_REDACT_SENSITIVE_DATA: bool(true),
    LOG_ENABLE_SESSION_LOGGER: bool(false),
    LOG_SESSION_STORE: sessions('sessionLog.store'),
    LOG_TO_FILE: bool(false),
    LOG_FILE_PATH: Joi.string().default('./logs/session.log'),
    AUDIT_LOG_RETENTION_DAYS: tenancyOptionsSchema.extract('audit.retentionDays'),
    AUDIT_LOG_MAX_ENTRIES_PER_TENANT: tenancyOptionsSchema.extract('audit.maxEntriesPerTenant'),
    OTEL_SDK_DISABLED: bool(false),
    OTEL_EXPORTER_OTLP_ENDPOINT: observabilityOptionsSchema.extract('otlpEndpoint'),
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: observabilityOptionsSchema.extract('otlpTracesEndpoint')
})
    .custom((env, helpers) => {
        if (!env.MASTER_SECRET && !env.ENCRYPTION_KEY) {
            return helpers.message({ custom: '"MASTER_SECRET" is required (at least 32 characters) unless ENCRYPTION_KEY is set' });
        }
        if (!env.OIDC && (!env.MASTER_SECRET || !env.AUTH_CLIENT_ID || !env.AUTH_CLIENT_SECRET)) {
            return helpers.message({ custom: '"MASTER_SECRET", "AUTH_CLIENT_ID" and "AUTH_CLIENT_SECRET" are required by the integrated OAuth2 server (OIDC unset)' });
        }
        return env;
    })
    .unknown(true);

/**
 * The parsed environment. Its groups are the options of the plugins they configure (see manifests/default.ts, which
 * hands them on), so each shape is declared once, next to the joi schema of its plugin.
 */
export interface Config {
    env: 'development' | 'production' | 'test';
    version: string;
    port: number;
    host: string;
    publicUrl: string;
    folder: string;
    /** Whether this process runs the scheduled jobs (WORKER). */
    worker: boolean;
    /** Server processes `hallmark start` runs (WORKERS): one serves in-process, more run as a node:cluster. */
    workers: number;
    db: DatabaseOptions;
    /** Module name or path of the manifest to start; the default manifest when absent. */
    manifest?: string;
    secrets: ServiceSecrets;
    auth: Omit<OAuth2Options, 'publicUrl'> & { tenantClaim: string };
    sessions: Omit<SessionsOptions, 'sessionLog'> & { issuerMultiConsumption: boolean };
    kms: Pick<KmsOptions, 'timeoutMs'>;
    outbound: OutboundPolicy;
    configImport: ConfigImportOptions;
    log: LogSettings;
    audit: AuditRetention;
    /** Traces go to an OTLP/HTTP collector when either OTEL_EXPORTER_OTLP_* endpoint is set. */
    otel: Pick<ObservabilityOptions, 'otlpEndpoint' | 'otlpTracesEndpoint'> & { disabled: boolean };
}

export class ConfigError extends Error {
    constructor(readonly problems: string[]) {
        super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
        this.name = 'ConfigError';
    }
}


export const loadConfig = (source: Record<string, string | undefined> = process.env): Config => {
    // Empty strings count as unset, as container platforms often pass VAR= for "not set".
    const raw = Object.fromEntries(Object.entries(source).filter(([, v]) => v !== undefined && v !== ''));
    const { value: env, error } = envSchema.validate(raw, { abortEarly: false, convert: true });
    if (error) {
        throw new ConfigError(error.details.map((d) => {
            const variable = d.path.length ? String(d.path[0]) : 'environment';
            return `${variable}: ${d.message}`;
        }));
    }

    const db: DatabaseConfig = env.DB_TYPE === 'postgres'
        ? {
            type: 'postgres',
            host: env.DB_HOST,
            port: env.DB_PORT,
            user: env.DB_USERNAME,
            password: env.DB_PASSWORD ?? '',
            database: env.DB_DATABASE,
            ssl: env.DB_SSL
                ? {
                    rejectUnauthorized: env.DB_SSL_REJECT_UNAUTHORIZED,
                    caPath: env.DB_SSL_CA_PATH,
                    certPath: env.DB_SSL_CERT_PATH,
                    keyPath: env.DB_SSL_KEY_PATH,
                    passphrase: env.DB_SSL_KEY_PASSPHRASE
                }
                : undefined
        }
        : { type: 'sqlite', filename: Path.join(Path.resolve(env.FOLDER), 'service.db') };

    const strict = env.CONFIG_VARIABLE_STRICT as string;
    return {
        env: env.NODE_ENV,
        version: packageVersion(),
        port: env.PORT,
        host: env.HOST,
        publicUrl: env.PUBLIC_URL,
        folder: Path.resolve(env.FOLDER),
        worker: env.WORKER === 'on',
        workers: env.WORKERS,
        db: { ...db, migrationsRun: env.DB_MIGRATIONS_RUN, synchronize: env.DB_SYNCHRONIZE },
        manifest: env.HALLMARK_MANIFEST,
        secrets: {
            masterSecret: env.MASTER_SECRET,
            encryptionKey: env.ENCRYPTION_KEY,
            previousEncryptionKeys: (env.ENCRYPTION_KEY_PREVIOUS ?? '').split(',').map((k: string) => k.trim()).filter(Boolean)
        },
        auth: {
            clientId: env.AUTH_CLIENT_ID,
            clientSecret: env.AUTH_CLIENT_SECRET,
            tokenTtl: env.AUTH_TOKEN_TTL,
            tenantClaim: env.OIDC_TENANT_CLAIM,
            oidc: env.OIDC
                ? {
                    issuer: env.OIDC,
                    internalIssuer: env.OIDC_INTERNAL_ISSUER_URL,
                    clientId: env.OIDC_CLIENT_ID,
                    clientSecret: env.OIDC_CLIENT_SECRET,
                    audience: env.OIDC_AUDIENCE,
                    tenantClaim: env.OIDC_TENANT_CLAIM
                }
                : undefined
        },
        sessions: {
            ttl: env.SESSION_TTL,
            cleanupMode: env.SESSION_CLEANUP_MODE,
            tidyUpInterval: env.SESSION_TIDY_UP_INTERVAL,
            issuerMultiConsumption: env.ISSUER_MULTI_CONSUMPTION
        },
        kms: { timeoutMs: env.KMS_TIMEOUT_MS },
        outbound: {
            allowHttp: env.OUTBOUND_URL_ALLOW_HTTP,
            allowPrivateNetwork: env.OUTBOUND_URL_ALLOW_PRIVATE_NETWORK,
            allowedHosts: (env.OUTBOUND_URL_ALLOWED_HOSTS ?? '').split(',').map((h: string) => h.trim().toLowerCase()).filter(Boolean)
        },
        configImport: {
            folder: env.CONFIG_FOLDER ? Path.resolve(env.CONFIG_FOLDER) : undefined,
            // skip, abort and true all fail the tenant whose files hold the placeholder; the other tenants continue.
            unresolvedPlaceholders: strict === 'ignore' || strict === 'false' ? 'warn' : 'fail-tenant',
            variables: Object.freeze({ ...source })
        },
        log: {
            level: env.LOG_LEVEL,
            http: env.LOG_ENABLE_HTTP_LOGGER,
            httpResponseBody: env.LOG_HTTP_RESPONSE_BODY,
            httpResponseBodyMaxLength: env.LOG_HTTP_RESPONSE_BODY_MAX_LENGTH,
            redact: env.LOG_REDACT_SENSITIVE_DATA,
            session: env.LOG_ENABLE_SESSION_LOGGER,
            sessionStore: env.LOG_SESSION_STORE,
            toFile: env.LOG_TO_FILE,
            filePath: Path.resolve(env.LOG_FILE_PATH)
        },
        audit: { retentionDays: env.AUDIT_LOG_RETENTION_DAYS, maxEntriesPerTenant: env.AUDIT_LOG_MAX_ENTRIES_PER_TENANT },
        otel: { disabled: env.OTEL_SDK_DISABLED, otlpEndpoint: env.OTEL_EXPORTER_OTLP_ENDPOINT, otlpTracesEndpoint: env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT }
    };
};
