import Joi from 'joi';
import type { Variables } from '../../lib/config-import/placeholders';
import { SPEC_ZIP_LIMITS, type ZipLimits } from './archive';

export interface BundlesOptions {
    /** What `${VAR}` placeholders of imported documents resolve to (the process environment in the default manifest). */
    variables: Variables;
    /** Spec 8: 50 MiB compressed, 100 MiB expanded, 10,000 entries; lower values suit small hosts and tests. */
    zipLimits: ZipLimits;
}

export const bundlesOptionsSchema = Joi.object<BundlesOptions, true>({
    variables: Joi.object().pattern(Joi.string(), Joi.string().allow('')).default({}),
    zipLimits: Joi.object<ZipLimits, true>({
        compressedBytes: Joi.number().integer().min(1).max(SPEC_ZIP_LIMITS.compressedBytes).default(SPEC_ZIP_LIMITS.compressedBytes),
        expandedBytes: Joi.number().integer().min(1).max(SPEC_ZIP_LIMITS.expandedBytes).default(SPEC_ZIP_LIMITS.expandedBytes),
        entries: Joi.number().integer().min(1).max(SPEC_ZIP_LIMITS.entries).default(SPEC_ZIP_LIMITS.entries)
    }).default()
});
