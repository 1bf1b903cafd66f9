import { call, currentIdentity } from '../api';
import { button, field, h, replace, table, uid, when } from '../dom';
import { ROLE_NAMES } from '../roles';
import { type PageContext, can, act, section, secretOnce } from './common';

/** Tenants (tenant:manage) and clients: create, rotate the secret (shown once), delete, sign in as a new client. */

export const tenantsPage = async (ctx: PageContext): Promise<void> => {
    const status = h('div', { 'aria-live': 'polite' });
    const parts: HTMLElement[] = [h('h1', {}, 'Tenants and clients'), status];
    if (can(ctx, 'tenant:manage')) {
        const tenants = await call<{ items: any[] }>('GET', '/api/tenants', { query: { pageSize: 100 } });
        const id = h('input', { name: 'tenantId', required: true, autocomplete: 'off', pattern: '[a-z0-9][a-z0-9_-]{1,62}' });
        const name = h('input', { name: 'tenantName', required: true, autocomplete: 'off' });
        parts.push(section('Tenants',
            table('Tenants', ['Id', 'Name', 'Created', ''], tenants.items.map((t) => [t.id, t.name, when(t.createdAt),
                button(`Delete tenant ${t.id}`, () => {
                    if (confirm(`Delete tenant ${t.id} and everything it holds?`)) {
                        void act(status, async () => {
                            await call('DELETE', `/api/tenants/${encodeURIComponent(t.id)}`);
                            ctx.go('#/tenants');
                        });
                    }
                }, { class: 'danger' })])),
            h('form', { class: 'inline', 'aria-label': 'New tenant', novalidate: true, onsubmit: (e: Event) => {
                e.preventDefault();
                void act(status, async () => {
                    await call('POST', '/api/tenants', { body: { id: id.value, name: name.value } });
                    ctx.go('#/tenants');
                    return `Tenant ${id.value} created.`;
                });
            } }, h('h3', {}, 'New tenant'), field('Tenant id', id, 'Lower-case letters, digits, _ and -'), field('Name', name), h('button', { type: 'submit' }, 'Create tenant'))));
    }
    parts.push(await clientsSection(ctx, status));
    replace(ctx.main, ...parts);
};

const clientsSection = async (ctx: PageContext, status: HTMLElement): Promise<HTMLElement> => {
    const me = currentIdentity();
    const manage = can(ctx, 'tenant:manage');
    const filter = h('input', { name: 'clientTenant', autocomplete: 'off', value: sessionFilter.clientTenant });
    const list = h('div');
    const load = async () => {
        sessionFilter.clientTenant = filter.value;
        const clients = await call<{ items: any[] }>('GET', '/api/clients', { query: { pageSize: 100, tenantId: manage ? filter.value || undefined : undefined } });
        replace(list, table('Clients', ['Client id', 'Tenant', 'Roles', ''], clients.items.map((c) => [c.clientId, c.tenantId ?? '(none)', c.roles.join(', '),
            can(ctx, 'tenant:admin', 'tenant:manage') && c.clientId !== me?.clientId
                ? h('span', {},
                    button(`Rotate secret of ${c.clientId}`, () => void act(status, async () => {
                        const { clientSecret } = await call<{ clientSecret: string }>('POST', `/api/clients/${encodeURIComponent(c.clientId)}/rotate-secret`);
                        replace(status, secretOnce(ctx, c.clientId, clientSecret));
                    }), { class: 'secondary' }), ' ',
                    button(`Delete client ${c.clientId}`, () => {
                        if (confirm(`Delete client ${c.clientId}?`)) {
                            void act(status, async () => {
                                await call('DELETE', `/api/clients/${encodeURIComponent(c.clientId)}`);
                                await load();
                            });
                        }
                    }, { class: 'danger' }))
                : ''])));
    };
    await load();
    if (!can(ctx, 'tenant:admin', 'tenant:manage')) {
        return section('Clients', list);
    }
    const clientId = h('input', { name: 'clientId', autocomplete: 'off' });
    const tenantId = h('input', { name: 'clientTenantId', autocomplete: 'off' });
    const roleBoxes = ROLE_NAMES.filter((r) => manage || (r !== 'tenant:manage' && ctx.scopes.has(r))).map((r) => {
        const box = h('input', { type: 'checkbox', id: uid('role'), value: r, name: 'role' });
        return { box, el: h('span', { class: 'check' }, box, h('label', { for: box.id }, r)) };
    });
    const form = h('form', { class: 'inline', novalidate: true, 'aria-label': 'New client', onsubmit: (e: Event) => {
        e.preventDefault();
        void act(status, async () => {
            const roles = roleBoxes.filter((b) => b.box.checked).map((b) => b.box.value);
            const created = await call<{ clientId: string; clientSecret: string }>('POST', '/api/clients', { body: { clientId: clientId.value, roles, ...(manage && tenantId.value ? { tenantId: tenantId.value } : {}) } });
            await load();
            replace(status, secretOnce(ctx, created.clientId, created.clientSecret));
        });
    } },
    h('h3', {}, 'New client'), field('Client id', clientId),
    manage ? field('Tenant', tenantId, 'The tenant the client belongs to; empty for a tenant-less client') : null,
    h('fieldset', {}, h('legend', {}, 'Roles'), roleBoxes.map((b) => b.el)),
    h('button', { type: 'submit' }, 'Create client'));
    return section('Clients',
        manage ? h('form', { class: 'inline', 'aria-label': 'Filter clients', onsubmit: (e: Event) => {
            e.preventDefault();
            void act(status, load);
        } }, field('Clients of tenant', filter, 'Empty: clients without a tenant'), h('button', { type: 'submit' }, 'Show')) : null,
        list, form);
};

/** Filters that survive page changes within the tab (memory only). */
const sessionFilter: Record<string, string> = { clientTenant: '' };
