import Crypto from 'node:crypto';
import * as X509 from '@peculiar/x509';
import { VerificationFailure } from './failures';

/**
 * X.509 trust for credential issuers (contract "Trust list"): a credential verifies when its x5c / x5chain ends in
 * a certificate of a `pid-issuance` or `eaa-issuance` entry; it fails with trust_chain_not_trusted when it only
 * chains to entries of another service type, and with no_trust_chain_to_root when it chains to none (also when
 * there is no anchor at all: fail closed). Wallet and key attestations use the same check with a ChainPolicy: their
 * chains must end at a `wallet-provider` entry, without carrying it, from a leaf that is not self-signed (HAIP).
 *
 * Anchors are plain data (a PEM and the service type of the entry it came from), so entities configured inline,
 * ETSI TS 119 612 lists or JWT lists of trusted entities fetched from a url all flatten into the same array. This
 * module never fetches anything: whoever loads the lists marks the anchor array with the lists it could not load
 * (withUnavailable), and a chain that then finds no trusted anchor fails with trust_list_unavailable instead of
 * no_trust_chain_to_root / trust_chain_not_trusted, because the missing list might have trusted it (spec 7.2: fail
 * closed, and only for the credentials that depend on the list).
 */

export type TrustServiceType = 'pid-issuance' | 'eaa-issuance' | 'wallet-provider' | 'other';

export interface TrustAnchor {
    /** PEM of a certificate of the trust list entry. */
    certificate: string;
    serviceType: TrustServiceType;
    /** The name of the trust list entity it came from, for the trust outcome (never part of trust decisions). */
    name?: string;
}

export interface TrustedChain {
    /** The public key of the leaf (first x5c certificate), for the credential signature. */
    leafPublicKey: Crypto.KeyObject;
    /** The anchor the chain ends in (an entry of one of the accepted service types). */
    anchor: TrustAnchor;
}

const UNAVAILABLE = Symbol('unavailable trust lists');

/** The anchors, marked with why the lists that should have added to them could not be loaded (none: unmarked). */
export const withUnavailable = (anchors: TrustAnchor[], reasons: string[]): TrustAnchor[] => {
    if (reasons.length) {
        Object.defineProperty(anchors, UNAVAILABLE, { value: [...reasons], enumerable: false });
    }
    return anchors;
};

/** The reasons withUnavailable attached (empty when every list that applies was loaded). */
export const unavailableLists = (anchors: TrustAnchor[]): string[] => (anchors as { [UNAVAILABLE]?: string[] })[UNAVAILABLE] ?? [];

/**
 * The key identifier of a certificate (HAIP `aki` trusted authorities match it): its SubjectKeyIdentifier, or
 * without one the SHA-1 of its subjectPublicKey (RFC 5280 4.2.1.2 method 1), as base64url.
 */
export const keyIdentifier = async (certificate: X509.X509Certificate): Promise<string> => {
    const ski = certificate.getExtension(X509.SubjectKeyIdentifierExtension);
    if (ski) {
        return Buffer.from(ski.keyId, 'hex').toString('base64url');
    }
    const computed = await X509.SubjectKeyIdentifierExtension.create(certificate.publicKey);
    return Buffer.from(computed.keyId, 'hex').toString('base64url');
};

/** Service types whose certificates may issue credentials. */
export const ISSUANCE_SERVICE_TYPES: readonly TrustServiceType[] = ['pid-issuance', 'eaa-issuance'];

/** What a chain is checked for beyond the defaults (credential issuers: issuance anchors, anchor may be included). */
export interface ChainPolicy {
    /** Service types whose anchors make a chain trusted; default ISSUANCE_SERVICE_TYPES. */
    serviceTypes?: readonly TrustServiceType[];
    /**
     * HAIP rules for wallet and key attestations: the x5c must not include the trust anchor it chains to and its
     * leaf must not be self-signed (verification_error otherwise).
     */
    anchorExcluded?: boolean;
}

/** Longer chains are refused (verification_error): no issuer PKI needs more, and each link costs a signature check. */
export const MAX_CHAIN_LENGTH = 10;

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

const parseX5c = (entry: unknown, index: number): X509.X509Certificate => {
    if (typeof entry !== 'string' || !entry.length || !BASE64.test(entry)) {
        throw VerificationFailure.coded('verification_error', `x5c[${index}] is not base64`);
    }
    try {
        return new X509.X509Certificate(Buffer.from(entry, 'base64'));
    }
    catch (error) {
        throw VerificationFailure.coded('verification_error', `x5c[${index}] is not an X.509 certificate: ${(error as Error).message}`);
    }
};

interface ParsedAnchor {
    anchor: TrustAnchor;
    certificate: X509.X509Certificate;
    der: Buffer;
}

