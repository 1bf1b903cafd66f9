import Crypto from 'node:crypto';
import type { TrustAnchor } from '../../../lib/verify/trust';

/**
 * `outcome.credentials[].trust` of a verified credential (spec 2.7): which trust list entry admitted it, without
 * diagnostics (no subjects, no list URLs).
 * - matchedIssuer: the name of the trust list entity the chain ended at (the list id when the entity has no name);
 *   absent for a direct `verifierX509Der` anchor of the query, which has no name;
 * - issuanceThumbprint: base64url SHA-256 of the DER of that anchor certificate (the x509_hash form);
 * - matchMode: `ca` when the anchor issued the chain's last certificate, `leaf-pinned` when the anchor is the leaf
 *   itself, `pathEnd-pinned` when the anchor is another certificate the chain carries;
 * - revocationThumbprint: present when a status list was checked and found valid: the thumbprint of the anchor the
 *   status list token's signer had to chain to (lib/verify/status-list requires the credential's own anchor).
 */
export interface TrustOutcome {
    matchedIssuer?: string;
    issuanceThumbprint: string;
    matchMode: 'ca' | 'leaf-pinned' | 'pathEnd-pinned';
    revocationThumbprint?: string;
}

const derOf = (pem: string): Buffer => Buffer.from(pem.replace(/-----[^-]+-----|\s/g, ''), 'base64');

export const trustOutcome = (anchor: TrustAnchor, anchors: TrustAnchor[], chain: string[], statusValid: boolean): TrustOutcome => {
    const der = derOf(anchor.certificate);
    const thumbprint = Crypto.createHash('sha256').update(der).digest('base64url');
    const at = chain.findIndex((c) => Buffer.from(c, 'base64').equals(der));
    const name = anchors.find((a) => a.certificate === anchor.certificate && a.serviceType === anchor.serviceType && a.name)?.name;
    return {
        ...(name ? { matchedIssuer: name } : {}),
        issuanceThumbprint: thumbprint,
        matchMode: at < 0 ? 'ca' : at === 0 ? 'leaf-pinned' : 'pathEnd-pinned',
        ...(statusValid ? { revocationThumbprint: thumbprint } : {})
    };
};

/** The x5c header of an SD-JWT VC's issuer JWT (already verified; [] when it cannot be read). */
export const sdJwtX5c = (presentation: string): string[] => {
    try {
        const header = JSON.parse(Buffer.from(presentation.split('~')[0]!.split('.')[0]!, 'base64url').toString('utf8')) as { x5c?: unknown };
        return Array.isArray(header.x5c) ? header.x5c.filter((c): c is string => typeof c === 'string') : [];
    }
    catch {
        return [];
    }
};
