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

/** Fields that say where a secret is sent: the service's outbound URLs (webhooks, attribute providers, KMS). */
const DESTINATION_FIELDS = ['url', 'baseUrl', 'tokenUrl'];

const destinationChanged = (incoming: Record<string, unknown>, previous: Record<string, unknown>): boolean =>
    DESTINATION_FIELDS.some((field) => (field in incoming || field in previous) && incoming[field] !== previous[field]);

/**
 * Answers show secrets as `[redacted]`; a client that sends such a document back (GET, edit, PATCH/PUT) means "keep
 * the secret", so each redacted secret path takes the stored value again instead of the literal text. With nothing
 * stored there it becomes undefined, so validation asks for the real value rather than storing "[redacted]".
 * A secret is never kept when a URL on its way from the document root changed: someone allowed to edit the
 * configuration but not to read its secrets could otherwise redirect a stored secret to a server of their own.
 */
export const restoreRedacted = <T>(incoming: T, stored: unknown, secretPaths: string[] = [], path: string[] = [], moved = false): T => {
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
        return incoming.map((v, i) => restoreRedacted(v, counterpart(v, i), secretPaths, [...path, String(i)], moved)) as T;
    }
    if (incoming && typeof incoming === 'object') {
        const previous = stored && typeof stored === 'object' ? stored as Record<string, unknown> : {};
        const movedHere = moved || destinationChanged(incoming as Record<string, unknown>, previous);
        return Object.fromEntries(Object.entries(incoming).map(([k, v]) => [k, restoreRedacted(v, previous[k], secretPaths, [...path, k], movedHere)])) as T;
    }
    return incoming;
};
