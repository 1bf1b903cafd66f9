import Crypto from 'node:crypto';
import Os from 'node:os';
import Path from 'node:path';
import Joi from 'joi';
import type * as Pkcs11Js from 'pkcs11js';
import { ConflictError, NotFoundError, ValidationError } from '../../lib/errors';
import { KmsUnavailableError, type KeyAlgorithm, type KeyStore, type KmsOpenContext, type KmsProviderType, type PublicJwk } from '../../lib/kms/types';
import { acquireModule, ckrName, loadBinding, Pkcs11Error, releaseModule, wrapError, type Handle, type LoadedModule, type Pkcs11Binding } from './module';

/** A provider entry's own fields (spec 2.5, type pkcs11). */
export interface Pkcs11KmsOptions {
    /** Absolute path of the PKCS#11 module (e.g. /usr/lib/softhsm/libsofthsm2.so). */
    library: string;
    /** A number is an index into the slots that have a token; a string is a token label. */
    slot: number | string;
    /** User PIN. A secret: redacted in answers, logs and exports. */
    pin: string;
    /** When true, keys can be used but not created or deleted. */
    readOnly: boolean;
}

export const pkcs11OptionsSchema = Joi.object<Pkcs11KmsOptions, true>({
    library: Joi.string()
        .required()
        .custom((value: string, helpers) => (Path.isAbsolute(value) ? value : helpers.message({ custom: '{{#label}} must be an absolute path' }))),
    // strict: a string "0" from a ${VAR} placeholder stays a label instead of silently becoming slot index 0.
    slot: Joi.alternatives().try(Joi.number().integer().min(0).strict(), Joi.string().min(1)).required(),
    pin: Joi.string().min(1).required(),
    readOnly: Joi.boolean().default(false)
}).unknown(false);

// prime256v1 / secp256r1 as the DER OBJECT IDENTIFIER that CKA_EC_PARAMS holds.
const P256_EC_PARAMS = Buffer.from('06082a8648ce3d030107', 'hex');
// Not exported by pkcs11js: session states after a user login (PKCS#11 v2.40 5.5).
const CKS_RO_USER_FUNCTIONS = 1;
const CKS_RW_USER_FUNCTIONS = 3;

const pinDigest = (pin: string): Buffer => Crypto.createHash('sha256').update(pin, 'utf8').digest();

/** CKA_ID: a stable 20-byte value (the usual SHA-1 size of key ids) so other PKCS#11 tools can pair the two halves. */
const keyId = (kid: string): Buffer => Crypto.createHash('sha256').update(kid, 'utf8').digest().subarray(0, 20);

/** CKA_EC_POINT is a DER OCTET STRING around the uncompressed point; some modules hand back the bare point. */
const unwrapEcPoint = (value: Buffer): Buffer => {
    if (value.length === 67 && value[0] === 0x04 && value[1] === 0x41 && value[2] === 0x04) {
        return value.subarray(2);
    }
    if (value.length === 65 && value[0] === 0x04) {
        return value;
    }
    throw new Error(`unexpected CKA_EC_POINT encoding (${value.length} bytes)`);
};

/** A CK_ULONG attribute value in the platform's size and byte order. */
const readUlong = (value: Buffer): number => {
    const le = Os.endianness() === 'LE';
    if (value.length === 8) {
        return Number(le ? value.readBigUInt64LE() : value.readBigUInt64BE());
    }
    return le ? value.readUInt32LE() : value.readUInt32BE();
};

const jwkFromPoint = (point: Buffer): PublicJwk => ({
    kty: 'EC',
    crv: 'P-256',
    x: point.subarray(1, 33).toString('base64url'),
    y: point.subarray(33, 65).toString('base64url')
});

/**
 * Keys that live in a PKCS#11 token and never leave it: generated inside (CKA_SENSITIVE, not extractable), used
 * through one logged-in session. A session may run one operation at a time, so every call goes through a queue.
 */
class Pkcs11KeyStore implements KeyStore {
    private queue: Promise<unknown> = Promise.resolve();
    private inflight: Promise<void> = Promise.resolve();
    private closed = false;

    constructor(
        private readonly pkcs11: Pkcs11Binding,
        private readonly module: LoadedModule,
        private readonly tokenKey: string,
        private readonly slot: Handle,
        private readonly session: Handle,
        private readonly providerId: string,
        private readonly readOnly: boolean,
        private readonly timeoutMs: number
    ) {}

    private get lib(): Pkcs11Js.PKCS11 {
        return this.module.lib;
    }

    private call<T>(operation: string, fn: () => T): T {
        try {
            return fn();
        }
        catch (err) {
            throw wrapError(this.providerId, operation, err);
        }
    }

