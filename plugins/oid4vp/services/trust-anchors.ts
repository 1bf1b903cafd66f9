import Crypto from 'node:crypto';
import * as X509 from '@peculiar/x509';
import { ChangeCache, changedTenant } from '../../../lib/cache';
import type { Registry } from '../../../lib/registry/registry';
import { VerificationFailure } from '../../../lib/verify/failures';
import { keyIdentifier, withUnavailable, type TrustAnchor } from '../../../lib/verify/trust';
import { trustListKind, type TrustList } from '../../../resources/trust-list';
import { remoteTrustListsOf } from '../../trust/services/remote-lists';

interface TrustedAuthorityQuery {
    type: string;
    values: unknown[];
}

interface EtsiTlValue {
    trustListId?: string;
    url?: string;
    verifierKey?: Record<string, unknown>;
    verifierX509Der?: string;
}

const derToPem = (base64: string) => `-----BEGIN CERTIFICATE-----\n${base64.replace(/(.{64})/g, '$1\n')}\n-----END CERTIFICATE-----`;

/**
 * The trust anchors that apply to one credential query (contract "Trust list"; spec 2.1.1 trusted_authorities):
 * - no trusted_authorities: every trust list of the tenant;
 * - `etsi_tl`: the lists named by trustListId or url, a direct verifierX509Der anchor, and the anchors of the
 *   tenant's lists whose public key is a verifierKey;
 * - `aki` (HAIP): the anchors of the tenant's lists whose key identifier (SubjectKeyIdentifier, else the RFC 5280
 *   SHA-1 of the key) is one of the values;
 * - `openid_federation`: federation trust chains are not resolved by this deployment: such an authority adds no
 *   anchor (never the tenant's lists instead), and a query naming only federation authorities fails with
 *   verification_error (spec 7.2).
 * A remote list (url) contributes the anchors its verified snapshot holds (plugins/trust). A list that cannot be
 * loaded does not fail the query: the anchors are marked with it (withUnavailable), and only a credential that no
 * other applying anchor trusts fails, with trust_list_unavailable. With no anchor at all the chain check fails
 * closed (no_trust_chain_to_root).
 */
const CACHE_TTL_MS = 10_000;

interface Collected {
    anchors: TrustAnchor[];
    unavailable: string[];
}

export class TrustAnchors {
    /** The tenant's trust lists, cached until one changes here (another replica's change within CACHE_TTL_MS). */
    private readonly lists: ChangeCache<[tenantId: string], TrustList[]>;

    constructor(private readonly deps: { registry: Registry }) {
        this.lists = new ChangeCache({
            ttlMs: CACHE_TTL_MS,
            load: (tenantId: string) => deps.registry.list({ tenantId, clientId: 'system:oid4vp', roles: [] }, trustListKind)
                .then((all) => all.map((l) => l.spec))
        }).dropOnChange(deps.registry, [trustListKind], changedTenant);
    }

    async forQuery(tenantId: string, trustedAuthorities: TrustedAuthorityQuery[] | undefined): Promise<TrustAnchor[]> {
        const lists = await this.lists.get(tenantId);
        if (!trustedAuthorities?.length) {
            const all = await this.collect(tenantId, lists);
            return withUnavailable(all.anchors, all.unavailable);
        }
        const evaluable = trustedAuthorities.filter((a) => a.type === 'etsi_tl' || a.type === 'aki');
        if (!evaluable.length) {
            // Only federation authorities: the tenant's lists would trust more than the query asked for.
            throw VerificationFailure.coded('verification_error', `trusted_authorities of type ${[...new Set(trustedAuthorities.map((a) => a.type))].join(', ')} cannot be evaluated by this deployment (OpenID Federation trust chains are not resolved)`);
        }
        const anchors: TrustAnchor[] = [];
        const unavailable: string[] = [];
        // Every list of the tenant, loaded once, for the authorities that pick anchors by key.
        let everything: Collected | undefined;
        const all = async () => (everything ??= await this.collect(tenantId, lists));
        for (const authority of evaluable) {
            if (authority.type === 'aki') {
                const wanted = new Set(authority.values.filter((v): v is string => typeof v === 'string').map((v) => v.replace(/=+$/, '')));
                const { anchors: candidates, unavailable: missing } = await all();
                for (const candidate of candidates) {
                    if (wanted.has(await cachedKeyIdentifier(candidate.certificate) ?? '')) {
                        anchors.push(candidate);
                    }
                }
                unavailable.push(...missing);
                continue;
            }
            for (const value of authority.values as EtsiTlValue[]) {
                if (value.verifierX509Der) {
                    anchors.push({ certificate: derToPem(value.verifierX509Der), serviceType: 'pid-issuance' });
                }
                if (value.verifierKey) {
                    const wanted = thumbprint(value.verifierKey);
                    const { anchors: candidates, unavailable: missing } = await all();
                    anchors.push(...await filterAnchors(candidates, async (certificate) => wanted !== undefined && thumbprint(certificate.publicKey) === wanted));
                    unavailable.push(...missing);
                }
                if (value.trustListId || value.url) {
                    const list = lists.find((l) => (value.trustListId && l.id === value.trustListId) || (value.url && l.url === value.url));
                    if (list) {
                        const loaded = await this.collect(tenantId, [list]);
                        anchors.push(...loaded.anchors);
                        unavailable.push(...loaded.unavailable);
                    }
                    else if (value.url) {
                        // A url that is not one of the tenant's lists has no signer certificates to check it with.
                        unavailable.push(`the trusted list at ${safeOrigin(value.url)} is not a trust list of the tenant`);
                    }
                }
            }
        }
        return withUnavailable(anchors, [...new Set(unavailable)]);
    }

