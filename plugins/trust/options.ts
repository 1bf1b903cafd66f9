import Joi from 'joi';

export interface TrustOptions {
    /** Seconds between runs of the refresh jobs of remote trust lists and registration certificates. Default 60. */
    refreshIntervalSeconds?: number;
    /** Whole fetch of one remote trust list, in milliseconds; a slower list server makes the list unavailable. Default 10000. */
    fetchTimeoutMs?: number;
}

export const trustOptionsSchema = Joi.object<TrustOptions, true>({
    refreshIntervalSeconds: Joi.number().integer().min(1).default(60),
    fetchTimeoutMs: Joi.number().integer().min(1).default(10_000)
});
