import Fs from 'node:fs/promises';
import Path from 'node:path';
import Readline from 'node:readline/promises';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ConfigError } from '../../manifests/environment';
import { IMPORT_MODES, type ImportMode } from '../config-import/plan';
import { InputError, readInput, upgradeInput, validateInput, withOfflineRegistry, type ConfigInput, type FileReport } from './config-offline';

/** Exit codes of `hallmark config`, for CI pipelines (docs/operations.md). */
export const EXIT = { ok: 0, failure: 1, usage: 2, blocked: 3 } as const;

export interface CliIo {
    stdout: NodeJS.WritableStream;
    stderr: NodeJS.WritableStream;
    stdin: NodeJS.ReadableStream & { isTTY?: boolean };
    env: NodeJS.ProcessEnv;
}

class UsageError extends Error {}

/** A failure already explained to the user: its message is printed as is, with the exit code it carries. */
class CommandFailed extends Error {
    constructor(message: string, readonly exitCode: number = EXIT.failure) {
        super(message);
    }
}

const CONNECTION = `  --url <url>              the service, e.g. https://hallmark.example.com (or HALLMARK_URL)
  --client-id <id>         client with tenant:admin, or tenant:manage with --tenant (or HALLMARK_CLIENT_ID)
  --client-secret <secret> (or HALLMARK_CLIENT_SECRET; prefer the variable: arguments show in process lists)
  --tenant <id>            the tenant to act on (tenant:manage clients; a tenant client acts on its own)`;

const HELP: Record<string, string> = {
    config: `Usage: hallmark config <command> [options]

Configuration as code (spec 2.9, 4.8): documents, tenant folders and bundles.

Offline (no database, no service):
  upgrade <path>    move documents to the current version of their kind
  validate <path>   check documents as an import would
Against a running service:
  export            download the tenant's configuration as a bundle
  plan <bundle>     show what importing a bundle would change
  import <bundle>   plan, confirm, then import a bundle

<path> is a document (.json with $schema), a tenant folder (or a folder of them) or a bundle (JSON or ZIP).
Run "hallmark config <command> --help" for the options of each.

Exit codes: 0 ok, 1 failure (invalid input, refused request, service unreachable), 2 usage error,
3 blocked plan (plan and import).
`,
    upgrade: `Usage: hallmark config upgrade <path> [--out <file>] [--write]

Moves every document to the current version of its kind through the service's upgrade steps and validates it.
Upgrade warnings (e.g. PROVIDED_ATTESTATIONS_REMOVED) and problems go to stderr.
  a document      printed to stdout, or written to --out, or rewritten in place with --write
  a tenant folder reported; rewritten in place with --write (nothing is written if any file fails)
  a JSON bundle   printed to stdout, or written to --out / in place with --write (new checksums, formatVersion 2)
  a ZIP bundle    written to --out (or in place with --write)
Options:
  --out <file>     where to write the upgraded document or bundle
  --write          rewrite the input in place
  --help
Exit codes: 0 upgraded (or already current), 1 a document cannot be upgraded, 2 usage error.
`,
    validate: `Usage: hallmark config validate <path>

Checks a document, a tenant folder (or a folder of them) or a bundle (JSON or ZIP) as an import would: $schema
known and not newer than this version, upgrade, strict schema; a bundle's manifest, paths and checksums too.
Placeholders \${VAR} are resolved from the environment; an unresolved one is a warning. References between
resources and secrets a target must hold are checked by "hallmark config plan".
Options:
  --quiet          print problems only
  --help
Exit codes: 0 valid, 1 problems found, 2 usage error.
`,
    export: `Usage: hallmark config export [--format json|zip] [--out <file>] <connection>

Downloads the tenant's configuration. Secrets and database-held private keys are never exported: the manifest
lists what an import must supply.
Options:
  --format json|zip        default json
  --out <file>             default: stdout for json; <tenant>-<yyyymmdd>.zip for zip
${CONNECTION}
  --help
Exit codes: 0 exported, 1 failure, 2 usage error.
`,
    plan: `Usage: hallmark config plan <bundle> [--mode create|upsert|replace] [--format table|json] <connection>

Shows what importing the bundle (JSON or ZIP) would do to each resource, what it still needs, and its warnings.
Options:
  --mode <mode>            create (skip existing), upsert (default), replace (also delete what this source imported)
  --format table|json      table (default) or the plan as JSON on stdout
${CONNECTION}
  --help
Exit codes: 0 plan can be applied, 1 failure, 2 usage error, 3 plan blocked.
`,
    import: `Usage: hallmark config import <bundle> [--mode create|upsert|replace] [--yes] <connection>

Plans the import, prints the plan, and applies exactly that plan after confirmation: --yes, or an answer on an
interactive terminal. Without either nothing is imported. The import is one transaction: all or nothing; a change
of the tenant since the plan fails with CONFIG_PLAN_STALE. Secrets made for "!generate" are printed once, on stdout.
Options:
  --mode <mode>            create, upsert (default) or replace (confirmReplace is sent only after confirmation)
  --yes                    import without asking
  --format table|json      table (default) or the import result as JSON on stdout
${CONNECTION}
  --help
Exit codes: 0 imported (or nothing to do), 1 failure or declined, 2 usage error (also: no --yes and no terminal),
3 plan blocked.
`
};

