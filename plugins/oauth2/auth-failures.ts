import type { ChangeBus } from '../../lib/change-bus';

/**
 * Brute-force policy for client secrets: after `maxFailures` consecutive wrong secrets for one client id from one
 * source address, that pair is locked for `lockSeconds` (even the right secret is refused from there meanwhile);
 * a success resets the pair. Keyed by source address so that someone who only knows a client id cannot lock the
 * real client out from elsewhere (behind a reverse proxy the source is the proxy: see docs/deployment.md). Kept in
 * memory and bounded (the oldest pairs go first when full); with a change bus every worker and replica counts the
 * failures and successes of all of them, so spreading attempts over processes gains nothing.
 */
export const LOCKOUT = { maxFailures: 10, lockSeconds: 300, maxTracked: 10_000 };

interface Failures {
    count: number;
    lockedUntil: number;
}

/** One attempt's outcome as the bus carries it to the other processes. */
interface Attempt {
    clientId: string;
    source: string;
    failed: boolean;
}

const TOPIC = 'oauth2.auth-attempt';

const isAttempt = (value: unknown): value is Attempt => {
    const a = value as Attempt;
    return !!a && typeof a === 'object' && typeof a.clientId === 'string' && typeof a.source === 'string' && typeof a.failed === 'boolean';
};

export class AuthFailures {
    private readonly failures = new Map<string, Failures>();

    constructor(private readonly bus?: ChangeBus) {
        bus?.subscribe(TOPIC, (data) => {
            if (isAttempt(data)) {
                if (data.failed) {
                    this.count(data.clientId, data.source);
                }
                else {
                    this.failures.delete(AuthFailures.key(data.clientId, data.source));
                }
            }
        });
    }

    private static key(clientId: string, source: string): string {
        return `${source}\u0000${clientId}`;
    }

    isLocked(clientId: string, source: string): boolean {
        const entry = this.failures.get(AuthFailures.key(clientId, source));
        return !!entry && entry.lockedUntil > Date.now();
    }

    recordFailure(clientId: string, source: string): void {
        this.count(clientId, source);
        this.bus?.publish(TOPIC, { clientId, source, failed: true } satisfies Attempt);
    }

    recordSuccess(clientId: string, source: string): void {
        // Only a pair with failures has anything to reset elsewhere: a burst of good logins sends nothing.
        if (this.failures.delete(AuthFailures.key(clientId, source))) {
            this.bus?.publish(TOPIC, { clientId, source, failed: false } satisfies Attempt);
        }
    }

    private count(clientId: string, source: string): void {
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
