import Joi from 'joi';
import { configImportOptionsSchema, type ConfigImportOptions } from '../../lib/config-import/options';
import type { DatabaseConfig } from '../../lib/db/config';
import type { OutboundPolicy } from '../../lib/outbound';

export type DatabaseOptions = DatabaseConfig & {
    /** Apply pending migrations at start (otherwise only warn about them). */
    migrationsRun: boolean;
    synchronize: boolean;
};

/** The service secrets: MASTER_SECRET derives every key; ENCRYPTION_KEY (and previous keys) seal columns directly. */
export interface ServiceSecrets {
    masterSecret?: string;
    encryptionKey?: string;
    previousEncryptionKeys: string[];
}

export interface HttpLogOptions {
    /** One log line per response. */
    enabled: boolean;
    /** Add the (redacted, truncated) response body to the line. */
    responseBody: boolean;
    responseBodyMaxLength: number;
    /** Redact sensitive query parameters and body fields. */
    redact: boolean;
}

/** What is truly service-wide: the database, its secrets, the outbound policy, jobs, the startup import. */
export interface CoreOptions {
    database: DatabaseOptions;
    secrets: ServiceSecrets;
    /** Every outbound URL (webhooks, attribute providers, KMS, trust lists) passes this policy; `server.outbound`. */
    outbound: OutboundPolicy;
    /** Run background jobs in this process once the server has started. */
    worker: boolean;
    configImport: ConfigImportOptions;
    httpLog: HttpLogOptions;
}

const ssl = Joi.object({
    rejectUnauthorized: Joi.boolean().default(true),
    caPath: Joi.string(),
    certPath: Joi.string(),
    keyPath: Joi.string(),
    passphrase: Joi.string()
});

const encryptionKey = Joi.string().pattern(/^(?:[0-9a-fA-F]{64}|[A-Za-z0-9+/_-]{43}=?)$/, '32 bytes as hex or base64');

const migrations = {
    migrationsRun: Joi.boolean().default(true),
    synchronize: Joi.boolean().default(false)
};

const databaseSchema = Joi.alternatives<DatabaseOptions>().conditional('.type', {
    is: 'postgres',
    then: Joi.object({
        type: Joi.string().valid('postgres').required(),
        host: Joi.string().required(),
        port: Joi.number().port().required(),
        user: Joi.string().required(),
        password: Joi.string().allow('').default(''),
        database: Joi.string().required(),
        ssl,
        ...migrations
    }),
    otherwise: Joi.object({
        type: Joi.string().valid('sqlite').required(),
        filename: Joi.string().required(),
        ...migrations
    })
});

export const coreOptionsSchema = Joi.object<CoreOptions, true>({
    database: databaseSchema.required(),
    secrets: Joi.object<ServiceSecrets, true>({
        masterSecret: Joi.string().min(32),
        encryptionKey,
        previousEncryptionKeys: Joi.array().items(encryptionKey).default([])
    }).or('masterSecret', 'encryptionKey').required(),
    outbound: Joi.object<OutboundPolicy, true>({
        allowHttp: Joi.boolean().default(false),
        allowPrivateNetwork: Joi.boolean().default(false),
        allowedHosts: Joi.array().items(Joi.string().lowercase()).default([])
    }).default(),
    worker: Joi.boolean().default(true),
    configImport: configImportOptionsSchema.default(),
    httpLog: Joi.object<HttpLogOptions, true>({
        enabled: Joi.boolean().default(false),
        responseBody: Joi.boolean().default(false),
        responseBodyMaxLength: Joi.number().integer().min(0).default(4096),
        redact: Joi.boolean().default(true)
    }).default()
});
