import Crypto from 'node:crypto';

/**
 * Client secrets are 256-bit random values, so guessing one is already infeasible and a slow password hash
 * (bcrypt, argon2) would only add cost to every token request. A keyed fast hash — HMAC-SHA-256 under a key
 * derived from the service's secret — is the right tool: a stolen database alone does not let anyone test
 * candidate secrets, and verification takes microseconds. Comparison is constant-time.
 */

const PREFIX = 'hmac-sha256.';
const SECRET_BYTES = 32;

export const generateClientSecret = (): string => Crypto.randomBytes(SECRET_BYTES).toString('base64url');

export class SecretHasher {
    private readonly key: Buffer;

    constructor(rootSecret: string | Buffer) {
        this.key = Buffer.from(Crypto.hkdfSync('sha256', rootSecret, 'hallmark', 'client-secret-hash/v1', 32));
    }

    /** Keyed by MASTER_SECRET, else by ENCRYPTION_KEY. */
    static fromSecrets(secrets: { masterSecret?: string; encryptionKey?: string }): SecretHasher {
        const root = secrets.masterSecret ?? secrets.encryptionKey;
        if (!root) {
            throw new Error('Hashing client secrets needs MASTER_SECRET or ENCRYPTION_KEY');
        }
        return new SecretHasher(root);
    }

    hash(secret: string): string {
        return PREFIX + Crypto.createHmac('sha256', this.key).update(secret, 'utf8').digest('base64url');
    }

    verify(secret: string, stored: string): boolean {
        const expected = Buffer.from(stored, 'utf8');
        const actual = Buffer.from(this.hash(secret), 'utf8');
        return expected.length === actual.length && Crypto.timingSafeEqual(expected, actual);
    }
}
