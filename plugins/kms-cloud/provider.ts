import Crypto from 'node:crypto';
import type { KMSClient, KMSClientConfig } from '@aws-sdk/client-kms';
import Joi from 'joi';
import { ConflictError, DomainError, NotFoundError, ValidationError } from '../../lib/errors';
import { ecdsaDerToRaw, ecP256JwkFromSpki } from '../../lib/kms/jwk';
import { KmsUnavailableError, type KeyAlgorithm, type KeyStore, type KmsOpenContext, type KmsProviderType, type PublicJwk } from '../../lib/kms/types';

/*
 * The managed cloud key service (`cloud-kms`): AWS KMS through its official SDK (@aws-sdk/client-kms, the JSON 1.1
 * protocol of the TrentService API). Keys are ECC_NIST_P256 SIGN_VERIFY keys; AWS answers ECDSA_SHA_256 signatures
 * in DER, turned into r || s here. AWS chooses key ids, so a generated key gets an alias named after its kid; an
 * external reference names an existing key by key id, key ARN, alias or alias ARN. The endpoint is the region's own
 * unless the operator sets the SDK's AWS_ENDPOINT_URL_KMS (a VPC endpoint, or a test server).
 */

/** The fields of a `cloud-kms` provider entry (spec 2.5). */
export interface CloudKmsOptions {
    region: string;
    /** With secretAccessKey: static credentials; without both, the SDK credential chain (environment, profile, role). */
    accessKeyId?: string;
    secretAccessKey?: string;
}

export const cloudKmsOptionsSchema = Joi.object<CloudKmsOptions, true>({
    // A region name only: it becomes part of the endpoint host name, so nothing else may get in.
    region: Joi.string().pattern(/^[a-z]{2}(-[a-z]+)+-\d{1,2}$/, 'AWS region').required(),
    accessKeyId: Joi.string().pattern(/^[A-Z0-9]{16,128}$/, 'AWS access key id'),
    secretAccessKey: Joi.string().min(16).max(128)
}).and('accessKeyId', 'secretAccessKey');

const KEY_SPEC = 'ECC_NIST_P256';
const SIGNING_ALGORITHM = 'ECDSA_SHA_256';
/** AWS KMS waits at least 7 days before it deletes a key: the shortest window, since the key chain is gone. */
const PENDING_WINDOW_DAYS = 7;
const KEY_ID = /^(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})$/;

/** Names of SDK errors that mean the credentials (or their permissions) are refused: the provider is not usable. */
const CREDENTIAL_ERRORS = new Set([
    'UnrecognizedClientException', 'InvalidSignatureException', 'IncompleteSignature', 'IncompleteSignatureException', 'ExpiredTokenException',
    'InvalidClientTokenId', 'MissingAuthenticationTokenException', 'AccessDeniedException', 'CredentialsProviderError'
]);
/** Transient AWS-side failures. */
const UNAVAILABLE_ERRORS = new Set(['KMSInternalException', 'DependencyTimeoutException', 'KeyUnavailableException', 'ThrottlingException', 'LimitExceededException', 'ServiceUnavailableException']);

interface SdkError {
    name?: string;
    code?: string;
    $fault?: 'client' | 'server';
    $metadata?: { httpStatusCode?: number };
}

/** A generated key's alias: the kid in the characters alias names allow; no tenant in it, so an exported reference (externalKeyId: the kid) finds the key from another tenant or deployment. */
const aliasOf = (kid: string): string => `alias/hallmark/${kid}`.replace(/[^A-Za-z0-9/_-]/g, '_');

/** The SDK is large: it is loaded when the first cloud-kms provider opens, not when the service starts. */
type Sdk = typeof import('@aws-sdk/client-kms');

export class CloudKeyStore implements KeyStore {
    private readonly client: KMSClient;
    private readonly label: string;
    private readonly timeoutMs: number;

    constructor(private readonly sdk: Sdk, options: CloudKmsOptions, private readonly ctx: KmsOpenContext) {
        this.label = `KMS provider "${ctx.providerId}"`;
        this.timeoutMs = ctx.timeoutMs > 0 ? ctx.timeoutMs : 10_000;
        const config: KMSClientConfig = {
            region: options.region,
            // One retry for a throttled or dropped request; the deadline of each call bounds both attempts.
            maxAttempts: 2,
            requestHandler: { connectionTimeout: this.timeoutMs, requestTimeout: this.timeoutMs },
            ...(options.accessKeyId && options.secretAccessKey ? { credentials: { accessKeyId: options.accessKeyId, secretAccessKey: options.secretAccessKey } } : {})
        };
        this.client = new sdk.KMSClient(config);
    }

