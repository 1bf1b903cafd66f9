import { currentIdentity, onSignOut, signIn, signOut, type AuthSettings } from './api';
import { field, h, notice, replace } from './dom';
import { auditPage, bundlesPage, keysPage, KIND_PAGES, kindPage, offersPage, sessionsPage, statusPage, tenantsPage, type PageContext } from './pages/index';
import { anyOf, effectiveRoles } from './roles';

interface Settings {
    auth: AuthSettings;
    kinds: PageContext['kinds'];
}

interface Route {
    hash: string;
    label: string;
    /** Any of these roles shows the page (the API decides what each call may do). */
    roles: string[];
    render(ctx: PageContext, id?: string): Promise<void>;
}

const SESSION_ROLES = ['issuance:offer', 'issuance:config', 'presentation:request', 'presentation:config', 'tenant:read'];

const ROUTES: Route[] = [
    { hash: 'tenants', label: 'Tenants and clients', roles: ['tenant:manage', 'tenant:admin', 'tenant:read'], render: tenantsPage },
    { hash: 'keys', label: 'Key chains', roles: ['key:manage', 'key:read', 'tenant:read'], render: keysPage },
    ...KIND_PAGES.map((p): Route => ({ hash: `config/${p.kind}`, label: p.title, roles: [...p.write, 'tenant:read'], render: kindPage(p) })),
    { hash: 'offers', label: 'Offers', roles: ['issuance:offer', 'presentation:request'], render: offersPage },
    { hash: 'sessions', label: 'Sessions', roles: SESSION_ROLES, render: sessionsPage },
    { hash: 'status', label: 'Status entries', roles: ['issuance:offer', 'issuance:config'], render: statusPage },
    { hash: 'bundles', label: 'Bundles', roles: ['tenant:admin', 'tenant:manage'], render: bundlesPage },
    { hash: 'audit', label: 'Audit log', roles: ['tenant:admin', 'tenant:read', 'tenant:manage'], render: auditPage }
];

const app = document.getElementById('app')!;
let settings: Settings;
let leave: AbortController | undefined;

const visibleRoutes = (scopes: Set<string>): Route[] =>
    // An opaque token of an external provider names no roles: show everything and let the API answer.
    scopes.size ? ROUTES.filter((r) => anyOf(scopes, r.roles)) : ROUTES;

const signInPage = (message?: string) => {
    leave?.abort();
    const clientId = h('input', { name: 'clientId', autocomplete: 'username', required: true });
    const secret = h('input', { name: 'clientSecret', type: 'password', autocomplete: 'current-password', required: true });
    const status = h('div', { 'aria-live': 'polite' }, message ? notice('error', message) : null);
    const submit = async (event: Event) => {
        event.preventDefault();
        replace(status, notice('ok', 'Signing in…'));
        try {
            await signIn(settings.auth, clientId.value.trim(), secret.value);
            secret.value = '';
            shell();
        }
        catch (err) {
            replace(status, notice('error', `Sign-in failed: ${err instanceof Error ? err.message : String(err)}`));
            secret.focus();
        }
    };
    replace(app, h('main', { id: 'main', class: 'signin' },
        h('h1', {}, 'Hallmark console'),
        h('form', { onsubmit: submit, 'aria-label': 'Sign in' },
            h('p', {}, settings.auth.mode === 'external'
                ? `Sign in with a client of the identity provider (${settings.auth.issuer}).`
                : 'Sign in with a management client id and secret (client credentials).'),
            field('Client id', clientId), field('Client secret', secret),
            h('button', { type: 'submit' }, 'Sign in'), status),
        h('p', { class: 'small' }, 'The token is kept in this tab\'s memory only: reloading the page signs out.')));
    clientId.focus();
};

const shell = () => {
    const identity = currentIdentity()!;
    const scopes = effectiveRoles(identity.roles);
    const routes = visibleRoutes(scopes);
    const main = h('main', { id: 'main', tabindex: -1 });
    const nav = h('nav', { 'aria-label': 'Pages' }, h('ul', {}, routes.map((r) => h('li', {}, h('a', { href: `#/${r.hash}`, 'data-route': r.hash }, r.label)))));
    replace(app,
        h('a', { href: '#main', class: 'skip', onclick: (e: Event) => {
            e.preventDefault();
            main.focus();
        } }, 'Skip to content'),
        h('header', {},
            h('span', { class: 'brand' }, 'Hallmark console'),
            h('span', { class: 'who' }, `${identity.clientId}${identity.tenantId ? ` · tenant ${identity.tenantId}` : ''} · ${identity.roles.join(', ') || 'roles from the provider'}`),
            h('button', { type: 'button', class: 'secondary', onclick: () => signOut() }, 'Sign out')),
        h('div', { class: 'layout' }, nav, main));
    const render = async () => {
        leave?.abort();
        leave = new AbortController();
        const hash = location.hash.replace(/^#\/?/, '');
        const route = [...routes].sort((a, b) => b.hash.length - a.hash.length).find((r) => hash === r.hash || hash.startsWith(`${r.hash}/`));
        if (!route) {
            location.replace(`#/${routes[0]?.hash ?? ''}`);
            if (!routes.length) {
                replace(main, h('h1', {}, 'Nothing to show'), h('p', {}, 'This client\'s roles allow none of the console\'s pages.'));
            }
            return;
        }
        const rest = hash.slice(route.hash.length + 1);
        nav.querySelectorAll('a').forEach((a) => a.getAttribute('data-route') === route.hash ? a.setAttribute('aria-current', 'page') : a.removeAttribute('aria-current'));
        document.title = `${route.label} · Hallmark console`;
        replace(main, h('p', {}, 'Loading…'));
        const ctx: PageContext = {
            main, kinds: settings.kinds, scopes, signal: leave.signal,
            go: (target) => target === location.hash ? void render() : void (location.hash = target),
            signInAs: async (id, secret) => {
                try {
                    await signIn(settings.auth, id, secret);
                    location.hash = '';
                    shell();
                }
                catch (err) {
                    replace(main, notice('error', `Sign-in as ${id} failed: ${err instanceof Error ? err.message : String(err)}`));
                }
            }
        };
        try {
            await route.render(ctx, hash.startsWith(`${route.hash}/`) ? decodeURIComponent(rest) : undefined);
        }
        catch (err) {
            replace(main, h('h1', {}, route.label), notice('error', err instanceof Error ? err.message : String(err)));
        }
    };
    window.onhashchange = () => void render();
    void render();
};

const start = async () => {
    const res = await fetch('/console/config.json');
    settings = await res.json() as Settings;
    onSignOut(() => {
        window.onhashchange = null;
        signInPage();
    });
    signInPage();
};

void start();
