import Joi from 'joi';

export interface Iso18013Options {
    /** The service's public address: the response endpoint is `<publicUrl>/presentations/{session}/iso-18013-7`. */
    publicUrl: string;
}

export const iso18013OptionsSchema = Joi.object<Iso18013Options, true>({
    publicUrl: Joi.string().uri({ scheme: ['http', 'https'] }).required()
});