    /** A key id, key ARN, alias or alias ARN is used as it is; any other kid is a key this provider made, by alias. */
    keyIdOf(kid: string): string {
        if (typeof kid !== 'string' || !kid) {
            throw new ValidationError('invalid kid: a non-empty key id, ARN or name is required');
        }
        return KEY_ID.test(kid) || kid.startsWith('arn:') || kid.startsWith('alias/') ? kid : aliasOf(kid);
    }

    async create(kid: string, alg: KeyAlgorithm): Promise<PublicJwk> {
        this.checkAlg(alg);
        const op = `create of key "${kid}"`;
        const alias = this.keyIdOf(kid);
        if (!alias.startsWith('alias/hallmark/')) {
            throw new ValidationError(`A new key of KMS provider ${this.ctx.providerId} needs a name, not an AWS key id or alias (${kid})`);
        }
        const created = await this.send(op, kid, (options) => this.client.send(new this.sdk.CreateKeyCommand({
            KeySpec: KEY_SPEC,
            KeyUsage: 'SIGN_VERIFY',
            Description: `Hallmark key ${kid} of tenant ${this.ctx.tenantId}`,
            Tags: [{ TagKey: 'hallmark:tenant', TagValue: this.ctx.tenantId }, { TagKey: 'hallmark:kid', TagValue: kid.slice(0, 256) }]
        }), options));
        const keyId = created.KeyMetadata?.KeyId;
        if (!keyId) {
            throw this.invalid(op, 'no KeyId');
        }
        try {
            await this.send(op, kid, (options) => this.client.send(new this.sdk.CreateAliasCommand({ AliasName: alias, TargetKeyId: keyId }), options));
        } catch (err) {
            // Without its alias the key cannot be found again: do not leave it behind.
            await this.send(op, kid, (options) => this.client.send(new this.sdk.ScheduleKeyDeletionCommand({ KeyId: keyId, PendingWindowInDays: PENDING_WINDOW_DAYS }), options)).catch(() => undefined);
            throw err;
        }
        return this.publicJwk(kid);
    }

    async sign(kid: string, data: Uint8Array, alg: KeyAlgorithm): Promise<Uint8Array> {
        this.checkAlg(alg);
        const op = `sign with key "${kid}"`;
        // RAW: AWS hashes the message (up to 4096 bytes); larger messages go as their SHA-256 digest.
        const digest = data.byteLength > 4096;
        const message = digest ? Crypto.createHash('sha256').update(data).digest() : data;
        const res = await this.send(op, kid, (options) => this.client.send(new this.sdk.SignCommand({ KeyId: this.keyIdOf(kid), Message: message, MessageType: digest ? 'DIGEST' : 'RAW', SigningAlgorithm: SIGNING_ALGORITHM }), options));
        if (!res.Signature) {
            throw this.invalid(op, 'no Signature');
        }
        try {
            return ecdsaDerToRaw(res.Signature);
        } catch (err) {
            throw this.invalid(op, (err as Error).message);
        }
    }

    async publicJwk(kid: string): Promise<PublicJwk> {
        const op = `read of key "${kid}"`;
        const res = await this.send(op, kid, (options) => this.client.send(new this.sdk.GetPublicKeyCommand({ KeyId: this.keyIdOf(kid) }), options));
        if (res.KeySpec !== KEY_SPEC || res.KeyUsage !== 'SIGN_VERIFY') {
            throw new ValidationError(`Key ${kid} in KMS provider ${this.ctx.providerId} is not an ${KEY_SPEC} SIGN_VERIFY key`);
        }
        try {
            return ecP256JwkFromSpki(res.PublicKey ?? new Uint8Array());
        } catch (err) {
            throw this.invalid(op, (err as Error).message);
        }
    }

