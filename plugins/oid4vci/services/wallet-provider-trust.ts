import type Crypto from 'node:crypto';
import * as Jose from 'jose';
import { jwsPayload, verifyEcdsaJws } from '../../../lib/crypto/jws';
import { VerificationFailure } from '../../../lib/verify/failures';
import { verifyCertificateChain, type TrustAnchor } from '../../../lib/verify/trust';

/**
 * What wallet attestations (client authentication) and key attestations (credential endpoint) share: a JWT signed
 * by a wallet provider whose x5c must chain to a `wallet-provider` entry of the tenant's trust lists, without
 * carrying that anchor, from a leaf that is not self-signed (HAIP). Each caller answers with its own OAuth error
 * (`invalid_client`, `invalid_proof`), so failures are built by the caller's `fail`.
 */

/**
 * The trust anchors of a tenant (every trust list entry; only wallet-provider ones are accepted here): the TrustAnchors
 * of the verifier side, so inline entities and remote lists (ETSI TS 119 612 XML and TS 119 602 JWT lists of wallet
 * providers, loaded by the trust plugin) decide here exactly as for credentials. A remote list that cannot be loaded
 * fails only the attestations that no other anchor trusts, with trust_list_unavailable.
 */
export interface WalletProviderTrust {
    forQuery(tenantId: string, trustedAuthorities: undefined): Promise<TrustAnchor[]>;
}

export type Fail = (description: string) => Error;

/** What a failed x5c check tells the wallet: the reason, never another tenant's or list's details. */
const trustFailure = (code: string, what: string): string | undefined => ({
    x5c_missing: `The ${what} has no x5c certificate chain`,
    no_trust_chain_to_root: `The ${what}'s x5c does not chain to a wallet provider this issuer trusts`,
    trust_chain_not_trusted: `The ${what}'s x5c chains to a trust list entry that is not a wallet provider`,
    certificate_expired: `A certificate of the ${what}'s x5c is expired or not yet valid`,
    trust_list_unavailable: `The trust lists of this issuer cannot be loaded, so no ${what} can be verified`
} as Record<string, string>)[code];

/** The public key of the x5c leaf once the chain is trusted as a wallet provider's at `now`. */
export const walletProviderKey = async (trust: WalletProviderTrust, tenantId: string, x5c: unknown, now: Date, what: string, fail: Fail): Promise<Crypto.KeyObject> => {
    try {
        // Every anchor of the tenant goes in, so a chain to another entry is told apart from one to none.
        const anchors = await trust.forQuery(tenantId, undefined);
        const { leafPublicKey } = await verifyCertificateChain(x5c as string[] | undefined, anchors, now, { serviceTypes: ['wallet-provider'], anchorExcluded: true });
        return leafPublicKey;
    }
    catch (err) {
        if (!(err instanceof VerificationFailure)) {
            throw err;
        }
        const known = err.code && err.code !== 'verification_error' ? trustFailure(err.code, what) : undefined;
        throw fail(known ?? `The ${what}'s x5c is not acceptable: ${err.detail ?? err.message}`);
    }
};

export const isObject = (value: unknown): value is Record<string, unknown> =>
    typeof value === 'object' && value !== null && !Array.isArray(value);

/** The protected header of a compact JWS, or {} when it is not a JSON object (jose then says what is wrong). */
const protectedHeaderOf = (jwt: string): Record<string, unknown> => {
    try {
        const header: unknown = JSON.parse(Buffer.from(jwt.slice(0, jwt.indexOf('.')), 'base64url').toString('utf8'));
        return isObject(header) ? header : {};
    }
    catch {
        return {};
    }
};

/** The JWS's claims once its signature verifies with `key` under `alg`. */
export const verifiedClaims = async (jwt: string, key: Crypto.KeyObject, alg: string, what: string, keyName: string, fail: Fail): Promise<Record<string, unknown>> => {
    let payload: Uint8Array;
    // ECDSA on node:crypto (see lib/crypto/jws.ts); anything else, and any malformed header, through jose.
    const check = await verifyEcdsaJws(jwt, protectedHeaderOf(jwt), key, alg);
    if (check === 'invalid') {
        throw fail(`The ${what} signature does not verify with ${keyName}`);
    }
    try {
        ({ payload } = check === 'valid' ? { payload: jwsPayload(jwt) } : await Jose.compactVerify(jwt, key, { algorithms: [alg] }));
    }
    catch (err) {
        if (err instanceof Jose.errors.JWSSignatureVerificationFailed) {
            throw fail(`The ${what} signature does not verify with ${keyName}`);
        }
        // jose's own words: an alg that does not fit the key, an unknown crit parameter, ...
        throw fail(`The ${what} cannot be verified with ${keyName}: ${(err as Error).message}`);
    }
    let claims: unknown;
    try {
        claims = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(payload));
    }
    catch {
        throw fail(`The ${what} payload is not JSON`);
    }
    if (!isObject(claims)) {
        throw fail(`The ${what} payload is not a JSON object`);
    }
    return claims;
};
