import Crypto from 'node:crypto';
import { Agent, request, type IncomingHttpHeaders } from 'node:http';

export interface Answer {
    status: number;
    headers: IncomingHttpHeaders;
    text: string;
    /** The body parsed as JSON (undefined when empty). */
    readonly json: any;
}

/**
 * Told of every request before it is sent (the per-route phase of bench/harness.ts runs one request at a time and
 * charges the server CPU spent from one request's start to the next's to the first one's route).
 */
let requestObserver: ((method: string, url: string) => void) | undefined;

export const observeRequests = (observer: ((method: string, url: string) => void) | undefined): void => {
    requestObserver = observer;
};

/** A keep-alive HTTP client, so the benchmarks measure the service rather than connection set-up. */
export const httpClient = () => {
    // Idle sockets are dropped after 4 s, before the server's 5-s keep-alive timeout closes them: a request on a socket
    // the server is closing at that moment fails with "socket hang up" (a wallet idle through the floor measurement).
    const agent = new Agent({ keepAlive: true, maxSockets: 64, timeout: 4000 });
    const call = (url: string, method: string, body?: string, headers: Record<string, string> = {}): Promise<Answer> =>
        new Promise((resolve, reject) => {
            requestObserver?.(method, url);
            const req = request(url, { method, agent, headers: { ...(body ? { 'content-length': Buffer.byteLength(body) } : {}), ...headers } }, (res) => {
                const chunks: Buffer[] = [];
                res.on('data', (c) => chunks.push(c));
                res.on('end', () => {
                    const text = Buffer.concat(chunks).toString();
                    resolve({ status: res.statusCode!, headers: res.headers, text, get json() { return text ? JSON.parse(text) : undefined; } });
                });
            });
            req.on('error', reject);
            req.end(body);
        });
    return { call, close: () => agent.destroy() };
};

/** Node's speed for the operations the flows cost the server (ES256 sign and verify, P-256 ECDH), one core. */
export const cryptoSpeed = () => {
    const { privateKey, publicKey } = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const other = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const data = Crypto.randomBytes(300);
    const signature = Crypto.sign('sha256', data, { key: privateKey, dsaEncoding: 'ieee-p1363' });
    const time = (fn: () => void) => {
        const start = process.hrtime.bigint();
        let n = 0;
        while (process.hrtime.bigint() - start < 1_000_000_000n) {
            fn();
            n++;
        }
        return n;
    };
    return {
        sign: time(() => Crypto.sign('sha256', data, { key: privateKey, dsaEncoding: 'ieee-p1363' })),
        verify: time(() => Crypto.verify('sha256', data, { key: publicKey, dsaEncoding: 'ieee-p1363' }, signature)),
        ecdh: time(() => Crypto.diffieHellman({ privateKey, publicKey: other.publicKey }))
    };
};

/**
 * Closed loop: after 50 warm-up flows, `wallets` concurrent loops run `flow` for `durationMs`. Answers the sorted
 * latencies (ms), the rate (flows/s) and how much of a core the wallets (this process) used.
 */
export const closedLoop = async (flow: () => Promise<void>, wallets: number, durationMs: number) => {
    for (let i = 0; i < 50; i++) {
        await flow();
    }
    const latencies: number[] = [];
    const clientCpu = process.cpuUsage();
    const until = Date.now() + durationMs;
    await Promise.all(Array.from({ length: wallets }, async () => {
        while (Date.now() < until) {
            const start = process.hrtime.bigint();
            await flow();
            latencies.push(Number(process.hrtime.bigint() - start) / 1e6);
        }
    }));
    const used = process.cpuUsage(clientCpu);
    latencies.sort((a, b) => a - b);
    return { latencies, rate: latencies.length / (durationMs / 1000), clientShare: (used.user + used.system) / 1000 / durationMs };
};