/** Unparsable anchors are skipped: they can only ever take trust away, never add it. */
const parseAnchors = (anchors: TrustAnchor[]): ParsedAnchor[] => {
    const parsed: ParsedAnchor[] = [];
    for (const anchor of anchors ?? []) {
        try {
            const certificate = new X509.X509Certificate(anchor.certificate);
            parsed.push({ anchor, certificate, der: Buffer.from(certificate.rawData) });
        }
        catch {
            // a malformed trust list entry matches nothing
        }
    }
    return parsed;
};

const isCa = (certificate: X509.X509Certificate): boolean =>
    certificate.getExtension(X509.BasicConstraintsExtension)?.ca === true;

/** `child` names `parent` as issuer, `parent` is a CA, and `parent`'s key verifies `child`'s signature. */
const issuedBy = async (child: X509.X509Certificate, parent: X509.X509Certificate): Promise<boolean> => {
    if (child.issuer !== parent.subject || !isCa(parent)) {
        return false;
    }
    try {
        return await child.verify({ publicKey: parent.publicKey, signatureOnly: true });
    }
    catch {
        return false;
    }
};

/** Names itself as issuer and its own key verifies its signature. */
const isSelfSigned = async (certificate: X509.X509Certificate): Promise<boolean> => {
    if (certificate.subject !== certificate.issuer) {
        return false;
    }
    try {
        return await certificate.verify({ publicKey: certificate.publicKey, signatureOnly: true });
    }
    catch {
        return false;
    }
};

const withinValidity = (certificate: X509.X509Certificate, now: Date): boolean =>
    certificate.notBefore.getTime() <= now.getTime() && now.getTime() <= certificate.notAfter.getTime();

interface Path {
    /** Index of the last chain certificate that is part of the path. */
    end: number;
    anchor: ParsedAnchor;
}

const describe = (certificate: X509.X509Certificate) => `subject "${certificate.subject}", issuer "${certificate.issuer}"`;

/**
 * Validates an x5c chain (base64 DER, leaf first) against trust anchors at `now`. Checks, in this order:
 * - x5c absent or empty: x5c_missing; an entry that is not base64 DER X.509, or more than MAX_CHAIN_LENGTH
 *   certificates: verification_error;
 * - every certificate is issued (names, CA flag, signature) by the next one; a broken link: no_trust_chain_to_root;
 * - a path ends at an anchor: a chain certificate equal to an anchor (same DER; also when the chain includes the
 *   anchor or the anchor is the leaf itself), or a chain certificate issued by an anchor whose subject equals its
 *   issuer; none (or no anchors at all): no_trust_chain_to_root. The shortest path to an issuance anchor wins;
 * - the path only ends at anchors of other service types than `policy.serviceTypes` (default the issuance types):
 *   trust_chain_not_trusted;
 * - with `policy.anchorExcluded`: a self-signed leaf (checked first), or an x5c that includes the trusted anchor:
 *   verification_error;
 * - a certificate of the path, or the anchor, outside its validity period: certificate_expired.
 * Trust is decided before validity, so an expired certificate of an untrusted issuer reports the trust failure.
 */
const CACHE_TTL_MS = 60_000;
const CACHE_MAX = 1000;
const verifiedChains = new Map<string, { chain: TrustedChain; from: number; until: number }>();

/**
 * Chain building parses certificates and checks signatures: costlier than the credential check itself, and the same
 * few issuer chains come again and again. A successful result is kept for a minute, or until the first certificate
 * involved expires, keyed by the exact chain and anchors. Failures are never cached.
 */
export const verifyCertificateChain = async (x5c: string[] | undefined | null, anchors: TrustAnchor[], now: Date, policy: ChainPolicy = {}): Promise<TrustedChain> => {
    const serviceTypes = policy.serviceTypes ?? ISSUANCE_SERVICE_TYPES;
    const anchorExcluded = policy.anchorExcluded === true;
    // The policy is part of the key: a chain trusted for one set of service types is not for another.
    const key = Array.isArray(x5c) && x5c.length
        ? Crypto.createHash('sha256').update(JSON.stringify([x5c, anchors.map((a) => [a.serviceType, a.certificate]).sort(), [...serviceTypes].sort(), anchorExcluded])).digest('base64url')
        : undefined;
    const cached = key ? verifiedChains.get(key) : undefined;
    if (cached && cached.from <= now.getTime() && now.getTime() < cached.until) {
        return cached.chain;
    }
    const chain = await buildChain(x5c, anchors, now, serviceTypes, anchorExcluded);
    if (key) {
        if (verifiedChains.size >= CACHE_MAX) {
            verifiedChains.delete(verifiedChains.keys().next().value as string);
        }
        verifiedChains.set(key, { chain: { leafPublicKey: chain.leafPublicKey, anchor: chain.anchor }, from: now.getTime(), until: Math.min(now.getTime() + CACHE_TTL_MS, chain.validUntil) });
    }
    return { leafPublicKey: chain.leafPublicKey, anchor: chain.anchor };
};