    /** The inline entities and the remote content of lists; a remote list that cannot be loaded is reported. */
    private async collect(tenantId: string, lists: TrustList[]): Promise<Collected> {
        const remote = remoteTrustListsOf(this.deps.registry);
        // Remote lists load side by side: a cold cache costs the slowest list, not the sum.
        const loaded = await Promise.all(lists.map(async (list): Promise<Collected> => {
            const inline = (list.entities ?? []).flatMap((entity) => entity.certificates.map((certificate) => ({ certificate, serviceType: entity.serviceType, name: entity.name ?? list.id })));
            if (!list.url) {
                return { anchors: inline, unavailable: [] };
            }
            if (!remote) {
                return { anchors: inline, unavailable: [`trust list ${list.id}: remote trust lists are not loaded by this deployment (no trust plugin)`] };
            }
            try {
                return { anchors: [...inline, ...await remote.anchors(tenantId, list)], unavailable: [] };
            }
            catch (err) {
                if (!(err instanceof VerificationFailure)) {
                    throw err;
                }
                return { anchors: inline, unavailable: [err.detail ?? `trust list ${list.id}`] };
            }
        }));
        return { anchors: loaded.flatMap((l) => l.anchors), unavailable: loaded.flatMap((l) => l.unavailable) };
    }
}

const safeOrigin = (url: string): string => {
    try {
        return new URL(url).origin;
    }
    catch {
        return 'an invalid URL';
    }
};

/** RFC 7638 thumbprint of a public JWK or of a certificate's key; undefined for a key node cannot read. */
const thumbprint = (key: Record<string, unknown> | X509.PublicKey): string | undefined => {
    try {
        const object = key instanceof X509.PublicKey
            ? Crypto.createPublicKey({ key: Buffer.from(key.rawData), format: 'der', type: 'spki' })
            : Crypto.createPublicKey({ key: key as Crypto.JsonWebKey, format: 'jwk' });
        const jwk = object.export({ format: 'jwk' });
        const members = jwk.kty === 'EC' ? { crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y }
            : jwk.kty === 'RSA' ? { e: jwk.e, kty: jwk.kty, n: jwk.n }
                : { crv: jwk.crv, kty: jwk.kty, x: jwk.x };
        return Crypto.createHash('sha256').update(JSON.stringify(members)).digest('base64url');
    }
    catch {
        return undefined;
    }
};

/** Key identifiers by certificate PEM: a list of hundreds of anchors is not hashed again for every query. */
const keyIdentifiers = new Map<string, string>();
const KEY_IDENTIFIERS_MAX = 10_000;

/** undefined for an entry that does not parse: it matches nothing. */
const cachedKeyIdentifier = async (pem: string): Promise<string | undefined> => {
    let id = keyIdentifiers.get(pem);
    if (id === undefined) {
        try {
            id = await keyIdentifier(new X509.X509Certificate(pem));
        }
        catch {
            return undefined;
        }
        if (keyIdentifiers.size >= KEY_IDENTIFIERS_MAX) {
            keyIdentifiers.delete(keyIdentifiers.keys().next().value as string);
        }
        keyIdentifiers.set(pem, id);
    }
    return id;
};

const filterAnchors = async (anchors: TrustAnchor[], keep: (certificate: X509.X509Certificate) => Promise<boolean>): Promise<TrustAnchor[]> => {
    const kept: TrustAnchor[] = [];
    for (const anchor of anchors) {
        try {
            if (await keep(new X509.X509Certificate(anchor.certificate))) {
                kept.push(anchor);
            }
        }
        catch {
            // an unparsable entry matches nothing
        }
    }
    return kept;
};
