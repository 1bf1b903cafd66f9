import ChildProcess from 'node:child_process';
import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';

/** A compiled Hallmark process on a fresh SQLite folder, for benchmarks that load it from another process. */
export interface BenchService {
    url: string;
    /** The service process, for its CPU time. */
    pid: number;
    /** Its data folder (the SQLite database is service.db in it). */
    folder: string;
    stop(): Promise<void>;
}

const root = Path.join(__dirname, '..', '..');

const CLOCK_TICKS_PER_SECOND = 100;

/** After the command name: state, ppid, …; utime and stime are fields 14 and 15 of stat, indexes 11 and 12 here. */
const statFields = (pid: number | string): string[] | undefined => {
    try {
        return Fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    }
    catch {
        return undefined;
    }
};

const ownCpuMs = (fields: string[]): number => ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND;

/**
 * The service's processes: its own and its live children (the cluster workers when WORKERS > 1, which do the work).
 * A measurement reads it once: workers live as long as the service.
 */
export const serviceProcesses = (pid: number): number[] => {
    const children = Fs.readdirSync('/proc').filter((entry) => /^\d+$/.test(entry) && Number(statFields(entry)?.[1]) === pid).map(Number);
    return [pid, ...children];
};

/** User + system CPU time in ms of processes as the kernel accounts it (threads that ended included; ticks of 10 ms). */
export const processesCpuMs = (pids: number[]): number => pids.reduce((total, pid) => {
    const fields = statFields(pid);
    if (!fields) {
        throw new Error(`process ${pid} is gone`);
    }
    return total + ownCpuMs(fields);
}, 0);

/** User + system CPU time in ms of a process and its live children (see serviceProcesses). */
export const cpuMs = (pid: number): number => processesCpuMs(serviceProcesses(pid));

/** The demo tenant's configuration folder (what `npm start` imports). */
export const DEMO_CONFIG = { CONFIG_FOLDER: Path.join(root, 'examples', 'config') };

export const NODE_FLAGS = ['--max-semi-space-size=4'];

export const ROOT = { id: 'bench-root', secret: 'bench-root-secret-0123456789abcdef' };

/**
 * Refuses a port something already listens on: a process left by an interrupted run would otherwise answer the
 * health check in place of the new one, and the run would measure (or fail against) the wrong service.
 */
export const assertPortFree = async (port: number): Promise<void> => {
    const taken = await fetch(`http://127.0.0.1:${port}/`).then(() => true, () => false);
    if (taken) {
        throw new Error(`port ${port} is in use (a process left by an interrupted bench? see: ss -ltnp | grep ${port})`);
    }
};

export const startService = async (port: number, env: Record<string, string> = {}): Promise<BenchService> => {
    await assertPortFree(port);
    const entry = Path.join(root, 'dist', 'bin', 'hallmark.js');
    if (!Fs.existsSync(entry)) {
        throw new Error('Build first: npm run build');
    }
    const folder = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-bench-'));
    // HALLMARK_BENCH_PROFILE=<dir> writes a CPU profile of the service process there.
    const profile = process.env.HALLMARK_BENCH_PROFILE ? [`--cpu-prof`, `--cpu-prof-dir=${process.env.HALLMARK_BENCH_PROFILE}`] : [];
    // The same V8 flags as `npm start` (see package.json), so throughput is measured as the service runs.
    const child = ChildProcess.spawn(process.execPath, [...profile, ...NODE_FLAGS, entry, 'start'], {
        cwd: root,
        env: {
            PATH: process.env.PATH ?? '',
            NODE_ENV: 'production',
            PUBLIC_URL: `http://127.0.0.1:${port}`,
            PORT: String(port),
            HOST: '127.0.0.1',
            FOLDER: folder,
            MASTER_SECRET: 'bench-master-secret-0123456789-abcdefghij',
            AUTH_CLIENT_ID: ROOT.id,
            AUTH_CLIENT_SECRET: ROOT.secret,
            LOG_LEVEL: 'warn',
            // One process unless the run asks for more (WORKERS=2 npm run bench -- issuance): CPU counts the workers too.
            WORKERS: process.env.WORKERS ?? '1',
            ...env
        },
        stdio: 'inherit'
    });
    const url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
        const up = await fetch(`${url}/health`).then((r) => r.ok, () => false);
        if (up) {
            return {
                url,
                pid: child.pid!,
                folder,
                async stop() {
                    child.kill('SIGTERM');
                    await new Promise((r) => child.once('exit', r));
                    Fs.rmSync(folder, { recursive: true, force: true });
                }
            };
        }
        await new Promise((r) => setTimeout(r, 20));
    }
    child.kill('SIGKILL');
    throw new Error('the service did not start');
};

export const post = async (url: string, body: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    return { status: res.status, body: await res.json() as any };
};
