import Crypto from 'node:crypto';
import Fs from 'node:fs';
import { jcs, sha256Hex } from '../lib/config-import/plan';
import { cpuMs, post, ROOT, startService, type BenchService } from './service';
import { printTable } from './table';

/** Resources of the exported tenant: one key chain, then credential configurations and webhook endpoints. */
const RESOURCES = Number(process.env.HALLMARK_BENCH_BUNDLE_RESOURCES ?? 1000);
const ROUNDS = 3;
const MiB = 1024 * 1024;

interface Bundle {
    manifest: { resources: Array<{ kind: string; id: string; path: string; sha256: string }> };
    documents: Array<{ path: string; document: { spec: Record<string, any> } }>;
}

const call = async (service: BenchService, method: string, path: string, token: string, body?: unknown) => {
    // FormData sets its own multipart content type.
    const form = body instanceof FormData;
    const res = await fetch(`${service.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body !== undefined && !form ? { 'content-type': 'application/json' } : {}) },
        ...(body !== undefined ? { body: form ? body : JSON.stringify(body) } : {})
    });
    const text = await res.text();
    if (res.status >= 300) {
        throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`);
    }
    return text;
};

/** Wall time, service CPU time and the service's RSS growth of one call. */
const measure = async (service: BenchService, action: () => Promise<unknown>) => {
    const cpu = cpuMs(service.pid);
    const started = process.hrtime.bigint();
    await action();
    return { ms: Number(process.hrtime.bigint() - started) / 1e6, cpu: cpuMs(service.pid) - cpu };
};

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const rssKiB = (pid: number): number => {
    const status = Fs.readFileSync(`/proc/${pid}/status`, 'utf8') as string;
    return Number(/VmRSS:\s+(\d+)/.exec(status)![1]);
};

/** The export made importable into another tenant: new key material for the key chain (spec 2.9 `regenerate`). */
const importable = (exported: Bundle): Bundle => {
    const bundle = structuredClone(exported);
    // Client ids are global: the source tenant's admin client stays out of the copies.
    bundle.documents = bundle.documents.filter((d) => !d.path.startsWith('clients/'));
    for (const { document } of bundle.documents) {
        if (document.spec.keySource) {
            document.spec.keySource = { type: 'regenerate' };
        }
    }
    const byPath = new Map(bundle.documents.map((d) => [d.path, d.document]));
    bundle.manifest.resources = bundle.manifest.resources.filter((r) => byPath.has(r.path)).map((r) => ({ ...r, sha256: sha256Hex(jcs(byPath.get(r.path))) }));
    return bundle;
};

/**
 * Export, plan and import of a tenant with 1,000 resources on one service process (SQLite), and the service's RSS
 * while it reads a 50 MiB ZIP (issue #14: export and import each under 2 s, plan under 1 s, memory flat).
 */
