import Vm from 'node:vm';
import Joi from 'joi';
import { ValidationError } from '../../../lib/errors';
import type { ClaimConstraints, ClaimType } from '../../../resources/credential-config';
import { valuesAt, type Path } from './claims';

/** The parts of a claim field its values are checked against (resources/credential-config.ts has the full schema). */
export interface CheckedField {
    path: Path;
    type?: ClaimType;
    constraints?: ClaimConstraints;
}

/** Longest value a pattern is run on: with the save-time checks, it keeps a slow pattern from holding a request. */
export const CLAIM_PATTERN_VALUE_MAX_LENGTH = 4096;

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);

const TYPE_CHECKS: Record<ClaimType, (value: unknown) => boolean> = {
    string: (v) => typeof v === 'string',
    number: (v) => typeof v === 'number' && Number.isFinite(v),
    integer: (v) => Number.isSafeInteger(v),
    boolean: (v) => typeof v === 'boolean',
    object: isObject,
    array: Array.isArray
};

const jsonType = (value: unknown): string => (value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value);

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;

const validDate = (year: string, month: string, day: string): boolean => {
    const date = new Date(Date.UTC(Number(year), Number(month) - 1, Number(day)));
    return date.getUTCFullYear() === Number(year) && date.getUTCMonth() === Number(month) - 1 && date.getUTCDate() === Number(day);
};

const uriSchema = Joi.string().uri();
const emailSchema = Joi.string().email({ tlds: { allow: false } });

/** RFC 3339 full-date and date-time (a leap second allowed), RFC 3986 absolute URI, RFC 5321 mailbox (joi's checks). */
const FORMATS: Record<NonNullable<ClaimConstraints['format']>, (value: string) => boolean> = {
    date: (v) => {
        const m = DATE.exec(v);
        return !!m && validDate(m[1]!, m[2]!, m[3]!);
    },
    'date-time': (v) => {
        const m = DATE_TIME.exec(v);
        return !!m && validDate(m[1]!, m[2]!, m[3]!) && Number(m[4]) < 24 && Number(m[5]) < 60 && Number(m[6]) <= 60
            && (m[7] === undefined || (Number(m[7]) < 24 && Number(m[8]) < 60));
    },
    uri: (v) => !uriSchema.validate(v).error,
    email: (v) => !emailSchema.validate(v).error
};

/** How long one pattern may run on one value before the value is refused. */
export const PATTERN_TIME_LIMIT_MS = 50;

/**
 * Patterns run in a context of their own under a time limit: the save-time checks refuse the usual shapes of
 * catastrophic backtracking, but not every one (overlapping alternatives, adjacent quantifiers), and one slow
 * pattern would otherwise hold the process, and every tenant on it. V8 interrupts a regular expression at the limit.
 */
const sandbox = Vm.createContext(Object.create(null) as object);
Vm.runInContext('globalThis.matches = (pattern, value) => new RegExp(pattern, "u").test(value);', sandbox);
const matchesPattern = (pattern: string, value: string): boolean | 'timeout' => {
    Object.assign(sandbox, { pattern, value });
    try {
        return Vm.runInContext('matches(pattern, value)', sandbox, { timeout: PATTERN_TIME_LIMIT_MS }) === true;
    }
    catch (err) {
        if ((err as { code?: string }).code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') {
            return 'timeout';
        }
        throw err;
    }
    finally {
        Object.assign(sandbox, { pattern: undefined, value: undefined });
    }
};

/** Why a value breaks its field's type or constraints, or undefined when it keeps them. */
export const claimValueViolation = (value: unknown, type: ClaimType | undefined, constraints: ClaimConstraints = {}): string | undefined => {
    if (type && !TYPE_CHECKS[type](value)) {
        return `must be of type ${type}, not ${jsonType(value)}`;
    }
    if (constraints.enum && !constraints.enum.some((allowed) => allowed === value)) {
        return `must be one of ${JSON.stringify(constraints.enum)}`;
    }
    if (typeof value === 'string') {
        // Code points, as JSON Schema counts them.
        const length = [...value].length;
        if (constraints.minLength !== undefined && length < constraints.minLength) {
            return `must be at least ${constraints.minLength} characters long`;
        }
        if (constraints.maxLength !== undefined && length > constraints.maxLength) {
            return `must be at most ${constraints.maxLength} characters long`;
        }
        if (constraints.pattern !== undefined) {
            // A bound on the input keeps any backtracking the save-time check missed short.
            if (value.length > CLAIM_PATTERN_VALUE_MAX_LENGTH) {
                return `is longer than the ${CLAIM_PATTERN_VALUE_MAX_LENGTH} characters a pattern is checked on`;
            }
            const matched = matchesPattern(constraints.pattern, value);
            if (matched === 'timeout') {
                return `could not be checked against the pattern ${constraints.pattern} within ${PATTERN_TIME_LIMIT_MS} ms`;
            }
            if (!matched) {
                return `must match the pattern ${constraints.pattern}`;
            }
        }
        if (constraints.format && !FORMATS[constraints.format](value)) {
            return `must be a valid ${constraints.format}`;
        }
    }
    if (typeof value === 'number') {
        if (constraints.minimum !== undefined && value < constraints.minimum) {
            return `must be at least ${constraints.minimum}`;
        }
        if (constraints.maximum !== undefined && value > constraints.maximum) {
            return `must be at most ${constraints.maximum}`;
        }
    }
    return undefined;
};

export const pathName = (path: Path): string => path.map((p) => (p === null ? '[]' : String(p))).join('.');

/**
 * Every value at a field's path must be of the field's type and keep its constraints. An absent value is not
 * checked (mandatory fields are checked before); null is a value, of type null. Fails with every broken rule, each
 * naming its path.
 */
export const checkClaims = (claims: Record<string, unknown>, fields: CheckedField[]): void => {
    const broken: Array<{ path: string; message: string }> = [];
    for (const field of fields) {
        if (!field.path.length || (!field.type && !field.constraints)) {
            continue;
        }
        for (const value of valuesAt(claims, field.path)) {
            const reason = value === undefined ? undefined : claimValueViolation(value, field.type, field.constraints);
            if (reason) {
                broken.push({ path: pathName(field.path), message: `${pathName(field.path)} ${reason}` });
                break;
            }
        }
    }
    if (broken.length) {
        throw new ValidationError(`Claims break their rules: ${broken.map((b) => b.message).join('; ')}`, broken);
    }
};
