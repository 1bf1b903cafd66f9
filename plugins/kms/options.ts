import Joi from 'joi';
import { configImportOptionsSchema, type ConfigImportOptions } from '../../lib/config-import/options';

export interface KmsOptions {
    /** The service's public address: its host name is the default subject name of generated certificates. */
    publicUrl: string;
    /** Milliseconds every KMS provider call may take before it answers 503. */
    timeoutMs: number;
    /** The config folder whose kms.json holds the global providers, with its placeholder rules. */
    configImport: ConfigImportOptions;
}

export const kmsOptionsSchema = Joi.object<KmsOptions, true>({
    publicUrl: Joi.string().uri({ scheme: ['http', 'https'] }).required(),
    timeoutMs: Joi.number().integer().min(100).max(600_000).default(10_000),
    configImport: configImportOptionsSchema.default()
});
