import ChildProcess from 'node:child_process';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { createTestDatabase } from './helpers/databases';
import { testEnv } from './helpers/server';

export const lab = Lab.script();
const { describe, it } = lab;

const root = Path.join(__dirname, '..');

const waitFor = async (check: () => Promise<boolean>, ms: number) => {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
        if (await check().catch(() => false)) {
            return;
        }
        await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('timed out');
};

describe('process lifecycle', () => {
    it('warns about pending migrations when DB_MIGRATIONS_RUN is false', async () => {
        const db = await createTestDatabase('sqlite');
        try {
            const res = ChildProcess.spawnSync(process.execPath, ['-r', Path.join(root, 'scripts/register-ts.js'), Path.join(root, 'bin/hallmark.ts'), 'start'], {
                env: { PATH: process.env.PATH ?? '', ...testEnv(db, { LOG_LEVEL: 'info', DB_MIGRATIONS_RUN: 'false' }) },
                encoding: 'utf8',
                timeout: 30_000
            });
            // Without its tables the service cannot start; the warning says why and what to run.
            expect(res.stdout + res.stderr).to.match(/DB_MIGRATIONS_RUN is false and \d+ migration\(s\) are pending: run "hallmark migrate"/);
            expect(res.status).to.not.equal(0);
        }
        finally {
            await db.drop();
        }
    });

    it('on SIGTERM finishes in-flight requests before exiting', async () => {
        const db = await createTestDatabase('sqlite');
        const port = 3900 + Math.floor(Math.random() * 90);
        const child = ChildProcess.spawn(process.execPath, ['-r', Path.join(root, 'scripts/register-ts.js'), Path.join(root, 'bin/hallmark.ts'), 'start'], {
            env: { PATH: process.env.PATH ?? '', ...testEnv(db, { PORT: String(port), LOG_LEVEL: 'info', HALLMARK_MANIFEST: Path.join(__dirname, 'fixtures/probe-manifest.ts') }) },
            stdio: ['ignore', 'pipe', 'pipe']
        });
        let output = '';
        child.stdout!.on('data', (c) => (output += c));
        child.stderr!.on('data', (c) => (output += c));
        const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
        try {
            await waitFor(async () => output.includes('Hallmark listening'), 30_000);
            const inFlight = fetch(`http://127.0.0.1:${port}/api/probe/slow`);
            await new Promise((r) => setTimeout(r, 200));
            child.kill('SIGTERM');
            const res = await inFlight;
            expect(res.status).to.equal(200);
            expect(await res.json()).to.equal({ finished: true });
            expect(await exited).to.equal(0);
            expect(output).to.contain('stopped');
            await expect(fetch(`http://127.0.0.1:${port}/health`)).to.reject();
        }
        finally {
            child.kill('SIGKILL');
            await db.drop();
        }
    });
});
