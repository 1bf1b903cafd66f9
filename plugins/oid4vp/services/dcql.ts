import { DcqlPresentationResult, DcqlQuery } from 'dcql';
import type { FailureCode } from '../../../lib/verify/failures';
import { valuesAt } from '../../../lib/claim-path';
import { LruMap } from '../../../lib/lru';
import type { CheckedStatus } from '../../../lib/verify/status-list';
import type { TrustOutcome } from './trust-outcome';

/** One verified presentation: its query, its disclosed claims (mdoc: `{namespace: {element: value}}`). */
export interface PresentedCredential {
    queryId: string;
    format: 'dc+sd-jwt' | 'mso_mdoc';
    vct?: string;
    docType?: string;
    claims: Record<string, unknown>;
    /** The presentation as the wallet sent it (for webhooks that asked for raw tokens). */
    raw: string;
    keyBound?: boolean;
    /** Its status list entry: valid, or unknown (best_effort, list unavailable); absent when not checked. */
    status?: CheckedStatus;
    /** The trust list entry that admitted it (outcome.credentials[].trust of the DC API and ISO 18013-7 paths). */
    trust?: TrustOutcome;
}

type Path = Array<string | number | null>;
type ClaimQuery = { id?: string; path: Path; values?: Array<string | number | boolean> };
type CredentialQuery = { id: string; format: string; multiple?: boolean; claims?: ClaimQuery[]; claim_sets?: string[][]; trusted_authorities?: unknown };
type Query = { credentials: CredentialQuery[]; credential_sets?: Array<{ options: string[][]; required?: boolean }> };

export type DcqlMatch = { ok: true } | { ok: false; code?: FailureCode; message: string };

/** A disclosed value matches when it equals one of the requested values in type and value. */
const mismatches = (claim: ClaimQuery, claims: Record<string, unknown>): boolean =>
    !!claim.values && valuesAt(claims, claim.path).some((v) => !claim.values!.some((allowed) => allowed === v));

const showPath = (path: Path) => JSON.stringify(path);

/**
 * claim_value_mismatch (spec 7.2): a disclosed claim is not among the values of its claim query; with claim_sets, no
 * set matched and a disclosed claim had another value. Names the query and the paths, never the values; checked
 * before missing claims.
 */
const valueMismatch = (query: Query, presented: PresentedCredential[]): DcqlMatch | undefined => {
    for (const credential of query.credentials) {
        for (const presentation of presented.filter((p) => p.queryId === credential.id)) {
            const wrong = (credential.claims ?? []).filter((c) => mismatches(c, presentation.claims));
            if (!wrong.length) {
                continue;
            }
            if (credential.claim_sets?.length) {
                const matchingSet = credential.claim_sets.some((set) => set.every((id) => {
                    const claim = credential.claims!.find((c) => c.id === id);
                    return claim && !mismatches(claim, presentation.claims) && valuesAt(presentation.claims, claim.path).length > 0;
                }));
                if (matchingSet) {
                    continue;
                }
            }
            return {
                ok: false,
                code: 'claim_value_mismatch',
                message: `Disclosed claim values do not match the requested values for credential '${credential.id}': ${wrong.map((c) => showPath(c.path)).join(', ')}`
            };
        }
    }
    return undefined;
};

/**
 * The dcql package's parsed and validated form of a query, kept by the query's JSON: parsing it through valibot took
 * ~60 µs of every response, and a verifier asks the same few queries again and again. The package only reads it.
 */
const parsedQueries = new LruMap<string, DcqlQuery>(256);
const parsedQuery = (query: Query): DcqlQuery => {
    const id = JSON.stringify(query);
    let parsed = parsedQueries.get(id);
    if (!parsed) {
        // Trust is checked by this service; the dcql package's own trusted_authorities model differs from spec 2.1.1.
        parsed = DcqlQuery.parse({ ...query, credentials: query.credentials.map(({ trusted_authorities: _t, ...c }) => c) } as never);
        DcqlQuery.validate(parsed);
        parsedQueries.set(id, parsed);
    }
    return parsed;
};

/** Whether the presentations satisfy the query: values first, then required credentials and claims (dcql package). */
export const matchDcql = (rawQuery: unknown, presented: PresentedCredential[]): DcqlMatch => {
    const query = rawQuery as Query;
    const mismatch = valueMismatch(query, presented);
    if (mismatch) {
        return mismatch;
    }
    const dcqlQuery = parsedQuery(query);
    const record: Record<string, unknown[]> = {};
    for (const p of presented) {
        (record[p.queryId] ??= []).push(p.format === 'mso_mdoc'
            ? { credential_format: 'mso_mdoc', doctype: p.docType, namespaces: p.claims, cryptographic_holder_binding: true }
            : { credential_format: 'dc+sd-jwt', vct: p.vct ?? '', claims: p.claims, cryptographic_holder_binding: p.keyBound ?? true });
    }
    const result = DcqlPresentationResult.fromDcqlPresentation(record as never, { dcqlQuery });
    if (result.can_be_satisfied) {
        return { ok: true };
    }
    const presentedIds = new Set(presented.map((p) => p.queryId));
    const requiredSets = (query.credential_sets ?? []).filter((s) => s.required !== false);
    const missingCredential = query.credential_sets?.length
        ? requiredSets.some((set) => !set.options.some((option) => option.every((id) => presentedIds.has(id))))
        : query.credentials.some((c) => !presentedIds.has(c.id));
    if (missingCredential) {
        return { ok: false, message: 'Missing required credentials' };
    }
    const failing = Object.entries(result.credential_matches ?? {}).find(([, m]) => !(m as { success: boolean }).success)?.[0];
    return { ok: false, message: `Missing required claims for credential${failing ? ` '${failing}'` : ''}` };
};
