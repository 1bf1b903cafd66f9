import Joi from 'joi';

/** How long audit entries are kept; 0 keeps them forever. */
export interface AuditRetention {
    retentionDays: number;
    maxEntriesPerTenant: number;
}

export interface TenancyOptions {
    audit: AuditRetention;
}

export const tenancyOptionsSchema = Joi.object<TenancyOptions, true>({
    audit: Joi.object<AuditRetention, true>({
        retentionDays: Joi.number().integer().min(0).default(0),
        maxEntriesPerTenant: Joi.number().integer().min(0).default(0)
    }).default()
});