    private async callAsync<T>(operation: string, fn: () => Promise<T>): Promise<T> {
        let call: Promise<T>;
        try {
            call = fn();
        }
        catch (err) {
            throw wrapError(this.providerId, operation, err);
        }
        // A worker-thread call cannot be cancelled: the caller gets the timeout, the next operation still waits for it.
        this.inflight = call.then(() => undefined, () => undefined);
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new KmsUnavailableError(`PKCS#11 ${operation} timed out after ${this.timeoutMs} ms for provider ${this.providerId}`)), this.timeoutMs);
        });
        try {
            return await Promise.race([call.catch((err: unknown) => { throw wrapError(this.providerId, operation, err); }), timeout]);
        }
        finally {
            clearTimeout(timer);
        }
    }

    private exclusive<T>(work: () => Promise<T> | T): Promise<T> {
        const run = this.queue.then(() => {
            if (this.closed) {
                throw new Error(`PKCS#11 provider ${this.providerId} is closed`);
            }
            return work();
        });
        this.queue = run.catch(() => undefined).then(() => this.inflight);
        return run;
    }

    private assertEs256(alg: KeyAlgorithm): void {
        if (alg !== 'ES256') {
            throw new ValidationError(`Algorithm ${String(alg)} is not supported by the pkcs11 provider ${this.providerId}`);
        }
    }

    private assertWritable(): void {
        if (this.readOnly) {
            throw new ConflictError(`KMS provider ${this.providerId} is read-only`);
        }
    }

    private find(kid: string, objectClass: number): Handle[] {
        const template: Pkcs11Js.Template = [
            { type: this.pkcs11.CKA_CLASS, value: objectClass },
            { type: this.pkcs11.CKA_LABEL, value: kid },
            { type: this.pkcs11.CKA_ID, value: keyId(kid) }
        ];
        this.call('C_FindObjectsInit', () => this.lib.C_FindObjectsInit(this.session, template));
        try {
            return this.call('C_FindObjects', () => this.lib.C_FindObjects(this.session, 2));
        }
        finally {
            this.call('C_FindObjectsFinal', () => this.lib.C_FindObjectsFinal(this.session));
        }
    }

    private findOne(kid: string, objectClass: number): Handle {
        const found = this.find(kid, objectClass);
        if (found.length === 0) {
            throw new NotFoundError(`Key ${kid} not found in KMS provider ${this.providerId}`);
        }
        if (found.length > 1) {
            throw new ConflictError(`Key ${kid} is ambiguous in KMS provider ${this.providerId}: the token holds more than one`);
        }
        return found[0];
    }

    private readPublicJwk(kid: string, publicKey: Handle): PublicJwk {
        const attrs = this.call('C_GetAttributeValue', () =>
            this.lib.C_GetAttributeValue(this.session, publicKey, [
                { type: this.pkcs11.CKA_KEY_TYPE },
                { type: this.pkcs11.CKA_EC_PARAMS },
                { type: this.pkcs11.CKA_EC_POINT }
            ])
        );
        const [keyType, params, point] = attrs.map((a) => a.value);
        if (readUlong(keyType) !== this.pkcs11.CKK_EC || !params.equals(P256_EC_PARAMS)) {
            throw new ValidationError(`Key ${kid} in KMS provider ${this.providerId} is not an EC P-256 key`);
        }
        try {
            return jwkFromPoint(unwrapEcPoint(point));
        }
        catch (err) {
            throw new Pkcs11Error('C_GetAttributeValue', undefined, `PKCS#11 key ${kid} of provider ${this.providerId}: ${(err as Error).message}`);
        }
    }

    create(kid: string, alg: KeyAlgorithm): Promise<PublicJwk> {
        return this.exclusive(async () => {
            this.assertWritable();
            this.assertEs256(alg);
            const p = this.pkcs11;
            if (this.find(kid, p.CKO_PRIVATE_KEY).length > 0 || this.find(kid, p.CKO_PUBLIC_KEY).length > 0) {
                throw new ConflictError(`Key ${kid} already exists in KMS provider ${this.providerId}`);
            }
            const id = keyId(kid);
            const publicTemplate: Pkcs11Js.Template = [
                { type: p.CKA_CLASS, value: p.CKO_PUBLIC_KEY },
                { type: p.CKA_KEY_TYPE, value: p.CKK_EC },
                { type: p.CKA_TOKEN, value: true },
                { type: p.CKA_PRIVATE, value: false },
                { type: p.CKA_VERIFY, value: true },
                { type: p.CKA_EC_PARAMS, value: P256_EC_PARAMS },
                { type: p.CKA_LABEL, value: kid },
                { type: p.CKA_ID, value: id }
            ];
            const privateTemplate: Pkcs11Js.Template = [
                { type: p.CKA_CLASS, value: p.CKO_PRIVATE_KEY },
                { type: p.CKA_KEY_TYPE, value: p.CKK_EC },
                { type: p.CKA_TOKEN, value: true },
                { type: p.CKA_PRIVATE, value: true },
                { type: p.CKA_SENSITIVE, value: true },
                { type: p.CKA_EXTRACTABLE, value: false },
                { type: p.CKA_SIGN, value: true },
                { type: p.CKA_DERIVE, value: false },
                { type: p.CKA_LABEL, value: kid },
                { type: p.CKA_ID, value: id }
            ];
            const pair = await this.callAsync('C_GenerateKeyPair', () =>
                this.lib.C_GenerateKeyPairAsync(this.session, { mechanism: p.CKM_EC_KEY_PAIR_GEN }, publicTemplate, privateTemplate)
            );
            try {
                return this.readPublicJwk(kid, pair.publicKey);
            }
            catch (err) {
                // A half-usable key pair would block the kid forever (create refuses existing labels).
                for (const handle of [pair.privateKey, pair.publicKey]) {
                    try { this.lib.C_DestroyObject(this.session, handle); } catch { /* report the original error */ }
                }
                throw err;
            }
        });
    }

    sign(kid: string, data: Uint8Array, alg: KeyAlgorithm): Promise<Uint8Array> {
        return this.exclusive(async () => {
            this.assertEs256(alg);
            const privateKey = this.findOne(kid, this.pkcs11.CKO_PRIVATE_KEY);
            // SoftHSM (and many HSMs) offer only raw CKM_ECDSA, which signs a ready-made digest.
            const digest = Crypto.createHash('sha256').update(data).digest();
            this.call('C_SignInit', () => this.lib.C_SignInit(this.session, { mechanism: this.pkcs11.CKM_ECDSA }, privateKey));
            const signature = await this.callAsync('C_Sign', () => this.lib.C_SignAsync(this.session, digest, Buffer.alloc(128)));
            // PKCS#11 ECDSA output is r || s, each left-padded to the order's length: 64 bytes for P-256.
            if (signature.length !== 64) {
                throw new Pkcs11Error('C_Sign', undefined, `PKCS#11 C_Sign for provider ${this.providerId} answered ${signature.length} bytes instead of 64`);
            }
            return new Uint8Array(signature);
        });
    }

    publicJwk(kid: string): Promise<PublicJwk> {
        return this.exclusive(() => this.readPublicJwk(kid, this.findOne(kid, this.pkcs11.CKO_PUBLIC_KEY)));
    }

    delete(kid: string): Promise<void> {
        return this.exclusive(() => {
            this.assertWritable();
            const handles = [...this.find(kid, this.pkcs11.CKO_PRIVATE_KEY), ...this.find(kid, this.pkcs11.CKO_PUBLIC_KEY)];
            if (handles.length === 0) {
                throw new NotFoundError(`Key ${kid} not found in KMS provider ${this.providerId}`);
            }
            for (const handle of handles) {
                this.call('C_DestroyObject', () => this.lib.C_DestroyObject(this.session, handle));
            }
        });
    }

    health(): Promise<void> {
        return this.exclusive(() => {
            try {
                this.lib.C_GetTokenInfo(this.slot);
                const info = this.lib.C_GetSessionInfo(this.session);
                if (info.state !== CKS_RO_USER_FUNCTIONS && info.state !== CKS_RW_USER_FUNCTIONS) {
                    throw new Error('session is no longer logged in');
                }
            }
            catch (err) {
                const reason = ckrName(err) ?? (err as Error).message;
                throw new KmsUnavailableError(`PKCS#11 token of provider ${this.providerId} is not usable: ${reason}`);
            }
        });
    }

    async close(): Promise<void> {
        if (this.closed) {
            return;
        }
        await this.exclusive(() => {
            this.closed = true;
            const login = this.module.tokens.get(this.tokenKey);
            try {
                if (login && --login.sessions <= 0) {
                    this.module.tokens.delete(this.tokenKey);
                    // C_Logout ends the login of every session on the token, so only the last session does it.
                    try { this.lib.C_Logout(this.session); } catch { /* closing the session logs out anyway */ }
                }
                this.call('C_CloseSession', () => this.lib.C_CloseSession(this.session));
            }
            finally {
                releaseModule(this.module);
            }
        });
    }
}

