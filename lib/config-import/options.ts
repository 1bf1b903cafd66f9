import Joi from 'joi';
import type { Variables } from './placeholders';

/** Where the startup import reads configuration files from, and how it treats `${VAR}` placeholders in them. */
export interface ConfigImportOptions {
    /** The config folder (CONFIG_FOLDER); nothing is imported without one. */
    folder?: string;
    /** fail-tenant: a tenant whose files hold an unresolved placeholder is not imported; warn: kept as literal text. */
    unresolvedPlaceholders: 'fail-tenant' | 'warn';
    /** The values placeholders resolve to (the process environment, for the default manifest). */
    variables: Variables;
}

export const configImportOptionsSchema = Joi.object<ConfigImportOptions, true>({
    folder: Joi.string(),
    unresolvedPlaceholders: Joi.string().valid('fail-tenant', 'warn').default('fail-tenant'),
    variables: Joi.object().pattern(Joi.string(), Joi.string().allow('')).default({})
});
