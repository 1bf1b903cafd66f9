import Joi from 'joi';

export interface Oid4vpOptions {
    /** The service's public address: request and response URIs are under `<publicUrl>/presentations`. */
    publicUrl: string;
}

export const oid4vpOptionsSchema = Joi.object<Oid4vpOptions, true>({
    publicUrl: Joi.string().uri({ scheme: ['http', 'https'] }).required()
});
