import Crypto from 'node:crypto';

/**
 * AES-256-GCM for database columns. Values are stored as `hm1.<keyId>.<base64url(iv | ciphertext | tag)>`:
 * the envelope version and key id let the key rotate (old rows stay readable through `previousKeys`, new writes use
 * the current key) without a flag day.
 */

const ENVELOPE = 'hm1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

export const deriveKeyFromMasterSecret = (masterSecret: string): Buffer =>
    Buffer.from(Crypto.hkdfSync('sha256', masterSecret, 'hallmark', 'column-encryption/v1', 32));

export const parseKey = (encoded: string): Buffer => {
    const key = /^[0-9a-fA-F]{64}$/.test(encoded) ? Buffer.from(encoded, 'hex') : Buffer.from(encoded, 'base64url');
    if (key.length !== 32) {
        throw new Error('An encryption key must be 32 bytes (64 hex characters or 43 base64 characters)');
    }
    return key;
};

const keyIdOf = (key: Buffer): string => Crypto.createHash('sha256').update(key).digest('hex').slice(0, 8);

export class ColumnCipher {
    private readonly current: { id: string; key: Buffer };
    private readonly keys = new Map<string, Buffer>();

    constructor(key: Buffer, previousKeys: Buffer[] = []) {
        this.current = { id: keyIdOf(key), key };
        for (const k of [key, ...previousKeys]) {
            this.keys.set(keyIdOf(k), k);
        }
    }

    /** ENCRYPTION_KEY wins; otherwise a key derived from MASTER_SECRET. Previous keys only decrypt. */
    static fromSecrets(secrets: { masterSecret?: string; encryptionKey?: string; previousEncryptionKeys?: string[] }): ColumnCipher {
        const previous = (secrets.previousEncryptionKeys ?? []).map(parseKey);
        if (secrets.encryptionKey) {
            return new ColumnCipher(parseKey(secrets.encryptionKey), previous);
        }
        if (!secrets.masterSecret) {
            throw new Error('Column encryption needs ENCRYPTION_KEY or MASTER_SECRET');
        }
        return new ColumnCipher(deriveKeyFromMasterSecret(secrets.masterSecret), previous);
    }

    encrypt(plaintext: string): string {
        const iv = Crypto.randomBytes(IV_BYTES);
        const cipher = Crypto.createCipheriv('aes-256-gcm', this.current.key, iv);
        const body = Buffer.concat([iv, cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
        return `${ENVELOPE}.${this.current.id}.${body.toString('base64url')}`;
    }

    decrypt(envelope: string): string {
        const [version, keyId, payload] = envelope.split('.');
        if (version !== ENVELOPE || !keyId || payload === undefined) {
            throw new Error('Not an encrypted column value');
        }
        const key = this.keys.get(keyId);
        if (!key) {
            throw new Error(`Column was encrypted with an unknown key (${keyId})`);
        }
        const body = Buffer.from(payload, 'base64url');
        const decipher = Crypto.createDecipheriv('aes-256-gcm', key, body.subarray(0, IV_BYTES));
        decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
        return Buffer.concat([decipher.update(body.subarray(IV_BYTES, body.length - TAG_BYTES)), decipher.final()]).toString('utf8');
    }

    isEncrypted(value: unknown): boolean {
        return typeof value === 'string' && value.startsWith(`${ENVELOPE}.`);
    }

    /** True when the value was written with an older key and should be re-encrypted. */
    needsRotation(envelope: string): boolean {
        return envelope.split('.')[1] !== this.current.id;
    }
}
