import Joi from 'joi';

/** The session flow logger: off, or on with what it keeps in session_logs. */
export interface SessionLogOptions {
    enabled: boolean;
    store: 'off' | 'errors' | 'all' | 'verbose';
}

/** Defaults of tenants without a session configuration, and how often the maintenance job runs. */
export interface SessionsOptions {
    /** Seconds a session lives (and is retained after it ends). */
    ttl: number;
    cleanupMode: 'full' | 'anonymize';
    /** Seconds between maintenance runs. */
    tidyUpInterval: number;
    sessionLog: SessionLogOptions;
}

export const sessionsOptionsSchema = Joi.object<SessionsOptions, true>({
    ttl: Joi.number().integer().min(1).default(86400),
    cleanupMode: Joi.string().valid('full', 'anonymize').default('full'),
    tidyUpInterval: Joi.number().integer().min(1).default(3600),
    sessionLog: Joi.object<SessionLogOptions, true>({
        enabled: Joi.boolean().default(false),
        store: Joi.string().valid('off', 'errors', 'all', 'verbose').default('off')
    }).default()
});
