import Crypto from 'node:crypto';
import Hapi from '@hapi/hapi';
import { cborDecode, cborEncode, DataItem, Document } from '@animo-id/mdoc';
import { createHeaderAndPayload, StatusList, type BitsPerStatus } from '@sd-jwt/jwt-status-list';
import { SDJwtVcInstance } from '@sd-jwt/sd-jwt-vc';
import * as Jose from 'jose';
import { mdocContext } from '../../lib/mdoc/context';
import type { Party } from './pki';

/**
 * A credential issuer outside the service for status list tests: it signs SD-JWT VCs (@sd-jwt/sd-jwt-vc) and mdocs
 * (@animo-id/mdoc) that carry `status.status_list {idx, uri}`, and serves Status List Tokens (made with
 * @sd-jwt/jwt-status-list, signed with jose) from a hapi server on 127.0.0.1 that counts the requests it gets.
 */

export interface StatusRef {
    idx: number;
    uri: string;
}

const sha256 = (data: string | ArrayBuffer | Uint8Array) =>
    new Uint8Array(Crypto.createHash('sha256').update(typeof data === 'string' ? data : Buffer.from(data as ArrayBuffer)).digest());

const es256 = (data: Uint8Array | string, key: Crypto.KeyObject) =>
    Crypto.sign('sha256', typeof data === 'string' ? Buffer.from(data) : data, { key, dsaEncoding: 'ieee-p1363' });

const derOf = (party: Party) => Buffer.from(party.cert.rawData).toString('base64');

/** An SD-JWT VC (dc+sd-jwt) signed by `issuer` (x5c: its certificate), bound to `holderJwk`, with `status` when given. */
export const issueSdJwtVcWithStatus = async (issuer: Party, input: { vct: string; claims: Record<string, unknown>; holderJwk: Jose.JWK; status?: unknown }): Promise<string> => {
    const sdjwt = new SDJwtVcInstance({
        hasher: sha256,
        hashAlg: 'sha-256',
        saltGenerator: () => Crypto.randomBytes(16).toString('base64url'),
        signAlg: 'ES256',
        signer: (data: string) => es256(data, issuer.privateKey).toString('base64url')
    });
    const now = Math.floor(Date.now() / 1000);
    const payload = {
        iss: 'https://issuer.example',
        vct: input.vct,
        iat: now,
        exp: now + 3600,
        cnf: { jwk: input.holderJwk },
        ...(input.status === undefined ? {} : { status: input.status as never }),
        ...input.claims
    };
    const frame = { _sd: Object.keys(input.claims) } as never;
    return sdjwt.issue(payload, frame, { header: { x5c: [derOf(issuer)] } });
};

/**
 * An mdoc IssuerSigned (base64url CBOR) signed by `issuer` whose MSO carries `status` when given. Document.sign has
 * no status, so the MSO it signed is decoded, given `status` (a CBOR map, as ISO mdoc status lists use), and signed
 * again as a COSE_Sign1 with the same protected and unprotected headers.
 */
export const issueMdocWithStatus = async (issuer: Party, input: { docType: string; namespaces: Record<string, Record<string, unknown>>; deviceJwk: Jose.JWK; status?: Map<string, unknown> }): Promise<string> => {
    const ctx = mdocContext(async (data) => new Uint8Array(es256(data, issuer.privateKey)));
    const now = new Date(Math.floor(Date.now() / 1000) * 1000);
    let document = new Document(input.docType, { crypto: ctx.crypto });
    for (const [namespace, values] of Object.entries(input.namespaces)) {
        document = document.addIssuerNameSpace(namespace, values);
    }
    const { kty, crv, x, y } = issuer.privateJwk;
    const signed = await document
        .useDigestAlgorithm('SHA-256')
        .addValidityInfo({ signed: now, validFrom: now, validUntil: new Date(now.getTime() + 365 * 86_400_000) })
        .addDeviceKeyInfo({ deviceKey: input.deviceJwk as never })
        .sign({ issuerPrivateKey: { kty, crv, x, y } as never, issuerCertificate: issuer.cert.toString('pem'), alg: 'ES256' }, { crypto: ctx.crypto, cose: ctx.cose });
    const issuerSigned = cborDecode(cborEncode(signed.prepare().get('issuerSigned'))) as Map<string, unknown>;
    if (!input.status) {
        return Buffer.from(cborEncode(issuerSigned)).toString('base64url');
    }
    const [protectedBytes, unprotected, payload] = issuerSigned.get('issuerAuth') as [Uint8Array, unknown, Uint8Array, Uint8Array];
    const mso = (cborDecode(payload) as DataItem).data as Map<string, unknown>;
    mso.set('status', input.status);
    const newPayload = cborEncode(new DataItem({ data: mso }));
    const toBeSigned = cborEncode(['Signature1', protectedBytes, new Uint8Array(0), newPayload]);
    issuerSigned.set('issuerAuth', [protectedBytes, unprotected, newPayload, new Uint8Array(es256(toBeSigned, issuer.privateKey))]);
    return Buffer.from(cborEncode(issuerSigned)).toString('base64url');
};

