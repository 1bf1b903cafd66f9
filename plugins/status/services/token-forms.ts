import { cborEncode } from '@animo-id/mdoc';
import { preferredMediaType } from '../../../lib/http/accept';
import type { SigningService } from '../../kms/services/signing';

/** The claims both forms of a status list token carry (IETF Token Status List). */
export interface StatusListClaims {
    sub: string;
    iat: number;
    exp: number;
    ttl: number;
    bits: number;
    /** The packed entries, zlib-deflated. */
    lst: Buffer;
}

export const JWT_MEDIA_TYPE = 'application/statuslist+jwt';
export const CWT_MEDIA_TYPE = 'application/statuslist+cwt';

// COSE header labels (RFC 9052, RFC 9360, RFC 9596) and CWT claim keys (RFC 8392; the draft's ttl and status_list).
const COSE_TYP = 16;
const COSE_X5CHAIN = 33;
const CWT_SUB = 2;
const CWT_EXP = 4;
const CWT_IAT = 6;
const CWT_STATUS_LIST = 65533;
const CWT_TTL = 65534;

/** JWT form: `typ: statuslist+jwt`, x5c of the signing chain, `lst` base64url. */
export const signStatusListJwt = (signing: SigningService, tenantId: string, keyChainId: string, claims: StatusListClaims): Promise<string> =>
    signing.jws(tenantId, keyChainId, {
        header: { typ: 'statuslist+jwt' },
        payload: {
            sub: claims.sub,
            iat: claims.iat,
            exp: claims.exp,
            ttl: claims.ttl,
            status_list: { bits: claims.bits, lst: claims.lst.toString('base64url') }
        }
    });

/**
 * CWT form: a tagged COSE_Sign1 (never the CWT tag 61, which the draft forbids) whose protected header carries alg,
 * `typ` and the x5chain, so the certificate a relying party checks is covered by the signature; `lst` is a byte string.
 */
export const signStatusListCwt = async (signing: SigningService, tenantId: string, keyChainId: string, claims: StatusListClaims): Promise<Buffer> => {
    const x5chain = (await signing.material(tenantId, keyChainId)).x5c.map((der) => new Uint8Array(Buffer.from(der, 'base64')));
    const payload = cborEncode(new Map<number, unknown>([
        [CWT_SUB, claims.sub],
        [CWT_IAT, claims.iat],
        [CWT_EXP, claims.exp],
        [CWT_TTL, claims.ttl],
        [CWT_STATUS_LIST, new Map<string, unknown>([['bits', claims.bits], ['lst', new Uint8Array(claims.lst)]])]
    ]));
    const sign1 = await signing.coseSign1(tenantId, keyChainId, {
        payload,
        protectedHeader: new Map<number, unknown>([[COSE_TYP, CWT_MEDIA_TYPE], [COSE_X5CHAIN, x5chain.length === 1 ? x5chain[0] : x5chain]]),
        x5chain: false,
        tagged: true
    });
    return Buffer.from(sign1);
};

/**
 * The form an `Accept` header asks for: the CWT when it ranks application/statuslist+cwt above the JWT, else the
 * JWT (the default, also for a missing header or one naming neither).
 */
export const preferredForm = (accept: string | undefined): 'jwt' | 'cwt' =>
    (preferredMediaType(accept, [JWT_MEDIA_TYPE, CWT_MEDIA_TYPE]) === CWT_MEDIA_TYPE ? 'cwt' : 'jwt');
