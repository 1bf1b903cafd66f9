import { ChangeCache, changedTenant } from '../../../lib/cache';
import type { Registry } from '../../../lib/registry/registry';
import { VerificationFailure } from '../../../lib/verify/failures';
import type { TrustAnchor } from '../../../lib/verify/trust';
import { trustListKind, type TrustList } from '../../../resources/trust-list';

interface TrustedAuthorityQuery {
    type: string;
    values: unknown[];
}

const derToPem = (base64: string) => `-----BEGIN CERTIFICATE-----\n${base64.replace(/(.{64})/g, '$1\n')}\n-----END CERTIFICATE-----`;

/**
 * The trust anchors that apply to one credential query (contract "Trust list"): the lists its etsi_tl
 * trusted_authorities name (by trustListId or url) and direct verifierX509Der anchors; when it has no
 * trusted_authorities, every trust list of the tenant. Authorities of the types not built yet (openid_federation,
 * aki) never fall back to the tenant's lists: beside etsi_tl ones they add nothing (a credential they alone would
 * admit fails), and alone they fail with verification_error. With no anchor at all, the caller fails closed
 * (no_trust_chain_to_root). Remote ETSI lists plug in here later: a list with a url contributes the anchors fetched
 * from it.
 */
const CACHE_TTL_MS = 10_000;

export class TrustAnchors {
    /** The tenant's trust lists, cached until one changes here (another replica's change within CACHE_TTL_MS). */
    private readonly lists: ChangeCache<[tenantId: string], TrustList[]>;

    constructor(deps: { registry: Registry }) {
        this.lists = new ChangeCache({
            ttlMs: CACHE_TTL_MS,
            load: (tenantId: string) => deps.registry.list({ tenantId, clientId: 'system:oid4vp', roles: [] }, trustListKind)
                .then((all) => all.map((l) => l.spec))
        }).dropOnChange(deps.registry, [trustListKind], changedTenant);
    }

    async forQuery(tenantId: string, trustedAuthorities: TrustedAuthorityQuery[] | undefined): Promise<TrustAnchor[]> {
        const lists = await this.lists.get(tenantId);
        if (!trustedAuthorities?.length) {
            return lists.flatMap(anchorsOf);
        }
        const named = trustedAuthorities.filter((a) => a.type === 'etsi_tl');
        if (!named.length) {
            // Only authority types this deployment cannot evaluate yet (openid_federation, aki): the tenant's lists
            // would trust more than the query asked for, so the credential fails closed.
            throw VerificationFailure.coded('verification_error', `trusted_authorities of type ${[...new Set(trustedAuthorities.map((a) => a.type))].join(', ')} cannot be evaluated by this deployment`);
        }
        const anchors: TrustAnchor[] = [];
        for (const authority of named) {
            for (const value of authority.values as Array<{ trustListId?: string; url?: string; verifierX509Der?: string }>) {
                if (value.verifierX509Der) {
                    anchors.push({ certificate: derToPem(value.verifierX509Der), serviceType: 'pid-issuance' });
                }
                const list = lists.find((l) => (value.trustListId && l.id === value.trustListId) || (value.url && l.url === value.url));
                if (list) {
                    anchors.push(...anchorsOf(list));
                }
                else if (value.url) {
                    unavailable(value.url);
                }
            }
        }
        return anchors;
    }
}

/**
 * A remote list (url) must be fetched and its signature checked before its entries count. Fetching ETSI TS 119 612
 * lists is not built yet, so such a list is unavailable and verification fails closed (trust_list_unavailable)
 * rather than trusting whatever inline entities it also has.
 */
const unavailable = (url: string): never => {
    throw VerificationFailure.coded('trust_list_unavailable', `remote trust list ${url} cannot be loaded by this deployment`);
};

const anchorsOf = (list: TrustList): TrustAnchor[] => {
    if (list.url) {
        unavailable(list.url);
    }
    return (list.entities ?? []).flatMap((entity) => entity.certificates.map((certificate) => ({ certificate, serviceType: entity.serviceType, name: entity.name ?? list.id })));
};