/** The slot by index among the slots with a token, or by token label (the 32-byte label is space padded). */
const findSlot = (lib: Pkcs11Js.PKCS11, pkcs11: Pkcs11Binding, slot: number | string, providerId: string): Handle => {
    let slots: Handle[];
    try {
        slots = lib.C_GetSlotList(true);
    }
    catch (err) {
        throw new KmsUnavailableError(wrapError(providerId, 'C_GetSlotList', err).message);
    }
    const initialized = (handle: Handle): Pkcs11Js.TokenInfo | undefined => {
        try {
            const info = lib.C_GetTokenInfo(handle);
            return (info.flags & pkcs11.CKF_TOKEN_INITIALIZED) !== 0 ? info : undefined;
        }
        catch {
            return undefined;
        }
    };
    if (typeof slot === 'number') {
        const handle = slots[slot];
        if (!handle) {
            throw new KmsUnavailableError(`PKCS#11 slot index ${slot} not found for provider ${providerId}: ${slots.length} slot(s) have a token`);
        }
        if (!initialized(handle)) {
            throw new KmsUnavailableError(`PKCS#11 token in slot index ${slot} of provider ${providerId} is not initialized`);
        }
        return handle;
    }
    const matches = slots.filter((handle) => initialized(handle)?.label.replace(/[\s\0]+$/, '') === slot);
    if (matches.length === 0) {
        throw new KmsUnavailableError(`PKCS#11 token with label "${slot}" not found for provider ${providerId}`);
    }
    if (matches.length > 1) {
        throw new KmsUnavailableError(`PKCS#11 token label "${slot}" is ambiguous for provider ${providerId}: ${matches.length} tokens carry it`);
    }
    return matches[0];
};

