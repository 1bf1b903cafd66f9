import { ApiError, call } from '../api';
import { button, field, h, notice, pre, replace, table, uid, when } from '../dom';
import { type PageContext, can, errorText, act, section, TERMINAL, liveStatus, MAX_LIST_STREAMS, LIST_REFRESH_MS } from './common';

/** Sessions: every filter of the list and the search box, live status, one session's result and flow log. */

const STATUSES = ['active', 'fetched', 'completed', 'failed', 'expired'];
const filters: Record<string, string | string[]> = { status: [] };

export const sessionsPage = async (ctx: PageContext, id?: string): Promise<void> => {
    if (id) {
        return sessionDetail(ctx, id);
    }
    const input = (name: string, label: string, type = 'text', hint?: string) => {
        const el = h('input', { name, type, autocomplete: 'off', value: (filters[name] as string | undefined) ?? '' });
        return { name, el, node: field(label, el, hint) };
    };
    const q = input('q', 'Search', 'search', 'Session id or its start, wallet nonce, pre-authorized code, reference, or a pasted offer or request link');
    const inputs = [
        input('type', 'Type', 'text', 'issuance or presentation'), input('credentialConfigurationId', 'Credential configuration'), input('requestId', 'Presentation configuration'),
        input('failureCode', 'Failure code'), input('id', 'Id starts with'),
        input('createdFrom', 'Created from', 'datetime-local'), input('createdTo', 'Created to', 'datetime-local'),
        input('updatedFrom', 'Updated from', 'datetime-local'), input('updatedTo', 'Updated to', 'datetime-local')
    ];
    const statusBoxes = STATUSES.map((s) => {
        const box = h('input', { type: 'checkbox', id: uid('st'), value: s, name: 'status', checked: (filters.status as string[]).includes(s) });
        return { box, el: h('span', { class: 'check' }, box, h('label', { for: box.id }, s)) };
    });
    const sortBy = h('select', { name: 'sortBy' }, ['updatedAt', 'createdAt', 'id', 'status', 'requestId'].map((s) => h('option', { value: s, selected: filters.sortBy === s }, s)));
    const sortOrder = h('select', { name: 'sortOrder' }, ['desc', 'asc'].map((s) => h('option', { value: s, selected: filters.sortOrder === s }, s)));
    const results = h('div', { 'aria-live': 'polite' });
    const iso = (local: string) => local ? new Date(local).toISOString() : undefined;
    let page = 1;
    let streams: AbortController | undefined;
    let refresh: ReturnType<typeof setTimeout> | undefined;
    ctx.signal.addEventListener('abort', () => clearTimeout(refresh));
    const load = async () => {
        streams?.abort();
        clearTimeout(refresh);
        if (ctx.signal.aborted) {
            return;
        }
        streams = new AbortController();
        ctx.signal.addEventListener('abort', () => streams?.abort(), { once: true });
        filters.q = q.el.value;
        inputs.forEach((i) => {
            filters[i.name] = i.el.value;
        });
        filters.status = statusBoxes.filter((b) => b.box.checked).map((b) => b.box.value);
        filters.sortBy = sortBy.value;
        filters.sortOrder = sortOrder.value;
        const query: Record<string, string | number | string[] | undefined> = { page, pageSize: 25, q: q.el.value, status: filters.status, sortBy: sortBy.value, sortOrder: sortOrder.value };
        for (const i of inputs) {
            query[i.name] = i.el.type === 'datetime-local' ? iso(i.el.value) : i.el.value;
        }
        try {
            const list = await call<{ items: any[]; total: number; totalPages: number }>('GET', '/api/session', { query });
            const open = list.items.filter((s) => !TERMINAL.includes(s.status));
            const followed = new Set(open.slice(0, MAX_LIST_STREAMS).map((s) => s.id));
            if (open.length > followed.size) {
                refresh = setTimeout(() => void load(), LIST_REFRESH_MS);
            }
            const signal = streams.signal;
            replace(results, table(`Sessions (${list.total})`, ['Id', 'Type', 'Status', 'Configuration', 'Reference', 'Updated'], list.items.map((s) => [
                h('a', { href: `#/sessions/${encodeURIComponent(s.id)}` }, h('code', {}, s.id)), s.type,
                followed.has(s.id) ? liveStatus(signal, s.id, s.status) : h('span', { class: `badge ${s.status}` }, s.status),
                s.requestId ?? (s.credentialConfigurationIds ?? []).join(', '), s.reference ?? '', when(s.updatedAt)])),
            h('nav', { class: 'pager', 'aria-label': 'Pages' },
                page > 1 ? button('Previous page', () => { page--; void load(); }, { class: 'secondary' }) : null,
                ` Page ${page} of ${Math.max(list.totalPages, 1)} `,
                page < list.totalPages ? button('Next page', () => { page++; void load(); }, { class: 'secondary' }) : null));
        }
        catch (err) {
            replace(results, notice('error', errorText(err)));
        }
    };
    replace(ctx.main, h('h1', {}, 'Sessions'),
        h('form', { class: 'filters', role: 'search', novalidate: true, 'aria-label': 'Session filters', onsubmit: (e: Event) => {
            e.preventDefault();
            page = 1;
            void load();
        } }, q.node, h('details', {}, h('summary', {}, 'More filters'), h('div', { class: 'grid' }, inputs.map((i) => i.node),
            h('fieldset', {}, h('legend', {}, 'Status'), statusBoxes.map((b) => b.el)), field('Sort by', sortBy), field('Order', sortOrder))),
        h('button', { type: 'submit' }, 'Search')),
        results);
    await load();
};