const buildChain = async (x5c: string[] | undefined | null, anchors: TrustAnchor[], now: Date, serviceTypes: readonly TrustServiceType[], anchorExcluded: boolean): Promise<TrustedChain & { validUntil: number }> => {
    if (!Array.isArray(x5c) || !x5c.length) {
        throw VerificationFailure.coded('x5c_missing', 'no x5c certificate chain');
    }
    if (x5c.length > MAX_CHAIN_LENGTH) {
        throw VerificationFailure.coded('verification_error', `x5c has ${x5c.length} certificates (at most ${MAX_CHAIN_LENGTH})`);
    }
    const chain = x5c.map(parseX5c);
    if (anchorExcluded && await isSelfSigned(chain[0]!)) {
        throw VerificationFailure.coded('verification_error', `the x5c leaf is self-signed (${describe(chain[0]!)})`);
    }
    for (let i = 0; i + 1 < chain.length; i++) {
        if (!(await issuedBy(chain[i]!, chain[i + 1]!))) {
            throw VerificationFailure.coded('no_trust_chain_to_root', `x5c[${i}] is not issued by x5c[${i + 1}] (${describe(chain[i]!)})`);
        }
    }
    const parsedAnchors = parseAnchors(anchors);
    // A trust failure while a list that applies could not be loaded: that list might have trusted the chain.
    const untrusted = (code: 'no_trust_chain_to_root' | 'trust_chain_not_trusted', detail: string): VerificationFailure => {
        const missing = unavailableLists(anchors);
        return missing.length
            ? VerificationFailure.coded('trust_list_unavailable', `${missing.join('; ')} (without it: ${detail})`)
            : VerificationFailure.coded(code, detail);
    };
    if (!parsedAnchors.length) {
        throw untrusted('no_trust_chain_to_root', 'no trust anchors apply');
    }

    const paths: Path[] = [];
    for (let end = 0; end < chain.length; end++) {
        const certificate = chain[end]!;
        const der = Buffer.from(certificate.rawData);
        for (const anchor of parsedAnchors) {
            if (anchor.der.equals(der)) {
                paths.push({ end, anchor });
            }
            else if (await issuedBy(certificate, anchor.certificate)) {
                paths.push({ end, anchor });
            }
        }
    }
    if (!paths.length) {
        throw untrusted('no_trust_chain_to_root', `no path to a trust anchor (${describe(chain[chain.length - 1]!)})`);
    }
    let trusted = paths.filter((p) => serviceTypes.includes(p.anchor.anchor.serviceType));
    if (!trusted.length) {
        throw untrusted('trust_chain_not_trusted', `the chain ends at ${[...new Set(paths.map((p) => p.anchor.anchor.serviceType))].join(', ')} entries only`);
    }
    if (anchorExcluded) {
        // Only paths to an anchor the x5c does not carry count (a list may hold a root and its intermediate too).
        const excluding = trusted.filter((p) => !chain.some((c) => p.anchor.der.equals(Buffer.from(c.rawData))));
        if (!excluding.length) {
            throw VerificationFailure.coded('verification_error', `the x5c includes its trust anchor (${describe(trusted[0]!.anchor.certificate)})`);
        }
        trusted = excluding;
    }

    // Prefer a path whose certificates are all valid; the shortest first.
    const ordered = trusted.sort((a, b) => a.end - b.end);
    const valid = ordered.find((path) => chain.slice(0, path.end + 1).every((c) => withinValidity(c, now)) && withinValidity(path.anchor.certificate, now));
    if (!valid) {
        const path = ordered[0]!;
        const expired = [...chain.slice(0, path.end + 1), path.anchor.certificate].find((c) => !withinValidity(c, now))!;
        throw VerificationFailure.coded('certificate_expired', `certificate outside its validity period (${describe(expired)}, ${expired.notBefore.toISOString()} to ${expired.notAfter.toISOString()})`);
    }

    const leaf = chain[0]!;
    let leafPublicKey: Crypto.KeyObject;
    try {
        leafPublicKey = Crypto.createPublicKey({ key: Buffer.from(leaf.publicKey.rawData), format: 'der', type: 'spki' });
    }
    catch (error) {
        throw VerificationFailure.coded('verification_error', `unusable leaf public key: ${(error as Error).message}`);
    }
    const involved = [...chain.slice(0, valid.end + 1), valid.anchor.certificate];
    return { leafPublicKey, anchor: valid.anchor.anchor, validUntil: Math.min(...involved.map((c) => c.notAfter.getTime())) };
};
