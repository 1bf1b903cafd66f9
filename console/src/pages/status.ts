import { call, currentIdentity } from '../api';
import { button, field, h, replace } from '../dom';
import { type PageContext, act, section } from './common';

/** Status list entries: suspend, reinstate or revoke one entry, or every credential of an issuance session. */

export const statusPage = async (ctx: PageContext): Promise<void> => {
    const me = currentIdentity();
    const lists = await call<{ items: any[] }>('GET', '/api/status-lists', { query: { pageSize: 100 } }).catch(() => ({ items: [] as any[] }));
    const status = h('div', { 'aria-live': 'polite' });
    const list = h('select', { name: 'listId' }, lists.items.map((l) => h('option', { value: l.id }, `${l.id} (${l.bits} bit)`)));
    const index = h('input', { type: 'number', min: 0, name: 'index' });
    const set = (action: 'suspend' | 'reinstate' | 'revoke') => () => void act(status, async () => {
        const chosen = lists.items.find((l) => l.id === list.value);
        if (!chosen) {
            throw new Error('Choose a list');
        }
        if (action === 'suspend' && chosen.bits < 2) {
            throw new Error('A 1-bit list has no suspended state');
        }
        const value = action === 'reinstate' ? 0 : action === 'suspend' ? 1 : chosen.bits === 1 ? 1 : 2;
        const answer = await call<{ value: number }>('PATCH', `/issuers/${encodeURIComponent(me?.tenantId ?? '')}/status-management/status-list/${encodeURIComponent(chosen.id)}/entry/${Number(index.value)}`, { body: { value } });
        return `Entry ${index.value} of ${chosen.id} is now ${answer.value}.`;
    });
    const session = h('input', { name: 'sessionId', autocomplete: 'off' });
    const sessionValue = h('select', { name: 'sessionStatus' }, h('option', { value: '' }, 'revoked'), h('option', { value: '1' }, '1: suspended (on a 1-bit list: revoked)'), h('option', { value: '0' }, 'valid (reinstate)'));
    replace(ctx.main, h('h1', {}, 'Status entries'), status,
        section('One entry', h('form', { class: 'inline', novalidate: true, 'aria-label': 'Status entry', onsubmit: (e: Event) => e.preventDefault() },
            field('Status list', list), field('Index', index, 'The idx a credential carries in status.status_list'),
            button('Suspend', set('suspend'), { class: 'secondary' }), ' ', button('Reinstate', set('reinstate'), { class: 'secondary' }), ' ', button('Revoke', set('revoke'), { class: 'danger' }))),
        section('Every credential of an issuance session', h('form', { class: 'inline', novalidate: true, 'aria-label': 'Session credentials status', onsubmit: (e: Event) => {
            e.preventDefault();
            void act(status, async () => {
                const answer = await call<{ updated: number }>('POST', '/api/session/revoke', { body: { sessionId: session.value, ...(sessionValue.value ? { status: Number(sessionValue.value) } : {}) } });
                return `${answer.updated} entries changed.`;
            });
        } }, field('Session id', session), field('New status', sessionValue), h('button', { type: 'submit' }, 'Apply'))));
};