const openSession = (module: LoadedModule, pkcs11: Pkcs11Binding, options: Pkcs11KmsOptions, ctx: KmsOpenContext): Pkcs11KeyStore => {
    const { lib } = module;
    const providerId = ctx.providerId;
    const slot = findSlot(lib, pkcs11, options.slot, providerId);
    const readOnly = options.readOnly === true;
    const flags = pkcs11.CKF_SERIAL_SESSION | (readOnly ? 0 : pkcs11.CKF_RW_SESSION);
    let session: Handle;
    try {
        session = lib.C_OpenSession(slot, flags);
    }
    catch (err) {
        throw new KmsUnavailableError(wrapError(providerId, 'C_OpenSession', err).message);
    }
    const tokenKey = slot.toString('hex');
    const digest = pinDigest(options.pin);
    const known = module.tokens.get(tokenKey);
    const fail = (message: string): never => {
        try { lib.C_CloseSession(session); } catch { /* the login error is the one to report */ }
        throw new KmsUnavailableError(message);
    };
    const wrongPin = `PKCS#11 login failed for provider ${providerId}: wrong PIN`;
    try {
        lib.C_Login(session, pkcs11.CKU_USER, options.pin);
        module.tokens.set(tokenKey, { sessions: (known?.sessions ?? 0) + 1, pinDigest: digest });
    }
    catch (err) {
        const code = ckrName(err);
        if (code === 'CKR_USER_ALREADY_LOGGED_IN') {
            // Another provider of this process logged in to the same token; the token has one user PIN, so a
            // different PIN is a wrong one even though C_Login cannot tell any more.
            if (!known) {
                fail(`PKCS#11 login failed for provider ${providerId}: the token is logged in by other code in this process, the PIN cannot be checked`);
            }
            else if (!Crypto.timingSafeEqual(known.pinDigest, digest)) {
                fail(wrongPin);
            }
            else {
                known.sessions++;
            }
        }
        else if (code === 'CKR_PIN_INCORRECT' || code === 'CKR_PIN_LEN_RANGE') {
            fail(wrongPin);
        }
        else if (code === 'CKR_PIN_LOCKED') {
            fail(`PKCS#11 login failed for provider ${providerId}: the user PIN is locked`);
        }
        else {
            fail(`PKCS#11 login failed for provider ${providerId}: ${code ?? (err as Error).message}`);
        }
    }
    return new Pkcs11KeyStore(pkcs11, module, tokenKey, slot, session, providerId, readOnly, ctx.timeoutMs);
};

/**
 * KMS provider type `pkcs11`: keys in a PKCS#11 token (an HSM, or SoftHSM2 for development and tests). The module
 * is loaded once per library file and process and finalized when its last provider closes.
 */
export const pkcs11KmsProvider: KmsProviderType<Pkcs11KmsOptions> = {
    type: 'pkcs11',
    optionsSchema: pkcs11OptionsSchema,
    secretPaths: ['pin'],
    async open(options, ctx) {
        const module = acquireModule(options.library, ctx.providerId);
        try {
            return openSession(module, loadBinding(), options, ctx);
        }
        catch (err) {
            releaseModule(module);
            throw err;
        }
    }
};