const OFFLINE_OPTIONS = {
    out: { type: 'string' },
    write: { type: 'boolean', default: false },
    quiet: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false }
} as const;

const REMOTE_OPTIONS = {
    url: { type: 'string' },
    'client-id': { type: 'string' },
    'client-secret': { type: 'string' },
    tenant: { type: 'string' },
    mode: { type: 'string' },
    format: { type: 'string' },
    out: { type: 'string' },
    yes: { type: 'boolean', short: 'y', default: false },
    help: { type: 'boolean', default: false }
} as const;

const parse = <O extends NonNullable<ParseArgsConfig['options']>>(args: string[], options: O) => {
    try {
        return parseArgs({ args, options, allowPositionals: true, strict: true as const });
    }
    catch (err) {
        throw new UsageError((err as Error).message);
    }
};

/** `hallmark config …`: answers the exit code; never calls process.exit itself. */
export const runConfigCommand = async (argv: string[], io: CliIo): Promise<number> => {
    const [command, ...rest] = argv;
    const say = (text: string) => io.stderr.write(`${text}\n`);
    try {
        if (!command || command === '--help' || command === '-h' || command === 'help') {
            io.stdout.write(HELP.config!);
            return command ? EXIT.ok : EXIT.usage;
        }
        if (!(command in HELP) || command === 'config') {
            throw new UsageError(`Unknown config command ${command}`);
        }
        if (rest.includes('--help') || rest.includes('-h')) {
            io.stdout.write(HELP[command]!);
            return EXIT.ok;
        }
        switch (command) {
            case 'upgrade':
            case 'validate':
                return await offline(command, rest, io, say);
            default:
                return await remote(command as 'export' | 'plan' | 'import', rest, io, say);
        }
    }
    catch (err) {
        if (err instanceof UsageError) {
            io.stderr.write(`hallmark config: ${err.message}\n\n${HELP[command && command in HELP ? command : 'config']}`);
            return EXIT.usage;
        }
        if (err instanceof CommandFailed) {
            say(`hallmark config ${command}: ${err.message}`);
            return err.exitCode;
        }
        if (err instanceof InputError || err instanceof ConfigError) {
            say(`hallmark config ${command}: ${err.message}`);
            return EXIT.failure;
        }
        throw err;
    }
};

const printReports = (reports: FileReport[], say: (text: string) => void, quiet: boolean) => {
    for (const report of reports) {
        if (report.problems.length) {
            say(`✗ ${report.file}`);
            report.problems.forEach((p) => say(`    ${p}`));
        }
        else if (!quiet) {
            say(`✓ ${report.file}${report.upgradedFrom !== undefined ? ` (from version ${report.upgradedFrom})` : ''}`);
        }
        if (!quiet || report.problems.length) {
            report.warnings.forEach((w) => say(`    warning ${w}`));
        }
    }
};

