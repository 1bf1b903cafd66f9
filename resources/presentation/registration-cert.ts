import Joi from 'joi';
import type { PresentationConfig, PresentationConfigInput } from '../presentation-config';
import { errorAt, errorsArray } from '../shared/custom-rules';
import { versionTarget } from '../../lib/registry/schema-url';

/* The registration certificate settings of a presentation configuration, and their flat form fields (spec 2.1). */

/** Flat form fields converted into registration_cert when it is absent; never stored. */
export const REGISTRATION_CERT_FLAT_FIELDS = [
    'registrationCertImportJwt',
    'registrationCertImportId',
    'registrationCertBodyPrivacyPolicy',
    'registrationCertBodySupportUri',
    'registrationCertBodyIntermediary',
    'registrationCertBodyPurpose'
] as const;

export interface RegistrationCertPurpose {
    lang: string;
    content: string;
}

export interface RegistrationCertBody {
    privacy_policy?: string;
    support_uri?: string;
    intermediary?: string;
    purpose?: RegistrationCertPurpose[];
    /** Inner fields not fixed by the contract. */
    credentials?: Array<Record<string, unknown>>;
    /** Credential type identifiers (v2 and later; v1 called it provided_attestations). */
    provides_attestations?: string[];
}

/** How the registration certificate is obtained: an imported JWT, a registrar-side id, or a body to register. */
export interface RegistrationCert {
    id?: string;
    jwt?: string;
    body?: RegistrationCertBody;
}

export interface RegistrationCertFlatPurpose {
    lang?: string;
    content?: string;
}

/** Flat form fields for registration_cert: accepted in input, converted when registration_cert is absent, never kept. */
export interface RegistrationCertFlatFields {
    registrationCertImportJwt?: string | null;
    registrationCertImportId?: string | null;
    registrationCertBodyPrivacyPolicy?: string | null;
    registrationCertBodySupportUri?: string | null;
    registrationCertBodyIntermediary?: string | null;
    registrationCertBodyPurpose?: RegistrationCertFlatPurpose[] | null;
}

const purposeSchema = Joi.object<RegistrationCertPurpose, true>({
    lang: Joi.string().min(1).max(35).required().description('BCP 47 language tag'),
    content: Joi.string().min(1).max(2000).required()
}).label('RegistrationCertPurpose');

export const registrationCertBodySchema = Joi.object<RegistrationCertBody, true>({
    privacy_policy: Joi.string().max(2048),
    support_uri: Joi.string().max(2048),
    intermediary: Joi.string().max(2048),
    purpose: Joi.array().items(purposeSchema),
    credentials: Joi.array().items(Joi.object().unknown(true)),
    provides_attestations: Joi.array().items(Joi.string().min(1).max(2048)).description('Credential type identifiers')
}).label('RegistrationCertBody')
    // PresentationConfigFile version 1 named the field provided_attestations (dropped with a warning on upgrade).
    .alter({ [versionTarget('PresentationConfigFile', 1)]: (body) => (body as Joi.ObjectSchema).keys({ provided_attestations: Joi.array().items(Joi.string()).description('Version 1 only: dropped on upgrade (PROVIDED_ATTESTATIONS_REMOVED)') }) });

export const registrationCertSchema = Joi.object<RegistrationCert, true>({
    id: Joi.string().min(1).max(255).description('Registrar-side registration certificate id'),
    jwt: Joi.string().min(1).max(65536).description('An imported registration certificate (JWT)'),
    body: registrationCertBodySchema.description('Registration request body')
}).label('RegistrationCert');

/** Flat strings may come from forms: empty and null both mean "not set". */
const flatText = (max: number) => Joi.string().allow('', null).max(max);

const FLAT_PURPOSE_INCOMPLETE = 'registrationCert.flatPurposeIncomplete';

/** The flat fields' keys of the presentation configuration schema. */
export const registrationCertFlatFieldKeys = {
    registrationCertImportJwt: flatText(65536).description('Flat form field: registration_cert.jwt when registration_cert is absent; not stored'),
    registrationCertImportId: flatText(255).description('Flat form field: registration_cert.id when registration_cert is absent; not stored'),
    registrationCertBodyPrivacyPolicy: flatText(2048).description('Flat form field: registration_cert.body.privacy_policy; not stored'),
    registrationCertBodySupportUri: flatText(2048).description('Flat form field: registration_cert.body.support_uri; not stored'),
    registrationCertBodyIntermediary: flatText(2048).description('Flat form field: registration_cert.body.intermediary; not stored'),
    registrationCertBodyPurpose: Joi.array().items(Joi.object<RegistrationCertFlatPurpose, true>({
        lang: flatText(35),
        content: flatText(2000)
    }).label('RegistrationCertFlatPurpose')).allow(null).description('Flat form field: registration_cert.body.purpose; not stored'),
};

export const registrationCertFlatFieldMessages = {
    [FLAT_PURPOSE_INCOMPLETE]: '{{#at}} is required to convert the purpose into registration_cert'
};

const present = (value: string | null | undefined): value is string => typeof value === 'string' && value.length > 0;

/**
 * registration_cert from the flat fields when it is absent (spec 2.1); the flat fields are never kept. A flat purpose
 * row with neither lang nor content is an empty form row and skipped; one with only one of them is an error.
 */
export const convertFlatFields = (input: PresentationConfigInput, helpers: Joi.CustomHelpers): PresentationConfig | Joi.ErrorReport => {
    const {
        registrationCertImportJwt: jwt,
        registrationCertImportId: id,
        registrationCertBodyPrivacyPolicy: privacyPolicy,
        registrationCertBodySupportUri: supportUri,
        registrationCertBodyIntermediary: intermediary,
        registrationCertBodyPurpose: flatPurpose,
        ...config
    } = input;
    if (config.registration_cert !== undefined) {
        return config;
    }
    const errors = errorsArray(helpers);
    const purpose: RegistrationCertPurpose[] = [];
    (flatPurpose ?? []).forEach((row, i) => {
        if (!present(row.lang) && !present(row.content)) {
            return;
        }
        if (present(row.lang) && present(row.content)) {
            purpose.push({ lang: row.lang, content: row.content });
            return;
        }
        const missing = present(row.lang) ? 'content' : 'lang';
        errors.push(errorAt(helpers, FLAT_PURPOSE_INCOMPLETE, {}, 'registrationCertBodyPurpose', i, missing));
    });
    if (errors.length) {
        return errors as unknown as Joi.ErrorReport;
    }
    const body: RegistrationCertBody = {
        ...(present(privacyPolicy) ? { privacy_policy: privacyPolicy } : {}),
        ...(present(supportUri) ? { support_uri: supportUri } : {}),
        ...(present(intermediary) ? { intermediary } : {}),
        ...(purpose.length ? { purpose } : {})
    };
    const cert: RegistrationCert = {
        ...(present(id) ? { id } : {}),
        ...(present(jwt) ? { jwt } : {}),
        ...(Object.keys(body).length ? { body } : {})
    };
    return Object.keys(cert).length ? { ...config, registration_cert: cert } : config;
};
