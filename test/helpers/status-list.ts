import Crypto from 'node:crypto';
import Zlib from 'node:zlib';
import { cborDecode, cborEncode } from '@animo-id/mdoc';
import { expect } from '@hapi/code';
import * as Jose from 'jose';

/** Verifies a status list token with the x5c leaf of its own header, as a relying party without our keys would. */
export const verified = (jwt: string) => Jose.jwtVerify(jwt, async (header) => Jose.importX509(`-----BEGIN CERTIFICATE-----\n${header.x5c![0]}\n-----END CERTIFICATE-----`, 'ES256'), { typ: 'statuslist+jwt' });

/**
 * Decodes a statuslist+cwt with CBOR alone and checks its COSE_Sign1 signature with node:crypto against the leaf of
 * its protected x5chain: what a relying party does. Answers the protected header and the claims.
 */
export const verifiedCwt = (body: Buffer) => {
    // Tag 18 (COSE_Sign1_Tagged) in one initial byte; never the CWT tag 61.
    expect(body[0]).to.equal(0xd2);
    const [protectedBytes, unprotected, payload, signature] = cborDecode(body.subarray(1)) as [Uint8Array, Map<number, unknown>, Uint8Array, Uint8Array];
    const header = cborDecode(protectedBytes) as Map<number, unknown>;
    const x5chain = header.get(33);
    const leaf = new Crypto.X509Certificate(Buffer.from((Array.isArray(x5chain) ? x5chain[0] : x5chain) as Uint8Array));
    const toBeSigned = cborEncode(['Signature1', protectedBytes, new Uint8Array(), payload]);
    expect(Crypto.verify('sha256', toBeSigned, { key: leaf.publicKey, dsaEncoding: 'ieee-p1363' }, signature)).to.be.true();
    return { header, unprotected, leaf, claims: cborDecode(payload) as Map<number, unknown> };
};

/** The entries of a CWT's status_list, inflated. */
export const cwtEntries = (claims: Map<number, unknown>) => {
    const statusList = claims.get(65533) as Map<string, unknown>;
    return { bits: statusList.get('bits') as number, entries: Zlib.inflateSync(statusList.get('lst') as Uint8Array) };
};