/** The MSO `status` of an mdoc: `{status_list: {idx, uri}}` as CBOR maps. */
export const mdocStatus = (ref: StatusRef) => new Map<string, unknown>([['status_list', new Map<string, unknown>([['idx', ref.idx], ['uri', ref.uri]])]]);

export interface TokenOptions {
    bits: BitsPerStatus;
    /** Entry values from index 0; the list is padded with zeros to `size` entries. */
    values: number[];
    size?: number;
    /** Leaf first, without the root; signed with the first party's key. */
    chain: Party[];
    sub: string;
    /** Seconds relative to now. */
    iat?: number;
    exp?: number | null;
    ttl?: number | null;
    typ?: string;
    /** Flip a byte of the signature. */
    breakSignature?: boolean;
}

/** A Status List Token (statuslist+jwt) made with @sd-jwt/jwt-status-list and signed with jose. */
export const statusListToken = async (options: TokenOptions): Promise<string> => {
    const entries = Array.from({ length: Math.max(options.size ?? 128, options.values.length) }, (_v, i) => options.values[i] ?? 0);
    const list = new StatusList(entries, options.bits);
    const now = Math.floor(Date.now() / 1000);
    const iat = now + (options.iat ?? 0);
    const { header, payload } = createHeaderAndPayload(list, {
        sub: options.sub,
        iat,
        ...(options.exp === null ? {} : { exp: now + (options.exp ?? 3600) }),
        ...(options.ttl === null ? {} : { ttl: options.ttl ?? 600 })
    }, { alg: 'ES256', typ: 'statuslist+jwt', x5c: options.chain.map(derOf) });
    const jwt = await new Jose.SignJWT(payload as Jose.JWTPayload)
        .setProtectedHeader({ ...header, typ: options.typ ?? header.typ } as Jose.JWTHeaderParameters)
        .sign(options.chain[0]!.privateKey);
    if (!options.breakSignature) {
        return jwt;
    }
    const [h, p, s] = jwt.split('.');
    const signature = Buffer.from(s!, 'base64url');
    signature[5] ^= 0xff;
    return `${h}.${p}.${signature.toString('base64url')}`;
};

/** What the list server answers for a list: a token made at each request, or an HTTP error status. */
export type ListAnswer = { token: (uri: string) => Promise<string> } | { status: number };

export interface StatusListServer {
    url: string;
    /** The uri of list `id`. */
    uri(id: string): string;
    /** Sets what list `id` answers. */
    serve(id: string, answer: ListAnswer): void;
    /** Requests received per list id, with their Accept header. */
    requests(id: string): Array<{ accept?: string }>;
    stop(): Promise<void>;
}

export const startStatusListServer = async (): Promise<StatusListServer> => {
    const answers = new Map<string, ListAnswer>();
    const received = new Map<string, Array<{ accept?: string }>>();
    const server = Hapi.server({ host: '127.0.0.1', port: 0 });
    let url = '';
    server.route({
        method: 'GET',
        path: '/lists/{id}',
        handler: async (request, h) => {
            const { id } = request.params as { id: string };
            const accept = request.headers.accept as string | undefined;
            received.set(id, [...received.get(id) ?? [], accept === undefined ? {} : { accept }]);
            const answer = answers.get(id);
            if (!answer) {
                return h.response('unknown list').code(404);
            }
            if ('status' in answer) {
                return h.response('list server error').code(answer.status);
            }
            return h.response(await answer.token(`${url}/lists/${id}`)).type('application/statuslist+jwt');
        }
    });
    await server.start();
    url = server.info.uri;
    return {
        url,
        uri: (id) => `${url}/lists/${id}`,
        serve: (id, answer) => answers.set(id, answer),
        requests: (id) => received.get(id) ?? [],
        stop: () => server.stop()
    };
};
