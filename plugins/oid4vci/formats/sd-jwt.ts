import Crypto from 'node:crypto';
import type { SDJwtVcInstance as SdJwtVcInstanceType } from '@sd-jwt/sd-jwt-vc';
import type { JWK } from 'jose';
import type { SigningService } from '../../kms/services/signing';
import type { VctMetadata } from '../../../resources/credential-config';
import type { CredentialStatus } from '../services/credentials';
import { flattenFields, type FieldRule, type Path } from './claims';

// @sd-jwt names object members by key and array elements by numeric index in `_sd`.
type Frame = { _sd?: Array<string | number> } & { [key: string]: Frame | Array<string | number> | undefined };

const frameAt = (frame: Frame, key: string): Frame => {
    const existing = frame[key];
    if (existing && !Array.isArray(existing)) {
        return existing;
    }
    const created: Frame = {};
    frame[key] = created;
    return created;
};

const markDisclosable = (frame: Frame, value: unknown, path: Path): void => {
    const [head, ...rest] = path;
    if (head === undefined) {
        return;
    }
    const keys: Array<string | number> = head === null
        ? (Array.isArray(value) ? value.map((_, i) => i) : [])
        : [Array.isArray(value) ? Number(head) : String(head)];
    for (const key of keys) {
        const child = (value as Record<string | number, unknown> | undefined)?.[key];
        if (child === undefined) {
            continue;
        }
        if (!rest.length) {
            frame._sd = [...new Set([...frame._sd ?? [], key])];
        }
        else {
            markDisclosable(frameAt(frame, String(key)), child, rest);
        }
    }
};

/** The disclosure frame of @sd-jwt: disclosable fields (nested ones and array elements too) become `_sd` entries. */
export const disclosureFrame = (claims: Record<string, unknown>, fields: FieldRule[]): Frame => {
    const frame: Frame = {};
    for (const field of flattenFields(fields).filter((f) => f.disclosable && f.path.length)) {
        markDisclosable(frame, claims, field.path);
    }
    return frame;
};

const hasher = (data: string | ArrayBuffer, alg: string) => {
    if (alg.toLowerCase() !== 'sha-256') {
        throw new Error(`Unsupported hash algorithm ${alg}`);
    }
    return new Uint8Array(Crypto.createHash('sha256').update(typeof data === 'string' ? data : Buffer.from(data)).digest());
};

const TIME_GRID_SECONDS = 3600;

/**
 * iat and exp of a credential issued now (seconds). Credentials of one batch must not be linkable by their time
 * claims, so both lie on a grid shared by every credential issued in the same period: iat rounded down, exp rounded
 * up. exp is never earlier than now + lifetime; the grid is at most the lifetime and at most an hour, which bounds how
 * much longer than its lifetime a credential stays valid.
 */
const timeClaims = (nowMs: number, lifetimeSeconds?: number): { iat: number; exp?: number } => {
    const grid = Math.min(TIME_GRID_SECONDS, lifetimeSeconds ?? TIME_GRID_SECONDS);
    const now = nowMs / 1000;
    const iat = Math.floor(now / grid) * grid;
    return lifetimeSeconds ? { iat, exp: Math.ceil((now + lifetimeSeconds) / grid) * grid } : { iat };
};

/** The type metadata members a configuration may give, in the order the document lists them. */
const TYPE_METADATA_MEMBERS = ['vct', 'name', 'description', 'extends', 'extends#integrity', 'schema_uri', 'schema_uri#integrity'] as const;

export interface TypeMetadataDocument {
    /** The exact bytes served: vct#integrity covers them, so they must never be re-serialized on the way out. */
    body: string;
    /** W3C Subresource Integrity string of body (sha256-<base64>), the credential's vct#integrity. */
    integrity: string;
}

/**
 * The SD-JWT VC type metadata document of a vct given in object form (the members given, nothing else), or
 * undefined for a plain vct string, which has no document of ours.
 */
export const typeMetadataDocument = (vct: string | VctMetadata | null | undefined): TypeMetadataDocument | undefined => {
    if (!vct || typeof vct === 'string') {
        return undefined;
    }
    const body = JSON.stringify(Object.fromEntries(TYPE_METADATA_MEMBERS.filter((member) => vct[member] !== undefined).map((member) => [member, vct[member]])));
    return { body, integrity: `sha256-${Crypto.createHash('sha256').update(body, 'utf8').digest('base64')}` };
};

export interface SdJwtIssue {
    tenantId: string;
    keyChainId: string;
    issuer: string;
    vct: string;
    /** vct#integrity: when the configuration publishes the type metadata document of its vct. */
    vctIntegrity?: string;
    claims: Record<string, unknown>;
    fields: FieldRule[];
    holderJwk?: JWK;
    lifetimeSeconds?: number;
    /** The credential's token status list entry (draft-ietf-oauth-status-list: the `status` claim). */
    status?: CredentialStatus;
}

/** An SD-JWT VC (typ dc+sd-jwt) signed through the signing service, with the key chain's x5c (root left out). */
export const issueSdJwtVc = async (signing: SigningService, input: SdJwtIssue): Promise<string> => {
    const { x5c } = await signing.material(input.tenantId, input.keyChainId);
    // Loaded on first issuance: a deployment that never issues SD-JWT VCs does not pay its memory.
    const { SDJwtVcInstance } = require('@sd-jwt/sd-jwt-vc') as { SDJwtVcInstance: typeof SdJwtVcInstanceType };
    const sdjwt = new SDJwtVcInstance({
        hasher,
        hashAlg: 'sha-256',
        saltGenerator: () => Crypto.randomBytes(16).toString('base64url'),
        signAlg: 'ES256',
        signer: async (data: string) => Buffer.from(await signing.sign(input.tenantId, input.keyChainId, Buffer.from(data, 'ascii'))).toString('base64url')
    });
    const payload = {
        ...input.claims,
        iss: input.issuer,
        vct: input.vct,
        ...(input.vctIntegrity ? { 'vct#integrity': input.vctIntegrity } : {}),
        ...timeClaims(Date.now(), input.lifetimeSeconds),
        ...(input.holderJwk ? { cnf: { jwk: input.holderJwk } } : {}),
        ...(input.status ? { status: input.status } : {})
    };
    return sdjwt.issue(payload as Parameters<typeof sdjwt.issue>[0], disclosureFrame(input.claims, input.fields) as never, { header: { typ: 'dc+sd-jwt', x5c } });
};
