import { call, currentIdentity } from '../api';
import { button, field, h, notice, replace, table, uid, when } from '../dom';
import { type PageContext, act, section } from './common';

/** Configuration bundles: export, upload, plan review with the secrets it needs, import, recent operations. */

export const bundlesPage = async (ctx: PageContext): Promise<void> => {
    const me = currentIdentity();
    const manage = !me?.tenantId;
    const tenant = h('input', { name: 'bundleTenant', autocomplete: 'off' });
    const tenantQuery = () => manage ? { tenantId: tenant.value || undefined } : {};
    const status = h('div', { 'aria-live': 'polite' });
    const planBox = h('div', { 'aria-live': 'polite' });
    const file = h('input', { type: 'file', name: 'bundle', accept: '.zip,.json,application/zip,application/json' });
    const mode = h('select', { name: 'mode' }, ['upsert', 'create', 'replace'].map((m) => h('option', { value: m }, m)));
    const download = (format: 'json' | 'zip') => () => void act(status, async () => {
        const res = await call<Response>('GET', '/api/config-bundles/export', { query: { format, ...tenantQuery() }, raw: true });
        const blob = await res.blob();
        const name = /filename="([^"]+)"/.exec(res.headers.get('content-disposition') ?? '')?.[1] ?? `bundle.${format}`;
        const a = h('a', { href: URL.createObjectURL(blob), download: name });
        document.body.appendChild(a);
        a.click();
        a.remove();
        return `Downloaded ${name}.`;
    });
    /** A JSON bundle as read from the file, with the values the operator supplied for its placeholders. */
    let jsonBundle: JsonBundle | undefined;
    const isZip = (f: File) => f.name.endsWith('.zip') || f.type === 'application/zip';
    file.addEventListener('change', () => {
        jsonBundle = undefined;
        replace(planBox);
    });
    const send = async (kind: 'plan' | 'import', extra: Record<string, string | boolean | undefined> = {}) => {
        const chosen = file.files?.[0];
        if (!chosen) {
            throw new Error('Choose a bundle file');
        }
        const query = { mode: mode.value, ...tenantQuery(), ...extra };
        if (isZip(chosen)) {
            const form = new FormData();
            form.append('bundle', chosen);
            return call<any>('POST', `/api/config-bundles/${kind}/archive`, { form, query });
        }
        jsonBundle ??= JSON.parse(await chosen.text()) as JsonBundle;
        return call<any>('POST', `/api/config-bundles/${kind}`, { body: jsonBundle, query });
    };
    /** Inputs for the secrets a plan needs (JSON bundles): each value replaces its placeholder, checksums follow. */
    const requirementsForm = (requirements: Array<{ code: string; resource: string; path: string; message: string; placeholder?: string }>) => {
        const rows = requirements.filter((r) => r.placeholder).map((r) => {
            const value = h('input', { type: 'password', autocomplete: 'off', name: `${r.resource}.${r.path}` });
            const generate = r.code === 'CLIENT_SECRET_REQUIRED' ? h('input', { type: 'checkbox', id: uid('gen') }) : undefined;
            return { r, value, generate, el: h('div', {}, field(`${r.resource} ${r.path}`, value, r.message),
                generate ? h('span', { class: 'check' }, generate, h('label', { for: generate.id }, `Generate a new secret for ${r.resource} (shown once)`)) : null) };
        });
        const chosen = file.files?.[0];
        if (!rows.length || !chosen || isZip(chosen)) {
            return h('ul', {}, requirements.map((r) => h('li', {}, `${r.resource} ${r.path}: ${r.message}`)));
        }
        return h('form', { novalidate: true, 'aria-label': 'Values the import needs', onsubmit: (e: Event) => {
            e.preventDefault();
            void act(status, async () => {
                const values = new Map(rows.map(({ r, value, generate }): [string, string] => [r.placeholder!, generate?.checked ? '!generate' : value.value]).filter(([, v]) => v));
                jsonBundle = await withValues(jsonBundle!, values);
                plan();
            });
        } }, rows.map((row) => row.el), h('button', { type: 'submit' }, 'Plan again with these values'));
    };
    const plan = () => void act(status, async () => {
        const p = await send('plan');
        replace(planBox,
            table(`Plan (${p.mode})${p.blocked ? ': blocked' : ''}`, ['Kind', 'Id', 'Action', 'Changes', 'Code'], p.actions.map((a: any) => [a.kind, a.id, h('span', { class: `action ${a.action}` }, a.action),
                (a.changes ?? []).map((c: any) => c.path).join(', '), a.code ?? ''])),
            p.requirements?.length ? section('Needed before import', requirementsForm(p.requirements)) : null,
            p.warnings?.length ? section('Warnings', h('ul', {}, p.warnings.map((w: any) => h('li', {}, `${w.code} ${w.resource}: ${w.message}`)))) : null,
            p.blocked ? notice('error', 'The plan is blocked: nothing can be imported.') : button('Import this plan', () => void act(status, async () => {
                if (mode.value === 'replace' && !confirm('Replace deletes resources this source imported earlier. Go on?')) {
                    return;
                }
                const done = await send('import', { planFingerprint: p.planFingerprint, ...(mode.value === 'replace' ? { confirmReplace: 'true' } : {}) });
                replace(planBox, table('Imported', ['Kind', 'Id', 'Action'], done.actions.map((a: any) => [a.kind, a.id, a.action])),
                    done.generatedSecrets?.length ? section('Generated secrets (shown once)', h('ul', {}, done.generatedSecrets.map((g: any) => h('li', {}, `${g.kind} ${g.id}: `, h('code', {}, g.secret))))) : null);
                return 'Imported.';
            })));
    });
    const operations = await call<{ items?: any[] } | any[]>('GET', '/api/config-bundles/operations', { query: tenantQuery() }).catch(() => []);
    const ops = Array.isArray(operations) ? operations : operations.items ?? [];
    replace(ctx.main, h('h1', {}, 'Configuration bundles'), status,
        manage ? field('Tenant', tenant, 'A client without a tenant names the tenant') : null,
        section('Export', button('Download JSON bundle', download('json')), ' ', button('Download ZIP bundle', download('zip'))),
        section('Import', h('form', { class: 'inline', novalidate: true, 'aria-label': 'Import a bundle', onsubmit: (e: Event) => {
            e.preventDefault();
            plan();
        } }, field('Bundle (ZIP or JSON)', file), field('Mode', mode), h('button', { type: 'submit' }, 'Review plan')), planBox),
        section('Recent operations', table('Operations', ['Time', 'Type', 'Mode', 'Status'], ops.map((o: any) => [when(o.startedAt ?? o.createdAt), o.type ?? o.operation ?? '', o.mode ?? '', o.status ?? '']))));
};

