/**
 * `${VAR}` and `${VAR:default}` in string values of configuration JSON (tenant folders, kms.json, bundles).
 * Pure: the caller decides whether an unresolved placeholder is an error or a warning.
 */

export type Variables = Readonly<Record<string, string | undefined>>;

export interface Substitution<T> {
    value: T;
    /** Names of variables that were unset (or empty) and had no default, each once, in order of appearance. */
    unresolved: string[];
}

// The default runs up to the first `}`, so a default cannot itself contain `}`.
const PLACEHOLDER = /\$\{([A-Z0-9_]+)(?::([^}]*))?\}/g;

const substituteString = (text: string, variables: Variables, unresolved: Set<string>): string =>
    // One replace pass over the original text: a substituted value is never scanned again, so values holding
    // `${...}` (e.g. a password) stay literal.
    text.replace(PLACEHOLDER, (match, name: string, fallback: string | undefined) => {
        const value = variables[name];
        // An empty variable counts as unset: container platforms often pass VAR= for "not set".
        if (value !== undefined && value !== '') {
            return value;
        }
        if (fallback !== undefined) {
            return fallback;
        }
        unresolved.add(name);
        return match;
    });

const walk = (value: unknown, variables: Variables, unresolved: Set<string>): unknown => {
    if (typeof value === 'string') {
        return substituteString(value, variables, unresolved);
    }
    if (Array.isArray(value)) {
        return value.map((v) => walk(v, variables, unresolved));
    }
    if (value && typeof value === 'object') {
        return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, walk(v, variables, unresolved)]));
    }
    return value;
};

/** A copy of `value` with placeholders in every string value (not in keys) replaced; unresolved ones stay literal. */
export const substitutePlaceholders = <T>(value: T, variables: Variables): Substitution<T> => {
    const unresolved = new Set<string>();
    return { value: walk(value, variables, unresolved) as T, unresolved: [...unresolved] };
};