const sessionDetail = async (ctx: PageContext, id: string) => {
    const box = h('div');
    const render = async () => {
        const s = await call<Record<string, any>>('GET', `/api/session/${encodeURIComponent(id)}`);
        const logs = await call<any[]>('GET', `/api/session/${encodeURIComponent(id)}/logs`).catch((err: unknown) => err instanceof ApiError ? err : []);
        replace(box,
            h('dl', {}, [['Type', s.type], ['Configuration', s.requestId ?? (s.credentialConfigurationIds ?? []).join(', ')], ['Reference', s.reference],
                ['Created', when(s.createdAt)], ['Updated', when(s.updatedAt)], ['Expires', when(s.expiresAt)], ['Failure', s.failureCode ? `${s.failureCode}: ${s.errorReason ?? ''}` : s.errorReason]]
                .map(([k, v]) => [h('dt', {}, k), h('dd', {}, v || '—')])),
            s.outcome ? section('Outcome',
                h('p', {}, 'Result: ', h('strong', {}, String(s.outcome.result ?? '')), s.outcome.error ? ` (${s.outcome.error}: ${s.outcome.message ?? ''})` : ''),
                Array.isArray(s.outcome.credentials) ? table('Credentials checked', ['Query', 'Format', 'Verified', 'Error'], s.outcome.credentials.map((c: any) => [c.id, c.format ?? '', c.verified ? 'yes' : 'no', c.error ? `${c.error}: ${c.message ?? ''}` : ''])) : null,
                h('details', {}, h('summary', {}, 'Outcome as JSON'), pre(s.outcome))) : null,
            Array.isArray(s.credentials) ? section('Credentials', ...s.credentials.flatMap((c: any, i: number) => (Array.isArray(c.values) ? c.values : [c.claims ?? c]).map((v: unknown, j: number) =>
                table(`Claims of ${c.id ?? `credential ${i + 1}`}${c.values?.length > 1 ? ` (${j + 1})` : ''}`, ['Claim', 'Value'], flatten(v).map(([k, value]) => [h('code', {}, k), value])))),
            h('details', {}, h('summary', {}, 'Credentials as JSON'), pre(s.credentials))) : null,
            s.notifications ? section('Wallet notifications', table('Wallet notifications', ['Time', 'Event', 'Description'], s.notifications.map((n: any) => [when(n.at), n.event ?? '', n.description ?? '']))) : null,
            section('Flow log', logs instanceof ApiError ? notice('error', logs.message)
                : logs.length ? table('Flow log', ['Time', 'Level', 'Stage', 'Message'], logs.map((l) => [when(l.timestamp), l.level, l.stage, l.message]))
                    : h('p', {}, 'No flow log for this session (the service keeps one when LOG_ENABLE_SESSION_LOGGER and LOG_SESSION_STORE are set).')));
    };
    const status = h('div', { 'aria-live': 'polite' });
    const remove = can(ctx, 'issuance:config', 'presentation:config') ? button('Delete session', () => {
        if (confirm(`Delete session ${id}?`)) {
            void act(status, async () => {
                await call('DELETE', `/api/session/${encodeURIComponent(id)}`);
                ctx.go('#/sessions');
            });
        }
    }, { class: 'danger' }) : null;
    replace(ctx.main, h('h1', {}, 'Session ', h('code', {}, id)), h('a', { href: '#/sessions' }, 'Back to sessions'), status,
        h('p', {}, 'Status: ', liveStatus(ctx.signal, id, '…', (status) => {
            if (TERMINAL.includes(status)) {
                void render();
            }
        })), box, remove);
    await render();
};

/** A claims object as [dot path, display value] rows (nested objects and mdoc namespaces flattened). */
const flatten = (value: unknown, prefix = ''): Array<[string, string]> => {
    if (value && typeof value === 'object' && !Array.isArray(value)) {
        return Object.entries(value).flatMap(([k, v]) => flatten(v, prefix ? `${prefix}.${k}` : k));
    }
    return [[prefix || '(value)', typeof value === 'string' ? value : JSON.stringify(value)]];
};
