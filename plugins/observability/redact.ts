import { REDACTED, redactQuery } from '../../lib/logging';

/** Query parameters that are free search terms (GET /api/session?q=…): a wallet link or a code may be pasted there. */
const SEARCH_TERMS = new Set(['q']);

const decodeFully = (value: string): string => {
    let current = value;
    for (let i = 0; i < 3; i++) {
        try {
            const decoded = decodeURIComponent(current.replace(/\+/g, ' '));
            if (decoded === current) {
                break;
            }
            current = decoded;
        }
        catch {
            break;
        }
    }
    return current;
};

/**
 * (The service logger's sensitive keys include `q`, so redactQuery already hides every search term; this check
 * keeps codes out of traces should search terms ever become readable there.)
 * A search term that carries a pre-authorized code: a pasted credential offer (by value or as a link) names the
 * grant, and a bare code is a long base64url string (32 random bytes give 43 characters). Session ids (UUIDs) and
 * short references stay readable; a long opaque term is redacted even when it was something else.
 */
const carriesCode = (term: string): boolean => /pre-authorized_code/i.test(term) || /^[A-Za-z0-9_-]{40,}$/.test(term.trim());

/**
 * The query string of a URL (with or without its leading `?`), as it may be recorded in logs and traces: values of
 * sensitive parameters (pre-authorized_code, tx_code, access_token, code, …) and search terms that carry a
 * pre-authorized code become [redacted]. A parameter that cannot be decoded is redacted as a whole.
 */
export const redactUrlQuery = (search: string): string => {
    const query = search.startsWith('?') ? search.slice(1) : search;
    if (!query) {
        return '';
    }
    return query.split('&').map((pair) => {
        const eq = pair.indexOf('=');
        if (eq < 0) {
            return pair;
        }
        const key = pair.slice(0, eq);
        let redacted: string;
        try {
            redacted = redactQuery(`?${pair}`).slice(1);
        }
        catch {
            return `${key}=${REDACTED}`;
        }
        if (redacted !== pair) {
            return redacted;
        }
        return SEARCH_TERMS.has(decodeFully(key).toLowerCase()) && carriesCode(decodeFully(pair.slice(eq + 1))) ? `${key}=${REDACTED}` : pair;
    }).join('&');
};