export const benchBundles = async (): Promise<void> => {
    const service = await startService(3931);
    try {
        const root = (await post(`${service.url}/api/oauth2/token`, { grant_type: 'client_credentials', client_id: ROOT.id, client_secret: ROOT.secret })).body.access_token as string;
        await post(`${service.url}/api/tenants`, { id: 'src', name: 'Source' }, { authorization: `Bearer ${root}` });
        const created = await post(`${service.url}/api/clients`, { clientId: 'src-admin', roles: ['tenant:admin'], tenantId: 'src' }, { authorization: `Bearer ${root}` });
        const admin = (await post(`${service.url}/api/oauth2/token`, { grant_type: 'client_credentials', client_id: 'src-admin', client_secret: created.body.clientSecret })).body.access_token as string;
        await call(service, 'POST', '/api/key-chain', admin, { id: 'issuer', usageType: 'attestation' });
        const configs = Math.floor((RESOURCES - 1) * 0.6);
        for (let i = 0; i < RESOURCES - 1; i++) {
            if (i < configs) {
                await call(service, 'POST', '/api/issuer/credentials', admin, {
                    id: `cred-${i}`,
                    config: { format: 'dc+sd-jwt', scope: `cred-${i}`, display: [{ locale: 'en', name: `Credential ${i}` }] },
                    vct: `urn:bench:credential:${i}`,
                    keyChainId: 'issuer',
                    fields: [
                        { path: ['given_name'], type: 'string', mandatory: true, disclosable: true },
                        { path: ['family_name'], type: 'string', disclosable: true },
                        { path: ['birthdate'], type: 'string', disclosable: true }
                    ]
                });
            }
            else {
                await call(service, 'POST', '/api/issuer/webhook-endpoints', admin, { id: `hook-${i}`, name: `Hook ${i}`, url: `https://hooks.example.com/${i}`, auth: { type: 'none' } });
            }
        }

        process.stdout.write(`bundles: ${RESOURCES} resources created\n`);
        const rows: Array<Record<string, string | number>> = [];
        const row = (operation: string, target: string, samples: Array<{ ms: number; cpu: number }>) =>
            rows.push({ operation, resources: RESOURCES, 'wall ms (median)': median(samples.map((s) => s.ms)).toFixed(0), 'service CPU ms': median(samples.map((s) => s.cpu)).toFixed(0), target });

        let exported!: Bundle;
        const jsonExports = [];
        const zipExports = [];
        let zip!: Buffer;
        for (let round = 0; round < ROUNDS; round++) {
            jsonExports.push(await measure(service, async () => {
                exported = JSON.parse(await call(service, 'GET', '/api/config-bundles/export?tenantId=src&format=json', root));
            }));
            zipExports.push(await measure(service, async () => {
                zip = Buffer.from(await (await fetch(`${service.url}/api/config-bundles/export?tenantId=src&format=zip`, { headers: { authorization: `Bearer ${root}` } })).arrayBuffer());
            }));
        }
        if (exported.manifest.resources.length < RESOURCES) {
            throw new Error(`the export holds ${exported.manifest.resources.length} resources, not ${RESOURCES}`);
        }
        process.stdout.write(`bundles: exported ${ROUNDS} times\n`);
        row('export JSON', '< 2,000', jsonExports);
        row('export ZIP', '< 2,000', zipExports);

        const bundle = importable(exported);
        const plans = [];
        const imports = [];
        for (let round = 0; round < ROUNDS; round++) {
            const tenant = `dst${round}`;
            await post(`${service.url}/api/tenants`, { id: tenant, name: tenant }, { authorization: `Bearer ${root}` });
            let fingerprint = '';
            plans.push(await measure(service, async () => {
                fingerprint = JSON.parse(await call(service, 'POST', `/api/config-bundles/plan?tenantId=${tenant}&mode=create`, root, bundle)).planFingerprint;
            }));
            imports.push(await measure(service, () => call(service, 'POST', `/api/config-bundles/import?tenantId=${tenant}&mode=create&planFingerprint=${fingerprint}`, root, bundle)));
            process.stdout.write(`bundles: round ${round + 1}: plan ${plans.at(-1)!.ms.toFixed(0)} ms, import ${imports.at(-1)!.ms.toFixed(0)} ms\n`);
        }
        row('plan (create, JSON)', '< 1,000', plans);
        row('import (create, JSON)', '< 2,000', imports);
        printTable(`Configuration bundles, ${RESOURCES} resources, one service process on SQLite (${ROUNDS} rounds)`, rows);

        // A 50 MiB ZIP: the export plus an incompressible image asset. The service holds the upload (hapi reads the
        // payload) and must not hold the expanded archive on top of it.
        const big = await bigArchive(service, root, zip);
        const before = rssKiB(service.pid);
        let peak = before;
        const sampler = setInterval(() => {
            peak = Math.max(peak, rssKiB(service.pid));
        }, 5);
        const form = new FormData();
        form.append('bundle', new Blob([big]), 'bundle.zip');
        let planned;
        try {
            planned = await measure(service, () => call(service, 'POST', '/api/config-bundles/plan/archive?tenantId=dst0&mode=upsert', root, form));
        }
        finally {
            clearInterval(sampler);
        }
        printTable('Service memory while it plans a 50 MiB ZIP', [{
            'archive MiB': (big.length / MiB).toFixed(1),
            'RSS before MiB': (before / 1024).toFixed(0),
            'RSS peak MiB': (peak / 1024).toFixed(0),
            'growth MiB': ((peak - before) / 1024).toFixed(0),
            'wall ms': planned.ms.toFixed(0),
            'service CPU ms': planned.cpu.toFixed(0)
        }]);
    }
    finally {
        await service.stop();
    }
};

/** The exported ZIP with an incompressible image listed in its manifest, grown to just under 50 MiB. */
const bigArchive = async (service: BenchService, root: string, zip: Buffer): Promise<Buffer> => {
    const json = JSON.parse(await call(service, 'GET', '/api/config-bundles/export?tenantId=src&format=json', root)) as Bundle & { assets: unknown[] };
    const image = Crypto.randomBytes(Number(process.env.HALLMARK_BENCH_BUNDLE_ZIP_MIB ?? 50) * MiB - zip.length - 64 * 1024);
    const Yazl = await import('yazl');
    const archive = new Yazl.ZipFile();
    const manifest = { ...json.manifest, assets: [{ path: 'images/large.png', contentType: 'image/png', sha256: sha256Hex(image) }] };
    for (const { path, document } of json.documents) {
        // A document's checksum is that of its RFC 8785 form, so those bytes are the file.
        archive.addBuffer(Buffer.from(jcs(document)), path);
    }
    archive.addBuffer(image, 'images/large.png', { compress: false });
    archive.addBuffer(Buffer.from(JSON.stringify(manifest)), 'manifest.json');
    archive.end();
    const chunks: Buffer[] = [];
    for await (const chunk of archive.outputStream) {
        chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks);
};
