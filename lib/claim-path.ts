/** A claims path pointer (OpenID4VP / OpenID4VCI): keys, array indexes, and null for every element of an array. */
export type Path = Array<string | number | null>;

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);

/** Values at a path; a null segment stands for every element of an array. */
export const valuesAt = (value: unknown, path: Path): unknown[] => {
    if (!path.length) {
        return value === undefined ? [] : [value];
    }
    const [head, ...rest] = path;
    if (head === null) {
        return Array.isArray(value) ? value.flatMap((v) => valuesAt(v, rest)) : [];
    }
    if (typeof head === 'number') {
        return Array.isArray(value) ? valuesAt(value[head], rest) : [];
    }
    return isObject(value) ? valuesAt(value[head], rest) : [];
};

