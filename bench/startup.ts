import ChildProcess from 'node:child_process';
import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { rssMiB } from './harness';
import { NODE_FLAGS } from './service';
import { printTable } from './table';

/**
 * `npm start`-equivalent process to `/health` up, and its idle resident memory. Runs the compiled service with the
 * demo configuration on a fresh SQLite folder (cold: first start migrates and imports; warm: the same folder again).
 */
const root = Path.join(__dirname, '..', '..');
const entry = Path.join(root, 'dist', 'bin', 'hallmark.js');

const waitForHealth = async (port: number, deadline: number): Promise<void> => {
    while (Date.now() < deadline) {
        try {
            const res = await fetch(`http://127.0.0.1:${port}/health`);
            if (res.status === 200) {
                return;
            }
        }
        catch {
            // not listening yet
        }
        await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error('service did not become healthy in time');
};

const startOnce = async (folder: string, port: number) => {
    const started = process.hrtime.bigint();
    const child = ChildProcess.spawn(process.execPath, [...NODE_FLAGS, `--env-file=${Path.join(root, 'examples/dev.env')}`, entry, 'start'], {
        cwd: root,
        // One process: its start time and RSS are a worker's (cluster mode forks as many as WORKERS says).
        env: { PATH: process.env.PATH ?? '', FOLDER: folder, PORT: String(port), LOG_LEVEL: 'warn', WORKERS: '1' },
        stdio: 'ignore'
    });
    try {
        await waitForHealth(port, Date.now() + 30_000);
        const ms = Number(process.hrtime.bigint() - started) / 1e6;
        await new Promise((r) => setTimeout(r, 2000));
        return { ms, rss: rssMiB([child.pid!]) };
    }
    finally {
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
    }
};

export const benchStartup = async (): Promise<void> => {
    if (!Fs.existsSync(entry)) {
        throw new Error('Build first: npm run build');
    }
    const folder = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-bench-'));
    const rows: Array<Record<string, string | number>> = [];
    try {
        const cold = await startOnce(folder, 3917);
        rows.push({ run: 'cold (migrate + import)', 'start to /health ms': cold.ms, 'idle RSS MiB': cold.rss });
        for (let i = 1; i <= 3; i++) {
            const warm = await startOnce(folder, 3917);
            rows.push({ run: `warm ${i}`, 'start to /health ms': warm.ms, 'idle RSS MiB': warm.rss });
        }
    }
    finally {
        Fs.rmSync(folder, { recursive: true, force: true });
    }
    printTable('Start-up (SQLite, demo tenant; targets: <= 1000 ms warm, <= 120 MiB idle)', rows);
};
