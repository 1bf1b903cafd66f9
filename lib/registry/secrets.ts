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

/** The secret and destination paths of a kind (see ResourceKind). */
export interface SecretLayout {
    secrets?: string[];
    secretDestinations?: string[];
}

/**
 * Answers show secrets as `[redacted]`; a client that sends such a document back (GET, edit, PATCH/PUT) means "keep
 * the secret", so each redacted secret path takes the stored value again instead of the literal text. With nothing
 * stored there it becomes undefined, so validation asks for the real value rather than storing "[redacted]".
 * A secret is never kept when a destination on its way from the document root changed (a field of
 * `secretDestinations` in an object that contains the secret): someone allowed to edit the configuration but not to
 * read its secrets could otherwise redirect a stored secret to a server of their own.
 */
export const restoreRedacted = <T>(incoming: T, stored: unknown, layout: SecretLayout): T =>
    restoreAt(incoming, stored, layout.secrets ?? [], (layout.secretDestinations ?? []).map((d) => d.split('.')), [], false);

const restoreAt = <T>(incoming: T, stored: unknown, secretPaths: string[], destinations: string[][], path: string[], moved: boolean): T => {
    if (incoming === REDACTED && path.length && isSecretPath(secretPaths, path)) {
        return (moved ? undefined : stored) as T;
    }
    if (Array.isArray(incoming)) {
        // Entries with an id (KMS providers) are matched by id, so a reordered list never takes another's secret.
        const previous = Array.isArray(stored) ? stored : [];
        const counterpart = (v: unknown, i: number) => {
            const id = (v as { id?: unknown } | null)?.id;
            return id !== undefined ? previous.find((p) => (p as { id?: unknown } | null)?.id === id) : previous[i];
        };
        return incoming.map((v, i) => restoreAt(v, counterpart(v, i), secretPaths, destinations, [...path, String(i)], moved)) as T;
    }
    if (incoming && typeof incoming === 'object') {
        const previous = stored && typeof stored === 'object' ? stored as Record<string, unknown> : {};
        const now = incoming as Record<string, unknown>;
        const movedHere = moved || destinations.some((d) => matches(d.slice(0, -1), path) && now[d.at(-1)!] !== previous[d.at(-1)!]);
        return Object.fromEntries(Object.entries(now).map(([k, v]) => [k, restoreAt(v, previous[k], secretPaths, destinations, [...path, k], movedHere)])) as T;
    }
    return incoming;
};
