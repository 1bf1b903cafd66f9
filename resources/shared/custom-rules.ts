import Joi from 'joi';

/*
 * Helpers of the resource schemas' custom rules, which report several problems at paths below the value they check.
 */

/** Joi's typings mark the state's path and localize() optional; at validation time they are always there. */
export const stateAt = (helpers: Joi.CustomHelpers, ...segments: Array<string | number>): Joi.State =>
    helpers.state.localize!([...helpers.state.path ?? [], ...segments]);

/** Several reports from one custom rule; joi supports it at runtime, its typings do not say so. */
export const errorsArray = (helpers: Joi.CustomHelpers): Joi.ErrorReport[] =>
    (helpers as unknown as { errorsArray(): Joi.ErrorReport[] }).errorsArray();

export const reportAll = <T>(value: T, errors: Joi.ErrorReport[]): T | Joi.ErrorReport => (errors.length ? errors as unknown as Joi.ErrorReport : value);

/** A path the way joi labels it (`a.b[0].c`). */
const pathLabel = (path: Array<string | number>): string =>
    path.reduce<string>((label, segment) => (typeof segment === 'number' ? `${label}[${segment}]` : label ? `${label}.${segment}` : segment), '');

/**
 * An error of a custom rule at a path below the value it checks. Errors take the label of the schema that raises
 * them, so the messages of these codes use {{#at}}, the path itself, instead of {{#label}}.
 */
export const errorAt = (helpers: Joi.CustomHelpers, code: string, local: Record<string, unknown>, ...segments: Array<string | number>): Joi.ErrorReport => {
    const state = stateAt(helpers, ...segments);
    return helpers.error(code, { ...local, at: `"${pathLabel(state.path ?? [])}"` }, state);
};

export const resourceId = (name: string) => Joi.string().pattern(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, name)
    .description('Letters, digits, _ . and -, up to 128 characters');
