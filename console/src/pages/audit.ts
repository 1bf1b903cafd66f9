import { call, currentIdentity } from '../api';
import { field, h, notice, replace, table, when } from '../dom';
import { type PageContext, errorText } from './common';

/** The audit log with its filters. */

export const auditPage = async (ctx: PageContext): Promise<void> => {
    const manage = !currentIdentity()?.tenantId;
    const inputs = {
        tenantId: h('input', { name: 'tenantId', autocomplete: 'off' }),
        kind: h('input', { name: 'kind', autocomplete: 'off' }),
        actor: h('input', { name: 'actor', autocomplete: 'off' }),
        action: h('select', { name: 'action' }, ['', 'create', 'update', 'delete'].map((a) => h('option', { value: a }, a || '(any)')))
    };
    const results = h('div', { 'aria-live': 'polite' });
    const load = async () => {
        try {
            const list = await call<{ items: any[]; total: number }>('GET', '/api/admin/audit-logs', { query: {
                pageSize: 50, kind: inputs.kind.value, actor: inputs.actor.value, action: inputs.action.value, tenantId: manage ? inputs.tenantId.value : undefined
            } });
            replace(results, table(`Audit log (${list.total})`, ['Time', 'Actor', 'Action', 'Kind', 'Resource', 'Changed fields'], list.items.map((e) => [
                when(e.createdAt), e.actor, e.action, e.kind, e.resourceId ?? '', (e.changes ?? []).map((c: any) => c.path).join(', ')])));
        }
        catch (err) {
            replace(results, notice('error', errorText(err)));
        }
    };
    replace(ctx.main, h('h1', {}, 'Audit log'),
        h('form', { class: 'inline', novalidate: true, 'aria-label': 'Audit filters', onsubmit: (e: Event) => {
            e.preventDefault();
            void load();
        } }, manage ? field('Tenant', inputs.tenantId, 'Empty: entries of no tenant') : null, field('Kind', inputs.kind), field('Actor (client id)', inputs.actor), field('Action', inputs.action),
        h('button', { type: 'submit' }, 'Show')), results);
    await load();
};
