import ChildProcess from 'node:child_process';
import Fs from 'node:fs';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { createTestDatabase } from './helpers/databases';
import { freePort } from './helpers/net';

export const lab = Lab.script();
const { describe, it } = lab;

const SECRETS = { MASTER_SECRET: 'm'.repeat(32), AUTH_CLIENT_ID: 'root', AUTH_CLIENT_SECRET: 'a-long-enough-secret' };

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

    describe('npm scripts on a developer machine (examples/dev.env, as npm start)', () => {
        /** The package.json script as `npm run` would run it, on the TypeScript sources instead of dist/. */
        const npmRun = (name: string, env: Record<string, string>) => {
            const script = (JSON.parse(Fs.readFileSync(Path.join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts[name];
            expect(script, `npm script ${name}`).to.contain('dist/bin/hallmark.js');
            const command = script!.replace('dist/bin/hallmark.js', '-r ./scripts/register-ts.js bin/hallmark.ts');
            return ChildProcess.spawnSync('sh', ['-c', command], { cwd: root, env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8', timeout: 60_000 });
        };

        it('exist for every `npm run` command the README and docs/ name', () => {
            const scripts = (JSON.parse(Fs.readFileSync(Path.join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
            const docs = ['README.md', ...Fs.readdirSync(Path.join(root, 'docs')).map((f) => `docs/${f}`)];
            const named = docs.flatMap((file) => [...Fs.readFileSync(Path.join(root, file), 'utf8').matchAll(/npm run ([\w:-]+)/g)].map((m) => `${file}: ${m[1]}`));
            expect(named).to.include('README.md: keys:rotate');
            expect(named).to.include('README.md: migrate:status');
            expect(named.filter((n) => !(n.split(': ')[1]! in scripts))).to.equal([]);
        });

        it('run migrate:status, migrate and keys:rotate without any variable set, and the variables set win over the file', async () => {
            const db = await createTestDatabase('sqlite');
            try {
                // FOLDER set here wins over ./tmp of examples/dev.env: the developer's own database stays untouched.
                const env = { FOLDER: db.folder, LOG_LEVEL: 'error' };
                const status = npmRun('migrate:status', env);
                expect(status.status, status.stderr).to.equal(0);
                expect(status.stdout).to.match(/0 applied, [1-9][0-9]* pending/);
                const migrate = npmRun('migrate', env);
                expect(migrate.status, migrate.stderr).to.equal(0);
                const rotate = npmRun('keys:rotate', env);
                expect(rotate.status, rotate.stderr).to.equal(0);
                expect(rotate.stdout).to.contain('New token signing key');
                expect(Fs.existsSync(Path.join(db.folder, 'service.db'))).to.be.true();
            }
            finally {
                await db.drop();
            }
        });
    });

    describe('with PostgreSQL unreachable (a port nothing listens on)', () => {
        const unreachable = async () => ({
            ...SECRETS,
            PUBLIC_URL: 'https://x.example',
            LOG_LEVEL: 'info',
            DB_TYPE: 'postgres',
            DB_HOST: '127.0.0.1',
            DB_PORT: String(await freePort()),
            DB_USERNAME: 'hallmark',
            DB_PASSWORD: 'secret',
            DB_DATABASE: 'hallmark_db'
        });

        for (const command of ['start', 'migrate', 'migrate:status', 'keys:rotate']) {
            it(`${command} prints one line naming the database, its address and the variables to check, and exits non-zero`, async () => {
                const env = await unreachable();
                const res = cli([command], env);
                expect(res.status).to.equal(1);
                const lines = res.stderr.trim().split('\n');
                expect(lines, res.stderr).to.have.length(1);
                expect(lines[0]).to.contain(`"hallmark_db" at 127.0.0.1:${env.DB_PORT}`);
                expect(lines[0]).to.contain('ECONNREFUSED');
                expect(lines[0]).to.contain('DB_HOST, DB_PORT, DB_USERNAME, DB_PASSWORD, DB_DATABASE and DB_SSL');
                expect(lines[0]).to.not.contain('secret');
                expect(res.stdout).to.not.match(/\n\s+at /);
                expect(res.stderr).to.not.match(/\n\s+at /);
            });
        }
    });

    it('names the API docs and console URLs in the start log', async () => {
        const db = await createTestDatabase('sqlite');
        const server = ChildProcess.spawn(
            process.execPath,
            ['-r', Path.join(root, 'scripts/register-ts.js'), Path.join(root, 'bin/hallmark.ts'), 'start'],
            { env: { PATH: process.env.PATH ?? '', ...db.env, ...SECRETS, PUBLIC_URL: 'https://hallmark.example', PORT: '0', HOST: '127.0.0.1', WORKER: 'off', LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] }
        );
        try {
            let out = '';
            await new Promise<void>((resolve, reject) => {
                server.stdout.on('data', (chunk: Buffer) => {
                    out += chunk.toString();
                    if (/Hallmark listening[\s\S]*database/.test(out)) {
                        resolve();
                    }
                });
                server.once('exit', (code) => reject(new Error(`exited with ${code} before listening:\n${out}`)));
            });
            expect(out).to.contain('docs: "https://hallmark.example/api/docs"');
            expect(out).to.contain('console: "https://hallmark.example/console"');
        }
        finally {
            const exited = new Promise((resolve) => server.once('exit', resolve));
            server.kill('SIGTERM');
            await exited;
            await db.drop();
        }
    });
});
