import { valuesAt, type Path } from '../../../lib/claim-path';
import { ValidationError } from '../../../lib/errors';

/** The parts of a claim field that shape a credential (resources/credential-config.ts has the full schema). */
export interface FieldRule {
    path: Array<string | number | null> | null;
    defaultValue?: unknown;
    mandatory?: boolean;
    disclosable?: boolean;
    namespace?: string;
    children?: FieldRule[];
}

export type { Path };
export { valuesAt };

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);

/** Children name paths relative to their parent unless they already repeat the parent's path. */
export const flattenFields = (fields: FieldRule[], parent: Path = []): Array<FieldRule & { path: Path }> =>
    fields.flatMap((field) => {
        const own = field.path ?? [];
        const repeatsParent = parent.length > 0 && parent.every((segment, i) => own[i] === segment);
        const path = repeatsParent || !parent.length ? own : [...parent, ...own];
        return [{ ...field, path }, ...flattenFields(field.children ?? [], path)];
    });

/** Sets a default at a path of plain keys when nothing is there yet. */
const setDefault = (target: Record<string, unknown>, path: Path, value: unknown): void => {
    if (path.some((p) => typeof p !== 'string') || !path.length) {
        return;
    }
    let node = target;
    for (const key of path.slice(0, -1) as string[]) {
        if (!isObject(node[key])) {
            node[key] = {};
        }
        node = node[key] as Record<string, unknown>;
    }
    const last = path[path.length - 1] as string;
    if (node[last] === undefined) {
        node[last] = structuredClone(value);
    }
};

/**
 * Claims of a credential: the given claims with field defaults filled in; every mandatory field must then have a
 * value, or issuance fails with a clear error and no credential.
 */
export const completeClaims = (claims: Record<string, unknown>, fields: Array<FieldRule & { path: Path }>): Record<string, unknown> => {
    const complete = structuredClone(claims);
    for (const field of fields) {
        if (field.defaultValue !== undefined) {
            setDefault(complete, field.path, field.defaultValue);
        }
    }
    const missing = fields.filter((f) => f.mandatory && f.path.length && valuesAt(complete, f.path).every((v) => v === undefined || v === null));
    if (missing.length) {
        throw new ValidationError(`Mandatory claims are missing: ${missing.map((f) => f.path.map((p) => (p === null ? '[]' : String(p))).join('.')).join(', ')}`);
    }
    return complete;
};
