import Joi from 'joi';

export interface Oid4vciOptions {
    /** The service's public address: issuer identifiers are `<publicUrl>/issuers/<tenant>`. */
    publicUrl: string;
    /** A service secret (at least 32 characters) DPoP nonces are derived from, so every replica accepts them. */
    nonceSecret: string;
    /** An offer may be fetched more than once (ISSUER_MULTI_CONSUMPTION). */
    multiConsumption: boolean;
}

export const oid4vciOptionsSchema = Joi.object<Oid4vciOptions, true>({
    publicUrl: Joi.string().uri({ scheme: ['http', 'https'] }).required(),
    nonceSecret: Joi.string().min(32).required(),
    multiConsumption: Joi.boolean().default(false)
});
