import Joi from 'joi';

const NOT_AVAILABLE = 'feature.notAvailable';

/**
 * A setting whose feature is not built yet. The schema keeps documenting its shape, but a value that would turn the
 * feature on (`refused`, by default any value) is answered with a 400 whose `reason` names what is missing, so that
 * a stored setting never looks as if it worked. Remove the wrapper in the change that builds the feature.
 */
export const notAvailableYet = <S extends Joi.Schema>(schema: S, reason: string, refused: (value: any) => boolean = () => true): S =>
    schema
        // Named by path: the label of an object schema is its model name in the API docs.
        .custom((value, helpers) => (refused(value) ? helpers.error(NOT_AVAILABLE, { path: (helpers.state.path ?? []).join('.') }) : value))
        .messages({ [NOT_AVAILABLE]: `"{#path}": ${reason}` }) as S;