const offline = async (command: 'upgrade' | 'validate', args: string[], io: CliIo, say: (text: string) => void): Promise<number> => {
    const { values, positionals } = parse(args, OFFLINE_OPTIONS);
    if (positionals.length !== 1) {
        throw new UsageError(positionals.length ? 'give one path' : 'a path is required');
    }
    if (command === 'validate' && (values.out || values.write)) {
        throw new UsageError('validate writes nothing: --out and --write belong to upgrade');
    }
    if (command === 'upgrade' && values.quiet) {
        throw new UsageError('--quiet belongs to validate');
    }
    const input: ConfigInput = await readInput(positionals[0]!);
    return withOfflineRegistry(async (registry) => {
        if (command === 'validate') {
            const reports = await validateInput(registry, input, io.env);
            printReports(reports, say, values.quiet);
            const bad = reports.filter((r) => r.problems.length).length;
            say(bad ? `${bad} of ${reports.length} document(s) invalid` : `${reports.length} document(s) valid`);
            return bad ? EXIT.failure : EXIT.ok;
        }
        if (input.type === 'folder' && values.out) {
            throw new UsageError('a folder is upgraded in place: use --write');
        }
        const outcome = await upgradeInput(registry, input, { write: values.write, ...(values.out ? { out: values.out } : {}) });
        printReports(outcome.reports, say, false);
        const bad = outcome.reports.filter((r) => r.problems.length).length;
        const upgraded = outcome.reports.filter((r) => r.upgradedFrom !== undefined).length;
        if (outcome.output !== undefined) {
            io.stdout.write(outcome.output);
        }
        outcome.written.forEach((file) => say(`wrote ${file}`));
        if (bad) {
            say(`${bad} document(s) cannot be upgraded${input.type === 'document' || input.type === 'zip-bundle' || !values.write ? '' : '; nothing was written'}`);
            return EXIT.failure;
        }
        say(`${upgraded} of ${outcome.reports.length} document(s) upgraded${input.type === 'folder' && !values.write && upgraded ? ' (dry run: --write rewrites them)' : ''}`);
        return EXIT.ok;
    });
};

// ---------------------------------------------------------------------------------------------------------------
// Against a running service

interface PlanAction { kind: string; id: string; action: string; changes?: Array<{ path: string }>; code?: string; message?: string }
interface PlanBody {
    planFingerprint: string;
    mode: ImportMode;
    tenant: string;
    blocked: boolean;
    actions: PlanAction[];
    requirements: Array<{ code: string; resource: string; path: string; message: string; placeholder?: string }>;
    warnings: Array<{ code: string; resource: string; message: string }>;
}
interface ImportBody { operationId: string; actions: PlanAction[]; warnings: PlanBody['warnings']; generatedSecrets?: Array<{ kind: string; id: string; secret: string }> }

interface Connection {
    url: string;
    token: string;
    tenant?: string;
}

const errorText = async (res: Response): Promise<{ text: string; body?: Record<string, unknown> }> => {
    const raw = await res.text();
    try {
        const body = JSON.parse(raw) as Record<string, unknown>;
        const details = Array.isArray(body.details) ? (body.details as Array<{ path?: string; message?: string }>).slice(0, 20).map((d) => `\n    ${d.path ? `${d.path}: ` : ''}${d.message ?? ''}`).join('') : '';
        const code = body.code ?? body.error;
        return { text: `${res.status}${code ? ` ${String(code)}` : ''}: ${String(body.message ?? body.error_description ?? raw)}${details}`, body };
    }
    catch {
        return { text: `${res.status}: ${raw.slice(0, 500)}` };
    }
};

