import { call } from '../api';
import { button, field, h, pre, replace, table, when } from '../dom';
import { documentSchema, editor } from '../editor';
import { type PageContext, can, act, section } from './common';

/** The configuration kinds: list, create and edit through the form generated from each kind's JSON Schema. */

export interface KindPage {
    kind: string;
    title: string;
    path: string;
    write: string[];
    singleton?: boolean;
    /** No PATCH: create and delete only. */
    immutable?: boolean;
}

export const KIND_PAGES: KindPage[] = [
    { kind: 'CredentialConfig', title: 'Credential configurations', path: '/api/issuer/credentials', write: ['issuance:config'] },
    { kind: 'PresentationConfig', title: 'Presentation configurations', path: '/api/verifier/config', write: ['presentation:config'] },
    { kind: 'TrustList', title: 'Trust lists', path: '/api/trust-lists', write: ['presentation:config'] },
    { kind: 'WebhookEndpoint', title: 'Webhook endpoints', path: '/api/issuer/webhook-endpoints', write: ['issuance:config', 'presentation:config'] },
    { kind: 'AttributeProvider', title: 'Attribute providers', path: '/api/issuer/attribute-providers', write: ['issuance:config'] },
    { kind: 'IssuanceConfig', title: 'Issuance settings', path: '/api/issuer/config', write: ['issuance:config'], singleton: true },
    { kind: 'StatusList', title: 'Status lists', path: '/api/status-lists', write: ['issuance:config'], immutable: true }
];

export const specSchema = async (ctx: PageContext, kind: string) => {
    const info = ctx.kinds.find((k) => k.kind === kind);
    if (!info) {
        throw new Error(`The service serves no ${kind} kind`);
    }
    const root = await documentSchema(info.file, info.version);
    return { root, spec: (root.properties?.spec ?? {}) as Record<string, any> };
};

const withoutTimestamps = (value: Record<string, unknown>) => {
    const { createdAt: _c, updatedAt: _u, ...rest } = value;
    return rest;
};

export const kindPage = (page: KindPage) => async (ctx: PageContext, id?: string): Promise<void> => {
    const { root, spec } = await specSchema(ctx, page.kind);
    const writable = can(ctx, ...page.write);
    const status = h('div', { 'aria-live': 'polite' });
    if (page.singleton) {
        const current = await call<Record<string, unknown>>('GET', page.path);
        replace(ctx.main, h('h1', {}, page.title), status,
            writable ? editor({ title: page.title, schema: spec, root, submitLabel: 'Save', initial: current, submit: async (value) => {
                await call('PUT', page.path, { body: value });
            } }).el : pre(current),
            page.kind === 'IssuanceConfig' ? await sessionConfigSection(ctx) : null);
        return;
    }
    if (id !== undefined) {
        const existing = id ? await call<Record<string, unknown>>('GET', `${page.path}/${encodeURIComponent(id)}`) : undefined;
        const title = existing ? `${page.title}: ${id}` : `New ${page.title.replace(/s$/, '').toLowerCase()}`;
        const back = h('a', { href: `#/config/${page.kind}` }, `Back to ${page.title.toLowerCase()}`);
        if (existing && (page.immutable || !writable)) {
            replace(ctx.main, h('h1', {}, title), back, pre(existing));
            return;
        }
        const ed = editor({
            title, schema: spec, root, submitLabel: existing ? 'Save' : 'Create',
            initial: existing ? withoutTimestamps(existing) : undefined,
            submit: async (value) => {
                if (existing) {
                    const { id: _id, ...patch } = value as Record<string, unknown>;
                    await call('PATCH', `${page.path}/${encodeURIComponent(id)}`, { body: patch });
                    return 'Saved.';
                }
                const created = await call<Record<string, unknown>>('POST', page.path, { body: value });
                ctx.go(`#/config/${page.kind}/${encodeURIComponent(String(created.id))}`);
                return 'Created.';
            }
        });
        replace(ctx.main, h('h1', {}, title), back, status, ed.el);
        return;
    }
    const list = await call<{ items: Array<Record<string, any>>; total: number }>('GET', page.path, { query: { pageSize: 100 } });
    const columns = page.kind === 'StatusList' ? ['Id', 'Bits', 'Used / capacity', 'Created', ''] : ['Id', 'Description', 'Updated', ''];
    replace(ctx.main, h('h1', {}, page.title), status,
        writable ? h('p', {}, h('a', { href: `#/config/${page.kind}/`, class: 'button' }, `New ${page.title.replace(/s$/, '').toLowerCase()}`)) : null,
        table(page.title, columns, list.items.map((item) => [
            h('a', { href: `#/config/${page.kind}/${encodeURIComponent(item.id)}` }, item.id),
            ...(page.kind === 'StatusList' ? [String(item.bits), `${item.used} / ${item.capacity}`, when(item.createdAt)] : [item.description ?? '', when(item.updatedAt)]),
            writable ? button(`Delete ${item.id}`, () => {
                if (confirm(`Delete ${item.id}?`)) {
                    void act(status, async () => {
                        await call('DELETE', `${page.path}/${encodeURIComponent(item.id)}`);
                        ctx.go(`#/config/${page.kind}`);
                    });
                }
            }, { class: 'danger' }) : ''
        ])),
        page.kind === 'StatusList' ? await statusListDefaults(ctx) : null);
};

const sessionConfigSection = async (ctx: PageContext) => {
    if (!can(ctx, 'issuance:config', 'presentation:config')) {
        return null;
    }
    const status = h('div', { 'aria-live': 'polite' });
    const ttl = h('input', { type: 'number', min: 60, name: 'ttlSeconds' });
    const mode = h('select', { name: 'cleanupMode' }, h('option', { value: 'full' }, 'full (delete)'), h('option', { value: 'anonymize' }, 'anonymize'));
    return section('Session retention',
        h('form', { class: 'inline', novalidate: true, 'aria-label': 'Session retention', onsubmit: (e: Event) => {
            e.preventDefault();
            void act(status, async () => {
                await call('PUT', '/api/session-config', { body: { ttlSeconds: Number(ttl.value), cleanupMode: mode.value } });
                return 'Saved.';
            });
        } }, field('Keep sessions (seconds)', ttl, 'At least 60'), field('Then', mode), h('button', { type: 'submit' }, 'Save retention'),
        button('Restore defaults', () => void act(status, async () => {
            await call('DELETE', '/api/session-config');
            return 'Defaults restored.';
        }), { class: 'secondary' })), status);
};

const statusListDefaults = async (ctx: PageContext) => {
    const current = await call<Record<string, unknown>>('GET', '/api/status-list-config');
    const status = h('div', { 'aria-live': 'polite' });
    const json = h('textarea', { class: 'code', rows: 6, spellcheck: 'false' });
    json.value = JSON.stringify(current, null, 2);
    return section('Defaults for new lists', can(ctx, 'issuance:config')
        ? h('form', { novalidate: true, 'aria-label': 'Status list defaults', onsubmit: (e: Event) => {
            e.preventDefault();
            void act(status, async () => {
                await call('PUT', '/api/status-list-config', { body: JSON.parse(json.value) });
                return 'Saved.';
            });
        } }, field('bits, capacity, ttlSeconds, immediateUpdate (JSON)', json), h('button', { type: 'submit' }, 'Save defaults'), status)
        : pre(current));
};
