import ChildProcess from 'node:child_process';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { createTestDatabase } from './helpers/databases';

export const lab = Lab.script();
const { describe, it } = lab;

const root = Path.join(__dirname, '..');
const cli = (args: string[], env: Record<string, string>) => ChildProcess.spawnSync(
    process.execPath,
    ['-r', Path.join(root, 'scripts/register-ts.js'), Path.join(root, 'bin/hallmark.ts'), ...args],
    { env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8', timeout: 60_000 }
);

describe('CLI', () => {
    it('stops with a non-zero exit and a message naming the variable and the rule', () => {
        const res = cli(['migrate:status'], { PUBLIC_URL: 'https://x.example', MASTER_SECRET: 'short', AUTH_CLIENT_ID: 'root', AUTH_CLIENT_SECRET: 'a-long-enough-secret' });
        expect(res.status).to.equal(2);
        expect(res.stderr).to.contain('MASTER_SECRET: "MASTER_SECRET" length must be at least 32 characters long');
    });

    it('migrates and reports migration status', async () => {
        const db = await createTestDatabase('sqlite');
        try {
            const env = { ...db.env, PUBLIC_URL: 'https://x.example', MASTER_SECRET: 'm'.repeat(32), AUTH_CLIENT_ID: 'root', AUTH_CLIENT_SECRET: 'a-long-enough-secret', LOG_LEVEL: 'error' };
            const before = cli(['migrate:status'], env);
            expect(before.status).to.equal(0);
            expect(before.stdout).to.match(/0 applied, [1-9][0-9]* pending/);
            const migrate = cli(['migrate'], env);
            expect(migrate.status).to.equal(0);
            expect(migrate.stdout).to.contain('Applied');
            const after = cli(['migrate:status'], env);
            expect(after.stdout).to.match(/[1-9][0-9]* applied, 0 pending/);
        }
        finally {
            await db.drop();
        }
    });
});
