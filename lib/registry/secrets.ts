export const REDACTED = '[redacted]';

const matches = (pattern: string[], path: string[]): boolean =>
    pattern.length === path.length && pattern.every((segment, i) => segment === '*' || segment === path[i]);

/** True when a path (array of segments) is one of the kind's secret paths. */
export const isSecretPath = (secretPaths: string[], path: string[]): boolean =>
    secretPaths.some((p) => matches(p.split('.'), path));

/** A deep copy with every secret path replaced by `[redacted]`. */
export const redactSecrets = <T>(value: T, secretPaths: string[] = [], path: string[] = []): T => {
    if (secretPaths.length === 0) {
        return value;
    }
    if (path.length && isSecretPath(secretPaths, path) && value !== undefined && value !== null) {
        return REDACTED as T;
    }
    if (Array.isArray(value)) {
        return value.map((v, i) => redactSecrets(v, secretPaths, [...path, String(i)])) as T;
    }
    if (value && typeof value === 'object') {
        return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactSecrets(v, secretPaths, [...path, k])])) as T;
    }
    return value;
};
