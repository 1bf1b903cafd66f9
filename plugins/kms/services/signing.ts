import { cborEncode } from '@animo-id/mdoc';
import type { JWK } from 'jose';
import { ChangeCache, changedResource } from '../../../lib/cache';
import { pemToX5c } from '../../../lib/kms/certificates';
import type { PublicJwk } from '../../../lib/kms/types';
import type { KeyChainKeyModel } from '../models';
import type { Registry } from '../../../lib/registry/registry';
import { providerKeyRef, type KeyChainService } from './key-chains';
import type { KmsService } from './kms-service';
import { keyChainKind } from '../../../resources/key-chain';

export interface SigningMaterial {
    keyChainId: string;
    publicJwk: PublicJwk;
    /** PEM, leaf first, the root CA left out. */
    certificateChain: string[];
    /** base64 DER of certificateChain: what `x5c` and `x5chain` carry. */
    x5c: string[];
    /** Public keys of earlier keys of the chain, still valid for verification. */
    previousPublicJwks: PublicJwk[];
}

const b64url = (data: Uint8Array | string) => Buffer.from(data).toString('base64url');

// COSE (RFC 9052) labels and values used here.
const COSE_ALG = 1;
const COSE_X5CHAIN = 33;
const COSE_ES256 = -7;
const COSE_SIGN1_TAG = 18;

const CACHE_TTL_MS = 30_000;

// CBOR tag 18 (COSE_Sign1): major type 6 with the value in the initial byte.
const COSE_SIGN1_TAG_BYTE = 0xc0 | COSE_SIGN1_TAG;

/**
 * The one signing service: everything that signs (JWS for request objects, tokens and SD-JWT; COSE_Sign1 for mdoc)
 * asks it with a tenant and a key chain id. Key material stays in the KMS provider.
 */
export class SigningService {
    /**
     * Key material is read on every signature, so it is cached: dropped when the chain changes in this process (it
     * was rotated, replaced or deleted), and at most CACHE_TTL_MS old when another replica rotated the chain (its
     * previous key stays valid meanwhile).
     */
    private readonly rows: ChangeCache<[tenantId: string, keyChainId: string], KeyChainKeyModel>;
    private readonly derived = new WeakMap<KeyChainKeyModel, SigningMaterial>();

    constructor(private readonly kms: KmsService, keyChains: KeyChainService, registry: Registry) {
        this.rows = new ChangeCache({ ttlMs: CACHE_TTL_MS, load: (tenantId: string, keyChainId: string) => keyChains.material(tenantId, keyChainId) })
            .dropOnChange(registry, [keyChainKind], changedResource);
    }

    /** Inside a write, the cache reads the material in its transaction without keeping it (ChangeCache.get). */
    private row(tenantId: string, keyChainId: string): Promise<KeyChainKeyModel> {
        return this.rows.get(tenantId, keyChainId);
    }

    async material(tenantId: string, keyChainId: string): Promise<SigningMaterial> {
        const row = await this.row(tenantId, keyChainId);
        // Parsing certificates costs more than a signature: keep the result with the cached row.
        const cached = this.derived.get(row);
        if (cached) {
            return cached;
        }
        const material = {
            keyChainId,
            publicJwk: row.publicJwk as PublicJwk,
            certificateChain: row.certificateChain,
            x5c: row.certificateChain.map(pemToX5c),
            previousPublicJwks: row.previousKeys.map((k) => k.publicJwk as PublicJwk)
        };
        this.derived.set(row, material);
        return material;
    }

    /** ES256 over data: raw r || s. */
    async sign(tenantId: string, keyChainId: string, data: Uint8Array): Promise<Uint8Array> {
        const row = await this.row(tenantId, keyChainId);
        const { store } = await this.kms.provider(tenantId, row.kmsProvider);
        return store.sign(providerKeyRef(row.keyRef), data, 'ES256');
    }

    /** A compact JWS (ES256). With `x5c` (default) the header carries the chain; otherwise a `kid` if given. */
    async jws(tenantId: string, keyChainId: string, options: { header?: Record<string, unknown>; payload: Record<string, unknown> | string | Uint8Array; x5c?: boolean }): Promise<string> {
        const header: Record<string, unknown> = { ...options.header, alg: 'ES256' };
        if (options.x5c !== false) {
            header.x5c = (await this.material(tenantId, keyChainId)).x5c;
        }
        const payload = typeof options.payload === 'string' || options.payload instanceof Uint8Array ? options.payload : JSON.stringify(options.payload);
        const signingInput = `${b64url(JSON.stringify(header))}.${b64url(payload)}`;
        const signature = await this.sign(tenantId, keyChainId, Buffer.from(signingInput, 'ascii'));
        return `${signingInput}.${b64url(signature)}`;
    }

    /**
     * A COSE_Sign1 (ES256) with the chain in the unprotected x5chain header unless `x5chain: false`. Untagged by
     * default, as mdoc's IssuerAuth and DeviceSignature carry it; `tagged` adds tag 18.
     */
    async coseSign1(tenantId: string, keyChainId: string, options: { payload: Uint8Array; protectedHeader?: Map<number, unknown>; unprotectedHeader?: Map<number, unknown>; externalAad?: Uint8Array; x5chain?: boolean; tagged?: boolean }): Promise<Uint8Array> {
        const protectedMap = new Map<number, unknown>([[COSE_ALG, COSE_ES256], ...options.protectedHeader ?? []]);
        const protectedBytes = cborEncode(protectedMap);
        const unprotected = new Map<number, unknown>(options.unprotectedHeader ?? []);
        if (options.x5chain !== false) {
            const x5c = (await this.material(tenantId, keyChainId)).x5c.map((c) => Buffer.from(c, 'base64'));
            unprotected.set(COSE_X5CHAIN, x5c.length === 1 ? x5c[0] : x5c);
        }
        const toBeSigned = cborEncode(['Signature1', protectedBytes, options.externalAad ?? new Uint8Array(), options.payload]);
        const signature = await this.sign(tenantId, keyChainId, toBeSigned);
        const sign1 = cborEncode([protectedBytes, unprotected, options.payload, signature]);
        return options.tagged ? Buffer.concat([Buffer.from([COSE_SIGN1_TAG_BYTE]), sign1]) : sign1;
    }

    /** The public JWK with the id callers publish it under (e.g. in a tenant JWKS). */
    async publicJwk(tenantId: string, keyChainId: string): Promise<JWK> {
        return { ...(await this.material(tenantId, keyChainId)).publicJwk, kid: keyChainId, alg: 'ES256', use: 'sig' };
    }
}
