import Joi from 'joi';
import type { ErrorDetail } from '../../lib/errors';
import type { JsonValue } from '../credential-config';
import type { PresentationConfig } from '../presentation-config';
import { errorAt, errorsArray, reportAll } from '../shared/custom-rules';
import type { DcqlQuery } from './dcql';
import { isTs12Type, TS12_PAYLOAD_SCHEMAS, TS12_PREFIX, TS12_TRANSACTION_TYPES } from './ts12';

/* transaction_data of a presentation configuration or request (OpenID4VP), with TS12 payloads checked by type. */

export interface TransactionData {
    type: string;
    /** Credential query ids the entry applies to. */
    credential_ids: string[];
    /** Required for TS12 (urn:eudi:sca:) types, and then validated against the type's payload schema. */
    payload?: JsonValue;
    /**
     * Hash algorithms the wallet may use for transaction_data_hashes (OpenID4VP); TS12 v1.0 section 4.2 lists it as
     * REQUIRED for SCA transaction data, so a configuration can carry it.
     */
    transaction_data_hashes_alg?: string[];
}

const TS12_UNSUPPORTED = 'transactionData.ts12Unsupported';
const CREDENTIAL_ID_UNKNOWN = 'transactionData.unknownCredentialId';

/** One transaction_data entry; credential ids are checked against a DCQL query by checkTransactionDataCredentialIds. */
export const transactionDataEntrySchema = Joi.object<TransactionData, true>({
    type: Joi.string().min(1).max(255).required()
        .custom((type: string, helpers) => (isTs12Type(type) && !TS12_PAYLOAD_SCHEMAS[type] ? helpers.error(TS12_UNSUPPORTED, { types: TS12_TRANSACTION_TYPES.join(', ') }) : type))
        .messages({ [TS12_UNSUPPORTED]: '{{#label}} is not a supported TS12 transaction data type (supported: {{#types}})' })
        .description(`Transaction data type; ${TS12_PREFIX} types must be one of ${TS12_TRANSACTION_TYPES.join(', ')}`),
    credential_ids: Joi.array().items(Joi.string().min(1)).min(1).required().description('Credential query ids the entry applies to'),
    // Validated without conversion: the wallet hashes what it is sent, so the stored payload is exactly the one given.
    payload: Joi.when('type', {
        switch: TS12_TRANSACTION_TYPES.map((type) => ({
            is: type,
            then: TS12_PAYLOAD_SCHEMAS[type]!.required().prefs({ convert: false })
                .messages({ 'any.required': `{{#label}} is required for ${type}` })
        })),
        otherwise: Joi.any()
    }).description('Transaction details; required for TS12 types and checked against the type\'s payload schema'),
    transaction_data_hashes_alg: Joi.array().items(Joi.string().min(1)).min(1)
        .description('Hash algorithms for transaction_data_hashes, e.g. sha-256 (required by TS12 for SCA types)')
}).label('TransactionData');

/** [entry index, credential_ids index, id] of every credential id that names no credential query of the DCQL query. */
const unknownCredentialIds = (entries: TransactionData[], query: DcqlQuery | undefined): Array<[number, number, string]> => {
    const ids = new Set((query?.credentials ?? []).map((c) => c?.id));
    return entries.flatMap((entry, i) => (entry?.credential_ids ?? []).flatMap((id, j): Array<[number, number, string]> => (ids.has(id) ? [] : [[i, j, id]])));
};

/**
 * For transaction_data given elsewhere (e.g. in a presentation request): one problem per credential id that names no
 * credential query of the DCQL query, with paths relative to the transaction_data array.
 */
export const checkTransactionDataCredentialIds = (entries: TransactionData[], query: DcqlQuery): ErrorDetail[] =>
    unknownCredentialIds(entries, query).map(([i, j, id]) => ({ path: `${i}.credential_ids.${j}`, message: `names no credential query of the DCQL query (${JSON.stringify(id)})` }));

export const transactionDataSchema = Joi.array().items(transactionDataEntrySchema)
    .custom((entries: TransactionData[], helpers) => {
        const root = helpers.state.ancestors?.[0] as Partial<PresentationConfig> | undefined;
        if (!Array.isArray(root?.dcql_query?.credentials)) {
            // The missing or broken query has its own error.
            return entries;
        }
        const errors = errorsArray(helpers);
        for (const [i, j, id] of unknownCredentialIds(entries, root.dcql_query)) {
            errors.push(errorAt(helpers, CREDENTIAL_ID_UNKNOWN, { id }, i, 'credential_ids', j));
        }
        return reportAll(entries, errors);
    }, 'credential ids of the DCQL query')
    .messages({ [CREDENTIAL_ID_UNKNOWN]: '{{#at}} names no credential query of dcql_query' });
