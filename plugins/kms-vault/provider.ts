import Joi from 'joi';
import { NotFoundError, ValidationError } from '../../lib/errors';
import { ecP256JwkFromSpki } from '../../lib/kms/jwk';
import { serviceUrlSchema } from '../../lib/kms/schemas';
import { invalidAnswer, jsonBody, jsonObjectAnswer, keptAliveEndpoint, kmsExchange, OPERATOR_POLICY, parseJsonObject, type Endpoint, type HttpKmsTransport } from '../../lib/kms/transport';
import { KmsUnavailableError, type KeyAlgorithm, type KeyStore, type KmsOpenContext, type KmsProviderType, type PublicJwk } from '../../lib/kms/types';
import type { OutboundResponse } from '../../lib/outbound';

/*
 * HashiCorp Vault's Transit secrets engine over its HTTP API (v1): one ecdsa-p256 key per key, signatures in the JWS
 * marshaling (raw r || s), public keys read back from the key, deletion only through the key chain's deletion.
 */

/** The fields of a `vault` provider entry (spec 2.5). */
export interface VaultKmsOptions {
    /** Vault's address (e.g. https://vault.example:8200), without trailing slash; Transit is mounted at transit/. */
    vaultUrl: string;
    vaultToken: string;
}

export const vaultKmsOptionsSchema = Joi.object<VaultKmsOptions, true>({
    vaultUrl: serviceUrlSchema().required(),
    vaultToken: Joi.string().required()
});

const TRANSIT = '/v1/transit';
const KEY_TYPE = 'ecdsa-p256';
/** A Vault signature is `vault:v<key version>:<signature>`; with JWS marshaling the signature is base64url r || s. */
const SIGNATURE = /^vault:v\d+:([A-Za-z0-9_-]+)$/;

const keySegment = (kid: string): string => {
    // Vault key names are one path segment; dot segments would be collapsed into another path.
    if (typeof kid !== 'string' || !kid || kid === '.' || kid === '..') {
        throw new ValidationError('invalid kid: a non-empty name other than . and .. is required');
    }
    return encodeURIComponent(kid);
};