interface JsonBundle {
    manifest: { resources: Array<{ path: string; sha256: string }> } & Record<string, unknown>;
    documents: Array<{ path: string; document: unknown }>;
    assets: unknown[];
}

/** RFC 8785 canonical JSON, as the service checks a JSON bundle document's sha256 (lib/config-import/plan.ts). */
const jcs = (value: unknown): string => {
    if (Array.isArray(value)) {
        return `[${value.map((v) => jcs(v === undefined ? null : v)).join(',')}]`;
    }
    if (value && typeof value === 'object') {
        const entries = Object.entries(value).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
        return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${jcs(v)}`).join(',')}}`;
    }
    return JSON.stringify(value);
};

const sha256Hex = async (text: string) =>
    Array.from(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text))), (b) => b.toString(16).padStart(2, '0')).join('');

/** The bundle with each placeholder string replaced by its value, and the changed documents' checksums updated. */
const withValues = async (bundle: JsonBundle, values: Map<string, string>): Promise<JsonBundle> => {
    const substitute = (node: unknown): unknown => typeof node === 'string'
        ? values.get(node) ?? node
        : Array.isArray(node) ? node.map(substitute) : node && typeof node === 'object' ? Object.fromEntries(Object.entries(node).map(([k, v]) => [k, substitute(v)])) : node;
    const documents = bundle.documents.map((d) => ({ ...d, document: substitute(d.document) }));
    const digests = new Map(await Promise.all(documents.map(async (d) => [d.path, await sha256Hex(jcs(d.document))] as const)));
    const resources = bundle.manifest.resources.map((r) => ({ ...r, sha256: digests.get(r.path) ?? r.sha256 }));
    return { ...bundle, manifest: { ...bundle.manifest, resources }, documents };
};
