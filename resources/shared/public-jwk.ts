import Joi from 'joi';

/** JWK members that carry private key material (RFC 7518 6.2.2, 6.3.2, 6.4.1). */
export const PRIVATE_JWK_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'] as const;

/**
 * A public key given in a configuration: any members but private ones, which would otherwise end up in exports
 * unredacted.
 */
export const publicJwkOnly = (label: string): Joi.ObjectSchema =>
    Joi.object(Object.fromEntries(PRIVATE_JWK_MEMBERS.map((m) => [m, Joi.forbidden()])))
        .unknown(true)
        .messages({ 'any.unknown': '{{#label}} is private key material and is not allowed' })
        .label(label);
