import type Hapi from '@hapi/hapi';
import { ValidationError, type ErrorDetail } from '../../lib/errors';

/** At most this many problems are listed; one is enough to refuse the request. */
const MAX_DETAILS = 20;

type Source = 'path parameter' | 'query parameter' | 'payload field';

/**
 * Every NUL character in a value the API takes, as `{path, message}`. PostgreSQL cannot store U+0000 in text or
 * jsonb, so a NUL that reached a query would fail there (500) instead of being refused as bad input. Walks with an
 * explicit stack: a deeply nested payload must not overflow the call stack.
 */
const nulDetails = (value: unknown, source: Source): ErrorDetail[] => {
    const found: ErrorDetail[] = [];
    const label = (path: string[]) => (path.length ? `${source} "${path.join('.')}"` : source);
    const stack: Array<{ value: unknown; path: string[] }> = [{ value, path: [] }];
    while (stack.length && found.length < MAX_DETAILS) {
        const { value: current, path } = stack.pop()!;
        if (typeof current === 'string') {
            if (current.includes('\u0000')) {
                found.push({ path: path.join('.'), message: `${label(path)} must not contain a NUL character` });
            }
            continue;
        }
        if (!current || typeof current !== 'object' || Buffer.isBuffer(current) || typeof (current as NodeJS.ReadableStream).pipe === 'function') {
            continue;
        }
        for (const [key, item] of Object.entries(current)) {
            if (key.includes('\u0000')) {
                // The key itself cannot name the field: its parent does.
                found.push({ path: path.join('.'), message: `${label(path)} must not have a key with a NUL character` });
                continue;
            }
            stack.push({ value: item, path: [...path, key] });
        }
    }
    return found;
};

/**
 * Refuses a NUL character anywhere in the path parameters, query or payload (nested values and object keys too)
 * of every route, in one place, after the payload is parsed and before route validation. The error mapping answers
 * the Boom shape with details on management routes and `{error: "invalid_request"}` on wallet routes.
 */
export const refuseNulCharacters: Hapi.Lifecycle.Method = (request, h) => {
    const details = [
        ...nulDetails(request.params, 'path parameter'),
        ...nulDetails(request.query, 'query parameter'),
        ...nulDetails(request.payload, 'payload field')
    ];
    if (details.length) {
        throw new ValidationError(`Invalid request: ${details[0]!.message}`, details.slice(0, MAX_DETAILS));
    }
    return h.continue;
};
