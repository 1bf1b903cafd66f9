import { isSecretPath, redactSecrets, REDACTED } from './secrets';

export interface FieldChange {
    path: string;
    before?: unknown;
    after?: unknown;
}

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);

/** Leaf-level changes between two specs; arrays compare whole. Secret values become `[redacted]`. */
export const diffSpecs = (before: unknown, after: unknown, secretPaths: string[] = [], path: string[] = []): FieldChange[] => {
    if (isObject(before) && isObject(after)) {
        const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
        return [...keys].sort().flatMap((k) => diffSpecs(before[k], after[k], secretPaths, [...path, k]));
    }
    if (JSON.stringify(before) === JSON.stringify(after)) {
        return [];
    }
    const show = (v: unknown) => (v === undefined ? undefined : isSecretPath(secretPaths, path) ? REDACTED : redactSecrets(v, secretPaths, path));
    return [{ path: path.join('.'), before: show(before), after: show(after) }];
};

/**
 * JSON with sorted keys and without null members, so documents that mean the same compare equal whatever their key
 * order and whether an unset optional field is absent or null.
 */
export const canonicalJson = (value: unknown): string => JSON.stringify(value, (_k, v) =>
    isObject(v) ? Object.fromEntries(Object.keys(v).sort().filter((k) => v[k] !== null).map((k) => [k, v[k]])) : v);