    /** Schedules the deletion (AWS keeps the key PendingDeletion for 7 days) and frees the alias. */
    async delete(kid: string): Promise<void> {
        const op = `delete of key "${kid}"`;
        let keyId: string | undefined;
        try {
            keyId = (await this.send(op, kid, (options) => this.client.send(new this.sdk.DescribeKeyCommand({ KeyId: this.keyIdOf(kid) }), options))).KeyMetadata?.KeyId;
        } catch (err) {
            if (err instanceof NotFoundError) {
                return; // already gone, which is what delete wants
            }
            throw err;
        }
        if (!keyId) {
            throw this.invalid(op, 'no KeyId');
        }
        const alias = this.keyIdOf(kid);
        if (alias.startsWith('alias/hallmark/')) {
            await this.send(op, kid, (options) => this.client.send(new this.sdk.DeleteAliasCommand({ AliasName: alias }), options)).catch((err: unknown) => {
                if (!(err instanceof NotFoundError)) {
                    throw err;
                }
            });
        }
        await this.send(op, kid, (options) => this.client.send(new this.sdk.ScheduleKeyDeletionCommand({ KeyId: keyId, PendingWindowInDays: PENDING_WINDOW_DAYS }), options)).catch((err: unknown) => {
            // Already pending deletion.
            if (!(err instanceof ConflictError)) {
                throw err;
            }
        });
    }

    /** AWS KMS answers an authenticated call: ListKeys of one key (refused permission to list still proves the credentials). */
    async health(): Promise<void> {
        try {
            await this.client.send(new this.sdk.ListKeysCommand({ Limit: 1 }), { abortSignal: AbortSignal.timeout(this.timeoutMs) });
        } catch (err) {
            if ((err as SdkError).name !== 'AccessDeniedException') {
                throw this.mapError('health check', undefined, err as SdkError & Error);
            }
        }
    }

    async close(): Promise<void> {
        this.client.destroy();
    }

    private checkAlg(alg: KeyAlgorithm): void {
        if (alg !== 'ES256') {
            throw new ValidationError(`Algorithm ${String(alg)} is not supported by the cloud-kms provider ${this.ctx.providerId}`);
        }
    }

    /** One SDK call, aborted at the deadline, its failures mapped to what the API answers (503 naming the provider, 4xx). */
    private async send<T>(op: string, kid: string | undefined, call: (options: { abortSignal: AbortSignal }) => Promise<T>): Promise<T> {
        try {
            return await call({ abortSignal: AbortSignal.timeout(this.timeoutMs) });
        } catch (err) {
            throw this.mapError(op, kid, err as SdkError & Error);
        }
    }

    private mapError(op: string, kid: string | undefined, err: SdkError & Error): Error {
        if (err instanceof DomainError) {
            return err;
        }
        const name = err.name ?? 'Error';
        if (CREDENTIAL_ERRORS.has(name)) {
            return new KmsUnavailableError(`${this.label} is unavailable: AWS KMS refused the credentials for ${op} (${name}); check accessKeyId, secretAccessKey and the key policy`);
        }
        if (name === 'NotFoundException' && kid !== undefined) {
            return new NotFoundError(`Key ${kid} not found in KMS provider ${this.ctx.providerId}`);
        }
        if ((name === 'KMSInvalidStateException' || name === 'DisabledException') && kid !== undefined) {
            return new ConflictError(`Key ${kid} of KMS provider ${this.ctx.providerId} is disabled or pending deletion`);
        }
        if (name === 'InvalidKeyUsageException' || name === 'UnsupportedOperationException') {
            return new ValidationError(`Key ${kid ?? ''} in KMS provider ${this.ctx.providerId} is not an ${KEY_SPEC} SIGN_VERIFY key`);
        }
        if (name === 'AbortError' || name === 'TimeoutError') {
            return new KmsUnavailableError(`${this.label} is unavailable: ${op} failed (no answer within ${this.timeoutMs} ms)`);
        }
        const status = err.$metadata?.httpStatusCode;
        if (UNAVAILABLE_ERRORS.has(name) || err.$fault === 'server' || (status !== undefined && status >= 500)) {
            return new KmsUnavailableError(`${this.label} is unavailable: ${op} failed (${name})`);
        }
        if (status === undefined) {
            // No answer at all: connection refused, name not found, TLS failure. The code names it without secrets.
            const code = err.code ?? (err as { cause?: { code?: string } }).cause?.code;
            return new KmsUnavailableError(`${this.label} is unavailable: ${op} failed (${code ? `network error ${code}` : name})`);
        }
        return new Error(`${this.label} refused ${op} (${name}, HTTP ${status})`);
    }

    private invalid(op: string, reason: string): Error {
        return new Error(`${this.label} gave an invalid answer to ${op}: ${reason}`);
    }
}

export const cloudKmsProvider: KmsProviderType<CloudKmsOptions> = {
    type: 'cloud-kms',
    optionsSchema: cloudKmsOptionsSchema,
    secretPaths: ['secretAccessKey'],
    async open(options, ctx) {
        return new CloudKeyStore(await import('@aws-sdk/client-kms'), options, ctx);
    }
};
