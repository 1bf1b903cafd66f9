/**
 * Brute-force policy for client secrets: after `maxFailures` consecutive wrong secrets for one client id from one
 * source address, that pair is locked for `lockSeconds` (even the right secret is refused from there meanwhile);
 * a success resets the pair. Keyed by source address so that someone who only knows a client id cannot lock the
 * real client out from elsewhere. Kept in memory per replica and bounded: the oldest pairs go first when full.
 */
export const LOCKOUT = { maxFailures: 10, lockSeconds: 300, maxTracked: 10_000 };

interface Failures {
    count: number;
    lockedUntil: number;
}

export class AuthFailures {
    private readonly failures = new Map<string, Failures>();

    private static key(clientId: string, source: string): string {
        return `${source}\u0000${clientId}`;
    }

    isLocked(clientId: string, source: string): boolean {
        const entry = this.failures.get(AuthFailures.key(clientId, source));
        return !!entry && entry.lockedUntil > Date.now();
    }

    recordFailure(clientId: string, source: string): void {
        const key = AuthFailures.key(clientId, source);
        const entry = this.failures.get(key) ?? { count: 0, lockedUntil: 0 };
        this.failures.delete(key);
        entry.count += 1;
        if (entry.count >= LOCKOUT.maxFailures) {
            entry.count = 0;
            entry.lockedUntil = Date.now() + LOCKOUT.lockSeconds * 1000;
        }
        this.failures.set(key, entry);
        while (this.failures.size > LOCKOUT.maxTracked) {
            this.failures.delete(this.failures.keys().next().value as string);
        }
    }

    recordSuccess(clientId: string, source: string): void {
        this.failures.delete(AuthFailures.key(clientId, source));
    }

    /** An administrator changed the client (a new secret, say): every source starts afresh. */
    forgetClient(clientId: string): void {
        const suffix = `\u0000${clientId}`;
        for (const key of this.failures.keys()) {
            if (key.endsWith(suffix)) {
                this.failures.delete(key);
            }
        }
    }
}
