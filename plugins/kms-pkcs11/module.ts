import Fs from 'node:fs';
import type * as Pkcs11Js from 'pkcs11js';
import { KmsUnavailableError } from '../../lib/kms/types';

/* The PKCS#11 modules of the process: the native binding, its errors, and each library loaded and initialized once. */

export type Pkcs11Binding = typeof Pkcs11Js;
export type Handle = Buffer;

let binding: Pkcs11Binding | undefined;

// Loaded on first open so that a missing or broken native build only disables this provider, not the server.
export const loadBinding = (): Pkcs11Binding => {
    binding ??= require('pkcs11js') as Pkcs11Binding;
    return binding;
};

/** The CKR_ name of a pkcs11js error, or undefined for anything else. */
export const ckrName = (err: unknown): string | undefined => {
    const message = err instanceof Error ? err.message : '';
    return /^(CKR_[A-Z0-9_]+)/.exec(message)?.[1];
};

/** An operation of the PKCS#11 module failed; `code` is the CKR_ name when the module returned one. */
export class Pkcs11Error extends Error {
    override name = 'Pkcs11Error';
    constructor(readonly operation: string, readonly code: string | undefined, message: string, options?: ErrorOptions) {
        super(message, options);
    }
}

export const wrapError = (providerId: string, operation: string, err: unknown): Pkcs11Error => {
    const code = ckrName(err);
    const reason = code ?? (err instanceof Error ? err.message : String(err));
    return new Pkcs11Error(operation, code, `PKCS#11 ${operation} failed for provider ${providerId}: ${reason}`, { cause: err });
};

/**
 * One loaded module per library file and process: C_Initialize may run only once per process (a second call answers
 * CKR_CRYPTOKI_ALREADY_INITIALIZED), and C_Finalize would pull the module away from every other user. Keyed by the
 * real path because dlopen shares one image between a symlink and its target.
 */
export interface LoadedModule {
    key: string;
    lib: Pkcs11Js.PKCS11;
    users: number;
    /** False when something else in the process had initialized the module: then it is theirs to finalize. */
    ownsInitialize: boolean;
    /** Login state is per token and process, shared by all of its sessions (PKCS#11 v2.40 5.6). */
    tokens: Map<string, TokenLogin>;
}

interface TokenLogin {
    sessions: number;
    /** SHA-256 of the PIN that logged in; a later opener's PIN is compared to it because C_Login cannot check it again. */
    pinDigest: Buffer;
}

const modules = new Map<string, LoadedModule>();

export const acquireModule = (library: string, providerId: string): LoadedModule => {
    let key: string;
    try {
        key = Fs.realpathSync(library);
    }
    catch (err) {
        throw new KmsUnavailableError(`PKCS#11 library for provider ${providerId} cannot be loaded: ${(err as NodeJS.ErrnoException).code ?? 'not found'} ${library}`);
    }
    const existing = modules.get(key);
    if (existing) {
        existing.users++;
        return existing;
    }
    let pkcs11: Pkcs11Binding;
    try {
        pkcs11 = loadBinding();
    }
    catch (err) {
        throw new KmsUnavailableError(`PKCS#11 support (pkcs11js) is not available for provider ${providerId}: ${(err as Error).message}`);
    }
    const lib = new pkcs11.PKCS11();
    try {
        lib.load(key);
    }
    catch (err) {
        throw new KmsUnavailableError(`PKCS#11 library for provider ${providerId} cannot be loaded: ${(err as Error).message.split('\n')[0]}`);
    }
    let ownsInitialize = true;
    try {
        // OS locking: the async calls (sign, key generation) run on libuv worker threads.
        lib.C_Initialize({ flags: pkcs11.CKF_OS_LOCKING_OK });
    }
    catch (err) {
        if (ckrName(err) === 'CKR_CRYPTOKI_ALREADY_INITIALIZED') {
            ownsInitialize = false;
        }
        else {
            try { lib.close(); } catch { /* the C_Initialize error is the one to report */ }
            throw new KmsUnavailableError(wrapError(providerId, 'C_Initialize', err).message);
        }
    }
    const loaded: LoadedModule = { key, lib, users: 1, ownsInitialize, tokens: new Map() };
    modules.set(key, loaded);
    return loaded;
};

export const releaseModule = (loaded: LoadedModule): void => {
    loaded.users--;
    if (loaded.users > 0 || modules.get(loaded.key) !== loaded) {
        return;
    }
    modules.delete(loaded.key);
    try {
        if (loaded.ownsInitialize) {
            loaded.lib.C_Finalize();
        }
    }
    finally {
        loaded.lib.close();
    }
};
