import Joi from 'joi';

/*
 * TS12 "Specification of Strong Customer Authentication (SCA) Implementation with the Wallet", version 1.0
 * (2025-12-05), section 4.2 "Transactional Data Object" and 4.3 "Payload Object", and its JSON Schemas (as of
 * v1.0.1) docs/technical-specifications/api/ts12-urn-eudi-sca-<type>-1-data-model.json in
 * https://github.com/eu-digital-identity-wallet/eudi-doc-standards-and-technical-specifications
 * (docs/technical-specifications/ts12-electronic-payments-SCA-implementation-with-wallet.md). Drafts up to v0.98
 * defined other types (urn:eudi:sca:payment_authentication:1 with amount {value, currency}); v1.0 replaced them.
 *
 * Supported: the four basic types of v1.0, which every wallet must support:
 *   urn:eudi:sca:payment:1                 (4.3.1 Payment Confirmation)
 *   urn:eudi:sca:login_risk_transaction:1  (4.3.2 Login and Risk-based Authentication)
 *   urn:eudi:sca:account_access:1          (4.3.3 Payment Account Information Access)
 *   urn:eudi:sca:emandate:1                (4.3.4 E-mandate)
 * Required fields, string lengths, the currency pattern, the frequency codes and additionalProperties: false follow
 * the v1.0 JSON Schemas. Two rules from the prose that the JSON Schemas leave out are enforced too: execution_date
 * must not be present with recurrence, and an e-mandate needs purpose unless it carries payment_payload (the prose
 * says "payment", the field is payment_payload). Dates are ISO 8601 dates or date-times (the prose says ISO 8601;
 * the schemas' format is an annotation only); "execution_date must not lie in the past" is a request-time matter and
 * is not checked in a stored configuration. The draft types are not supported. Payloads are validated without type conversion, so they are stored exactly as given (they are
 * hashed by the wallet).
 */

export const TS12_PREFIX = 'urn:eudi:sca:';

const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const ISO_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T([01]\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d{1,9})?)?(Z|[+-]([01]\d|2[0-3]):?[0-5]\d)?$/;

/** An ISO 8601 calendar date, or date and time, naming a day that exists (no 2025-02-30). */
const isIsoDate = (value: string): boolean => {
    const match = ISO_DATE.exec(value) ?? ISO_DATE_TIME.exec(value);
    if (!match) {
        return false;
    }
    const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
    const date = new Date(Date.UTC(year, month - 1, day));
    return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
};

const iso8601 = Joi.string().custom((value: string, helpers) => (isIsoDate(value) ? value : helpers.error('ts12.date')))
    .messages({ 'ts12.date': '{{#label}} must be an ISO 8601 date or date and time' });

const transactionId = Joi.string().min(1).max(36);
const thirdParty = Joi.object({
    legal_name: Joi.string().required(),
    brand_name: Joi.string().required(),
    domain_name: Joi.string().required()
});

export const TS12_RECURRENCE_FREQUENCIES = ['INDA', 'DAIL', 'WEEK', 'TOWK', 'TWMN', 'MNTH', 'TOMN', 'QUTR', 'FOMN', 'SEMI', 'YEAR', 'TYEA'] as const;

const ts12PaymentSchema = Joi.object({
    transaction_id: transactionId.required(),
    date_time: iso8601,
    payee: Joi.object({
        name: Joi.string().required(),
        id: Joi.string().required(),
        // Resolvable or data: URL (RFC 2397).
        logo: Joi.string().uri(),
        website: Joi.string().uri({ scheme: ['http', 'https'] })
    }).required(),
    pisp: thirdParty,
    execution_date: iso8601.when('recurrence', { is: Joi.exist(), then: Joi.forbidden() })
        .messages({ 'any.unknown': '{{#label}} must not be present with recurrence' }),
    currency: Joi.string().pattern(/^[A-Z]{3}$/, 'ISO 4217 alpha-3 code').required(),
    amount: Joi.number().required(),
    amount_estimated: Joi.boolean(),
    amount_earmarked: Joi.boolean(),
    sct_inst: Joi.boolean(),
    recurrence: Joi.object({
        start_date: iso8601,
        end_date: iso8601,
        number: Joi.number().integer(),
        frequency: Joi.string().valid(...TS12_RECURRENCE_FREQUENCIES).required(),
        mit_options: Joi.object({
            amount_variable: Joi.boolean(),
            min_amount: Joi.number(),
            max_amount: Joi.number(),
            total_amount: Joi.number(),
            initial_amount: Joi.number(),
            initial_amount_number: Joi.number().integer(),
            apr: Joi.number()
        })
    })
});

const ts12LoginRiskSchema = Joi.object({
    transaction_id: transactionId.required(),
    date_time: iso8601,
    service: Joi.string().max(100),
    action: Joi.string().max(140).required()
});

const ts12AccountAccessSchema = Joi.object({
    transaction_id: transactionId.required(),
    date_time: iso8601,
    aisp: thirdParty,
    description: Joi.string().max(140)
});

const ts12EmandateSchema = Joi.object({
    transaction_id: transactionId.required(),
    date_time: iso8601,
    start_date: iso8601,
    end_date: iso8601,
    reference_number: Joi.string().min(1).max(50),
    creditor_id: Joi.string().min(1).max(50),
    purpose: Joi.string().max(1000).when('payment_payload', { not: Joi.exist(), then: Joi.required() })
        .messages({ 'any.required': '{{#label}} is required unless payment_payload is present' }),
    payment_payload: ts12PaymentSchema
});

/** Payload schemas of the supported TS12 transaction data types. */
export const TS12_PAYLOAD_SCHEMAS: Readonly<Record<string, Joi.ObjectSchema>> = {
    'urn:eudi:sca:payment:1': ts12PaymentSchema,
    'urn:eudi:sca:login_risk_transaction:1': ts12LoginRiskSchema,
    'urn:eudi:sca:account_access:1': ts12AccountAccessSchema,
    'urn:eudi:sca:emandate:1': ts12EmandateSchema
};

export const TS12_TRANSACTION_TYPES = Object.keys(TS12_PAYLOAD_SCHEMAS);

/** URN scheme and namespace names are case-insensitive (RFC 8141), so `URN:EUDI:SCA:…` is a TS12 type too and must be one
 * of the supported ones, spelled as TS12 spells it. */
export const isTs12Type = (type: string): boolean => type.toLowerCase().startsWith(TS12_PREFIX);