const connect = async (values: { url?: string; 'client-id'?: string; 'client-secret'?: string; tenant?: string }, env: NodeJS.ProcessEnv, say: (text: string) => void): Promise<Connection> => {
    const url = (values.url ?? env.HALLMARK_URL)?.replace(/\/+$/, '');
    const clientId = values['client-id'] ?? env.HALLMARK_CLIENT_ID;
    const clientSecret = values['client-secret'] ?? env.HALLMARK_CLIENT_SECRET;
    if (!url || !/^https?:\/\/[^/]/.test(url)) {
        throw new UsageError(url ? `--url ${url} is not an http(s) URL` : '--url (or HALLMARK_URL) is required');
    }
    if (!clientId || !clientSecret) {
        throw new UsageError('client credentials are required: --client-id/--client-secret or HALLMARK_CLIENT_ID/HALLMARK_CLIENT_SECRET');
    }
    say(`Requesting a token for ${clientId} from ${url}`);
    const res = await request(`${url}/api/oauth2/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret }).toString()
    });
    if (!res.ok) {
        throw new CommandFailed(`no token: ${(await errorText(res)).text}`);
    }
    const token = ((await res.json()) as { access_token?: string }).access_token;
    if (!token) {
        throw new CommandFailed('no token: the answer has no access_token');
    }
    return { url, token, ...(values.tenant ? { tenant: values.tenant } : {}) };
};

const request = async (url: string, init: RequestInit): Promise<Response> => {
    try {
        return await fetch(url, init);
    }
    catch (err) {
        const cause = (err as { cause?: { code?: string; message?: string } }).cause;
        throw new CommandFailed(`${new URL(url).origin} cannot be reached (${cause?.code ?? cause?.message ?? (err as Error).message})`);
    }
};

const api = (connection: Connection, path: string, query: Record<string, string | undefined>): string => {
    const params = new URLSearchParams(Object.entries({ ...query, tenantId: connection.tenant }).filter((e): e is [string, string] => e[1] !== undefined));
    const search = params.toString();
    return `${connection.url}${path}${search ? `?${search}` : ''}`;
};

/** The bundle to send: a ZIP goes as multipart field `bundle` to the …/archive route, JSON as the body. */
const bundleBody = async (path: string): Promise<{ archive: boolean; body: () => { body: FormData | Buffer; headers: Record<string, string> } }> => {
    const bytes = await Fs.readFile(path).catch((err: NodeJS.ErrnoException) => { throw new InputError(`${path}: cannot be read (${err.code ?? err.message})`); });
    if (bytes.subarray(0, 4).equals(Buffer.from('PK\u0003\u0004', 'latin1'))) {
        return {
            archive: true,
            body: () => {
                const form = new FormData();
                form.append('bundle', new Blob([bytes], { type: 'application/zip' }), Path.basename(path));
                return { body: form, headers: {} };
            }
        };
    }
    try {
        JSON.parse(bytes.toString('utf8'));
    }
    catch {
        throw new InputError(`${path}: neither a ZIP nor a JSON bundle`);
    }
    return { archive: false, body: () => ({ body: bytes, headers: { 'content-type': 'application/json' } }) };
};

const pad = (rows: string[][]): string => {
    const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
    return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ').trimEnd()).join('\n');
};

/** The plan as a table for people: one row per resource, then requirements and warnings. */
export const planTable = (plan: PlanBody): string => {
    const detail = (a: PlanAction) => a.changes?.length
        ? a.changes.map((c) => c.path).join(', ')
        : [a.code, a.message].filter(Boolean).join(': ');
    const lines = [
        `Plan for tenant ${plan.tenant}, mode ${plan.mode}${plan.blocked ? ' — BLOCKED' : ''}`,
        '',
        pad([['ACTION', 'KIND', 'ID', 'DETAILS'], ...plan.actions.map((a) => [a.action, a.kind, a.id, detail(a)])])
    ];
    const count = (action: string) => plan.actions.filter((a) => a.action === action).length;
    lines.push('', ['create', 'update', 'delete', 'unchanged', 'skip', 'blocked'].map((a) => `${count(a)} ${a}`).join(', '));
    if (plan.requirements.length) {
        lines.push('', 'Requirements:', pad(plan.requirements.map((r) => [`  ${r.code}`, r.resource, r.path, r.placeholder ?? '', r.message])));
    }
    if (plan.warnings.length) {
        lines.push('', 'Warnings:', pad(plan.warnings.map((w) => [`  ${w.code}`, w.resource, w.message])));
    }
    return `${lines.join('\n')}\n`;
};

const confirm = async (io: CliIo, question: string): Promise<boolean> => {
    const rl = Readline.createInterface({ input: io.stdin, output: io.stderr });
    try {
        return /^(y|yes)$/i.test((await rl.question(question)).trim());
    }
    finally {
        rl.close();
    }
};

const remote = async (command: 'export' | 'plan' | 'import', args: string[], io: CliIo, say: (text: string) => void): Promise<number> => {
    const { values, positionals } = parse(args, REMOTE_OPTIONS);
    const mode = (values.mode ?? 'upsert') as ImportMode;
    if (!IMPORT_MODES.includes(mode)) {
        throw new UsageError(`--mode must be one of ${IMPORT_MODES.join(', ')}`);
    }
    if (command === 'export') {
        if (positionals.length || values.mode || values.yes) {
            throw new UsageError('export takes no bundle, --mode or --yes');
        }
        const format = values.format ?? 'json';
        if (format !== 'json' && format !== 'zip') {
            throw new UsageError('--format must be json or zip');
        }
        const connection = await connect(values, io.env, say);
        say(`Exporting${connection.tenant ? ` tenant ${connection.tenant}` : ''} as ${format}`);
        const res = await request(api(connection, '/api/config-bundles/export', { format }), { headers: { authorization: `Bearer ${connection.token}` } });
        if (!res.ok) {
            throw new CommandFailed(`export refused: ${(await errorText(res)).text}`);
        }
        const bytes = Buffer.from(await res.arrayBuffer());
        const out = values.out ?? (format === 'zip' ? /filename="([^"/\\]+)"/.exec(res.headers.get('content-disposition') ?? '')?.[1] ?? 'bundle.zip' : undefined);
        if (out) {
            await Fs.writeFile(out, bytes);
            say(`wrote ${out} (${bytes.length} bytes)`);
        }
        else {
            io.stdout.write(bytes);
        }
        if (format === 'json') {
            const manifest = (JSON.parse(bytes.toString('utf8')) as { manifest: { resources: unknown[]; requirements: Array<{ code: string; resource: string; path: string }> } }).manifest;
            say(`${manifest.resources.length} resource(s) exported; ${manifest.requirements.length} requirement(s) an import must supply`);
            manifest.requirements.forEach((r) => say(`    ${r.code} ${r.resource} ${r.path}`));
        }
        return EXIT.ok;
    }

    if (positionals.length !== 1) {
        throw new UsageError(positionals.length ? 'give one bundle' : 'a bundle (JSON or ZIP file) is required');
    }
    const format = values.format ?? 'table';
    if (format !== 'table' && format !== 'json') {
        throw new UsageError('--format must be table or json');
    }
    if (values.out) {
        throw new UsageError('--out belongs to export');
    }
    if (command === 'plan' && values.yes) {
        throw new UsageError('--yes belongs to import');
    }
    const bundle = await bundleBody(positionals[0]!);
    const connection = await connect(values, io.env, say);
    const headers = { authorization: `Bearer ${connection.token}` };
    say(`Planning ${positionals[0]} (mode ${mode})`);
    const planned = bundle.body();
    const planRes = await request(api(connection, bundle.archive ? '/api/config-bundles/plan/archive' : '/api/config-bundles/plan', { mode }), { method: 'POST', headers: { ...headers, ...planned.headers }, body: planned.body });
    if (!planRes.ok) {
        throw new CommandFailed(`plan refused: ${(await errorText(planRes)).text}`);
    }
    const plan = (await planRes.json()) as PlanBody;
    const showPlan = (to: NodeJS.WritableStream) => to.write(planTable(plan));
    if (command === 'plan') {
        if (format === 'json') {
            io.stdout.write(`${JSON.stringify(plan, null, 2)}\n`);
        }
        else {
            showPlan(io.stdout);
        }
        return plan.blocked ? EXIT.blocked : EXIT.ok;
    }

    // import: the plan goes to stderr when stdout carries the JSON result.
    showPlan(format === 'json' ? io.stderr : io.stdout);
    if (plan.blocked) {
        say('The plan is blocked: nothing was imported. Fix the blocked items and the requirements above.');
        return EXIT.blocked;
    }
    const changing = plan.actions.filter((a) => ['create', 'update', 'delete'].includes(a.action)).length;
    if (!changing) {
        say('Nothing to import: every resource is unchanged or skipped.');
        if (format === 'json') {
            io.stdout.write(`${JSON.stringify({ operationId: null, actions: plan.actions, warnings: plan.warnings }, null, 2)}\n`);
        }
        return EXIT.ok;
    }
    if (!values.yes) {
        if (!io.stdin.isTTY) {
            throw new UsageError('not a terminal: review the plan, then run again with --yes to import it');
        }
        const deletes = plan.actions.filter((a) => a.action === 'delete').length;
        if (!await confirm(io, `Import ${changing} change(s)${deletes ? `, ${deletes} of them deletions,` : ''} into tenant ${plan.tenant}? [y/N] `)) {
            throw new CommandFailed('declined: nothing was imported');
        }
    }
    say(`Importing ${changing} change(s) into tenant ${plan.tenant} in one transaction…`);
    const started = Date.now();
    const sent = bundle.body();
    const importRes = await request(api(connection, bundle.archive ? '/api/config-bundles/import/archive' : '/api/config-bundles/import', {
        mode, planFingerprint: plan.planFingerprint, ...(mode === 'replace' ? { confirmReplace: 'true' } : {})
    }), { method: 'POST', headers: { ...headers, ...sent.headers }, body: sent.body });
    if (!importRes.ok) {
        const { text, body } = await errorText(importRes);
        if (body?.code === 'CONFIG_PLAN_STALE') {
            throw new CommandFailed(`the tenant changed since the plan (${text}): nothing was imported; run the import again to see the new plan`);
        }
        throw new CommandFailed(`import refused, nothing was imported: ${text}`, importRes.status === 409 && body?.details ? EXIT.blocked : EXIT.failure);
    }
    const result = (await importRes.json()) as ImportBody;
    say(`Imported in ${((Date.now() - started) / 1000).toFixed(1)} s: operation ${result.operationId}`);
    if (format === 'json') {
        io.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
        return EXIT.ok;
    }
    if (result.generatedSecrets?.length) {
        io.stdout.write(`\nGenerated client secrets (shown once; store them now):\n${pad(result.generatedSecrets.map((s) => [`  ${s.kind}`, s.id, s.secret]))}\n`);
    }
    return EXIT.ok;
};
