/**
 * Content negotiation by an `Accept` header (RFC 9110 12.5.1): each candidate's quality is the q of the most
 * specific range that matches it (`type/sub`, then `type/*`, then `*\/*`); -1 when none does. Qvalues are 0 to 1 with
 * up to three decimals; anything else counts as absent (q = 1).
 */
export const acceptQualities = <T extends string>(accept: string | undefined, candidates: readonly T[]): Record<T, number> => {
    const quality = Object.fromEntries(candidates.map((c) => [c, accept ? -1 : 1])) as Record<T, number>;
    if (!accept) {
        return quality;
    }
    const specificity = Object.fromEntries(candidates.map((c) => [c, -1])) as Record<T, number>;
    for (const part of accept.split(',')) {
        const [range = '', ...params] = part.split(';').map((s) => s.trim().toLowerCase());
        const q = params.map((p) => /^q=(0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/.exec(p)).find(Boolean);
        const weight = q ? Number(q[1]) : 1;
        for (const candidate of candidates) {
            const level = range === candidate ? 2 : range === `${candidate.split('/')[0]}/*` ? 1 : range === '*/*' ? 0 : -1;
            if (level > specificity[candidate]) {
                specificity[candidate] = level;
                quality[candidate] = weight;
            }
        }
    }
    return quality;
};

/**
 * The candidate an `Accept` header ranks highest, the first (the default) on ties, for a missing header, and when it
 * accepts none of them.
 */
export const preferredMediaType = <T extends string>(accept: string | undefined, candidates: readonly [T, ...T[]]): T => {
    const quality = acceptQualities(accept, candidates);
    return candidates.reduce((best, candidate) => (quality[candidate] > 0 && quality[candidate] > quality[best] ? candidate : best), candidates[0]);
};