/** Vault's own error strings ({errors: [...]}) are short fixed texts ("permission denied"); anything else is left out. */
const vaultErrors = (res: OutboundResponse): string => {
    const errors = parseJsonObject(res.body)?.errors;
    const first = Array.isArray(errors) ? errors.find((e): e is string => typeof e === 'string') : undefined;
    return first && /^[\w .,:;'"()/*-]{1,200}$/.test(first) ? first : '';
};

/** Transit answers a missing key with 404 on reads and with 400 "... key not found" on sign and key config. */
const keyMissing = (res: OutboundResponse): boolean =>
    res.status === 404 || (res.status === 400 && /key not found|no existing key/i.test(vaultErrors(res)));

export class VaultKeyStore implements KeyStore {
    private readonly endpoint: Endpoint;
    private readonly basePath: string;
    private readonly label: string;
    private readonly timeoutMs: number;

    constructor(private readonly options: VaultKmsOptions, private readonly ctx: KmsOpenContext, transport: HttpKmsTransport = {}) {
        const url = new URL(options.vaultUrl);
        this.label = `KMS provider "${ctx.providerId}"`;
        this.timeoutMs = ctx.timeoutMs > 0 ? ctx.timeoutMs : 10_000;
        this.basePath = url.pathname.replace(/\/$/, '');
        this.endpoint = keptAliveEndpoint(url, ctx.outbound ?? OPERATOR_POLICY, transport);
    }

    async create(kid: string, alg: KeyAlgorithm): Promise<PublicJwk> {
        this.checkAlg(alg);
        const op = `create of key "${kid}"`;
        // Transit answers 204 (older) or 200 with the key (newer) and leaves an existing key of that name unchanged:
        // the public key read next is checked to be an ecdsa-p256 key either way.
        await this.expect(op, await this.call(op, 'POST', `${TRANSIT}/keys/${keySegment(kid)}`, { type: KEY_TYPE }), [200, 204]);
        return this.publicJwk(kid);
    }

    async sign(kid: string, data: Uint8Array, alg: KeyAlgorithm): Promise<Uint8Array> {
        this.checkAlg(alg);
        const op = `sign with key "${kid}"`;
        const res = await this.call(op, 'POST', `${TRANSIT}/sign/${keySegment(kid)}/sha2-256`, {
            input: Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64'),
            marshaling_algorithm: 'jws'
        });
        const body = this.expect(op, res, [200], kid);
        const signature = (body.data as Record<string, unknown> | undefined)?.signature;
        const match = typeof signature === 'string' ? SIGNATURE.exec(signature) : null;
        if (!match) {
            throw invalidAnswer(this.label, op, 'no vault:v<n>:<signature> value');
        }
        const bytes = Buffer.from(match[1]!, 'base64url');
        if (bytes.length !== 64) {
            throw invalidAnswer(this.label, op, `signature has ${bytes.length} bytes, expected 64 (raw r || s)`);
        }
        return Uint8Array.from(bytes);
    }

    /** The public key of the key's latest version: the one Transit signs with. */
    async publicJwk(kid: string): Promise<PublicJwk> {
        const op = `read of key "${kid}"`;
        const data = this.expect(op, await this.call(op, 'GET', `${TRANSIT}/keys/${keySegment(kid)}`), [200], kid).data as Record<string, unknown> | undefined;
        if (data?.type !== KEY_TYPE) {
            throw new ValidationError(`Key ${kid} in KMS provider ${this.ctx.providerId} is not an ${KEY_TYPE} key`);
        }
        const keys = data.keys as Record<string, { public_key?: unknown }> | undefined;
        const pem = keys?.[String(data.latest_version)]?.public_key;
        if (typeof pem !== 'string') {
            throw invalidAnswer(this.label, op, 'no public key for the latest version');
        }
        try {
            return ecP256JwkFromSpki(pem);
        } catch (err) {
            throw invalidAnswer(this.label, op, (err as Error).message);
        }
    }

    /**
     * Transit refuses to delete a key until its deletion_allowed flag is set; only this call sets it, and the key chain
     * service calls it only for keys it generated, when their key chain is deleted.
     */
    async delete(kid: string): Promise<void> {
        const op = `delete of key "${kid}"`;
        const segment = keySegment(kid);
        const allowed = await this.call(op, 'POST', `${TRANSIT}/keys/${segment}/config`, { deletion_allowed: true });
        // Already gone, which is what delete wants.
        if (keyMissing(allowed)) {
            return;
        }
        this.expect(op, allowed, [200, 204]);
        const res = await this.call(op, 'DELETE', `${TRANSIT}/keys/${segment}`);
        if (!keyMissing(res)) {
            this.expect(op, res, [200, 204]);
        }
    }

    /** Vault is initialized and unsealed (sys/health), and it accepts the token (token lookup-self). */
    async health(): Promise<void> {
        const op = 'health check';
        const res = await kmsExchange(this.endpoint, this.label, op, 'GET', `${this.basePath}/v1/sys/health`, { accept: 'application/json' }, undefined, this.timeoutMs);
        // sys/health: 200 active, 429 unsealed standby, 472 DR secondary, 473 performance standby: all serve requests.
        if (![200, 429, 472, 473].includes(res.status)) {
            const health = parseJsonObject(res.body);
            const reason = health?.initialized === false ? 'Vault is not initialized' : health?.sealed === true ? 'Vault is sealed' : `HTTP ${res.status}`;
            throw new KmsUnavailableError(`${this.label} is unavailable: ${op} failed (${reason})`);
        }
        this.expect(op, await this.call(op, 'GET', '/v1/auth/token/lookup-self'), [200]);
    }

    async close(): Promise<void> {
        this.endpoint.agent.destroy();
    }

    private checkAlg(alg: KeyAlgorithm): void {
        if (alg !== 'ES256') {
            throw new ValidationError(`Algorithm ${String(alg)} is not supported by the vault provider ${this.ctx.providerId}`);
        }
    }

    /** One request with the token; a refused token, a sealed Vault and 5xx become KmsUnavailableError. */
    private async call(op: string, method: 'GET' | 'POST' | 'DELETE', path: string, payload?: unknown): Promise<OutboundResponse> {
        const headers = { accept: 'application/json', 'x-vault-token': this.options.vaultToken, 'x-vault-request': 'true' };
        const res = await kmsExchange(this.endpoint, this.label, op, method, `${this.basePath}${path}`, headers,
            payload === undefined ? undefined : jsonBody(payload), this.timeoutMs);
        // Vault answers 403 "permission denied" for an unknown, expired or revoked token as well as for a missing policy.
        if (res.status === 401 || res.status === 403) {
            throw new KmsUnavailableError(`${this.label} is unavailable: Vault refused the token for ${op} (HTTP ${res.status}${vaultErrors(res) ? `, ${vaultErrors(res)}` : ''}); check vaultToken and its policy`);
        }
        if (res.status >= 500 || res.status === 408 || res.status === 429) {
            const reason = vaultErrors(res) === 'Vault is sealed' ? 'Vault is sealed' : `HTTP ${res.status}`;
            throw new KmsUnavailableError(`${this.label} is unavailable: ${op} failed (${reason})`);
        }
        return res;
    }

    private expect(op: string, res: OutboundResponse, ok: number[], kid?: string): Record<string, unknown> {
        if (!ok.includes(res.status)) {
            if (kid !== undefined && keyMissing(res)) {
                throw new NotFoundError(`Key ${kid} not found in KMS provider ${this.ctx.providerId}`);
            }
            const detail = vaultErrors(res);
            throw new Error(`${this.label} refused ${op} (HTTP ${res.status}${detail ? `, ${detail}` : ''})`);
        }
        if (res.status === 204) {
            return {};
        }
        return jsonObjectAnswer(this.label, op, res);
    }
}

export const vaultKmsProvider: KmsProviderType<VaultKmsOptions> = {
    type: 'vault',
    optionsSchema: vaultKmsOptionsSchema,
    secretPaths: ['vaultToken'],
    destinationPaths: ['vaultUrl'],
    async open(options, ctx) {
        return new VaultKeyStore(options, ctx);
    }
};
