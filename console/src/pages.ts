import { ApiError, call, currentIdentity, events, url } from './api';
import { button, field, h, notice, pre, replace, table, uid, when } from './dom';
import { documentSchema, editor } from './editor';
import { qrCode } from './qr';
import { ROLE_NAMES } from './roles';

/** What a page gets: where to draw, the kinds the service serves (file and version of each), and a way to navigate. */
export interface PageContext {
    main: HTMLElement;
    kinds: Array<{ kind: string; file: string; version: number }>;
    scopes: Set<string>;
    /** Aborted when the page is left: event streams and timers stop with it. */
    signal: AbortSignal;
    go(hash: string): void;
    /** Signs in with another client (the one just created). */
    signInAs(clientId: string, secret: string): Promise<void>;
}

const can = (ctx: PageContext, ...roles: string[]) => roles.some((r) => ctx.scopes.has(r));

const errorText = (err: unknown) => err instanceof Error ? err.message : String(err);

/** Runs an action, showing its outcome in `status`; answers whether it succeeded. */
const act = async (status: HTMLElement, action: () => Promise<string | void>): Promise<boolean> => {
    replace(status);
    try {
        const message = await action();
        // An action that drew its own outcome into `status` (a secret shown once) answers nothing.
        if (message) {
            replace(status, notice('ok', message));
        }
        return true;
    }
    catch (err) {
        replace(status, notice('error', errorText(err)));
        return false;
    }
};

const section = (title: string, ...children: Array<Node | string | null>) => h('section', { 'aria-label': title }, h('h2', {}, title), ...children);

const copyButton = (text: string, label = 'Copy') => {
    const b = button(label, async () => {
        try {
            await navigator.clipboard.writeText(text);
            b.textContent = 'Copied';
        }
        catch {
            // Clipboard refused (no permission): select the text for a manual copy instead.
            b.textContent = 'Copy refused: select the text';
        }
        setTimeout(() => {
            b.textContent = label;
        }, 2000);
    }, { class: 'secondary' });
    return b;
};

/** A secret shown once, with a copy button, and an offer to sign in with it. */
const secretOnce = (ctx: PageContext, clientId: string, secret: string) => h('div', { class: 'secret', role: 'status' },
    h('p', {}, `Secret of ${clientId}, shown once: store it now.`),
    h('code', { class: 'selectable' }, secret), ' ', copyButton(secret, 'Copy secret'), ' ',
    button(`Sign in as ${clientId}`, () => void ctx.signInAs(clientId, secret), { class: 'secondary' }));

// ---------------------------------------------------------------------------------------------------------------- tenants

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

// ------------------------------------------------------------------------------------------------ configuration kinds

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

const specSchema = async (ctx: PageContext, kind: string) => {
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

// ---------------------------------------------------------------------------------------------------------- key chains

export const keysPage = async (ctx: PageContext, id?: string): Promise<void> => {
    const status = h('div', { 'aria-live': 'polite' });
    const writable = can(ctx, 'key:manage');
    if (id) {
        const chain = await call<Record<string, any>>('GET', `/api/key-chain/${encodeURIComponent(id)}`);
        const certs: string[] = [...chain.certificateChain ?? [], ...chain.rootCertificate ? [chain.rootCertificate] : []];
        replace(ctx.main, h('h1', {}, `Key chain ${id}`), h('a', { href: '#/keys' }, 'Back to key chains'), status,
            h('dl', {}, [['Usage', chain.usageType], ['Type', chain.type ?? ''], ['KMS provider', chain.kmsProvider], ['Created', when(chain.createdAt)], ['Rotated', when(chain.rotatedAt)]]
                .map(([k, v]) => [h('dt', {}, k), h('dd', {}, v || '—')])),
            section('Certificates', ...certs.map((pem, i) => certificateDetails(pem, i === chain.certificateChain.length ? 'Root CA' : i === 0 ? 'Leaf' : `Intermediate ${i}`))),
            section('Public key', pre(chain.publicJwk)),
            writable ? button('Rotate key', () => {
                if (confirm(`Rotate the key of ${id}?`)) {
                    void act(status, async () => {
                        await call('POST', `/api/key-chain/${encodeURIComponent(id)}/rotate`);
                        ctx.go(`#/keys/${encodeURIComponent(id)}`);
                        return 'Rotated.';
                    });
                }
            }) : null);
        return;
    }
    const list = await call<{ items: any[] }>('GET', '/api/key-chain', { query: { pageSize: 100 } });
    const parts: Array<HTMLElement | null> = [h('h1', {}, 'Key chains'), status,
        table('Key chains', ['Id', 'Usage', 'KMS provider', 'Created', ''], list.items.map((k) => [
            h('a', { href: `#/keys/${encodeURIComponent(k.id)}` }, k.id), k.usageType, k.kmsProvider, when(k.createdAt),
            writable ? button(`Delete ${k.id}`, () => {
                if (confirm(`Delete key chain ${k.id}?`)) {
                    void act(status, async () => {
                        await call('DELETE', `/api/key-chain/${encodeURIComponent(k.id)}`);
                        ctx.go('#/keys');
                    });
                }
            }, { class: 'danger' }) : '']))];
    if (writable) {
        const { root, spec } = await specSchema(ctx, 'KeyChain');
        parts.push(section('New key chain', editor({ title: 'New key chain', schema: spec, root, submitLabel: 'Create key chain', submit: async (value) => {
            await call('POST', '/api/key-chain', { body: value });
            ctx.go('#/keys');
        } }).el));
        const json = h('textarea', { class: 'code', rows: 8, spellcheck: 'false' });
        json.value = JSON.stringify({ id: '', usageType: 'attestation', privateJwk: {}, certificateChain: ['-----BEGIN CERTIFICATE-----…'] }, null, 2);
        const importStatus = h('div', { 'aria-live': 'polite' });
        parts.push(section('Import a key chain', h('form', { novalidate: true, 'aria-label': 'Import a key chain', onsubmit: (e: Event) => {
            e.preventDefault();
            void act(importStatus, async () => {
                await call('POST', '/api/key-chain/import', { body: JSON.parse(json.value) });
                ctx.go('#/keys');
            });
        } }, field('Key chain with its private JWK and PEM certificates (JSON)', json), h('button', { type: 'submit' }, 'Import'), importStatus)));
    }
    replace(ctx.main, ...parts);
};

/** Subject, issuer and validity of a PEM certificate, read with a minimal DER walk (no library needed for display). */
const certificateDetails = (pem: string, role: string): HTMLElement => {
    const info = readCertificate(pem);
    return h('details', {}, h('summary', {}, `${role}: ${info?.subject ?? 'certificate'}`),
        info ? h('dl', {}, [['Subject', info.subject], ['Issuer', info.issuer], ['Valid from', info.notBefore], ['Valid until', info.notAfter], ['Serial', info.serial]].map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])) : null,
        h('pre', { class: 'pem' }, pem));
};

interface Tlv { tag: number; start: number; end: number; body: number }

const tlv = (der: Uint8Array, at: number): Tlv => {
    const tag = der[at]!;
    let length = der[at + 1]!;
    let body = at + 2;
    if (length & 0x80) {
        const n = length & 0x7f;
        length = 0;
        for (let i = 0; i < n; i++) {
            length = length * 256 + der[body + i]!;
        }
        body += n;
    }
    return { tag, start: at, body, end: body + length };
};

const children = (der: Uint8Array, parent: Tlv): Tlv[] => {
    const out: Tlv[] = [];
    for (let at = parent.body; at < parent.end;) {
        const child = tlv(der, at);
        out.push(child);
        at = child.end;
    }
    return out;
};

const NAMES: Record<string, string> = { '2.5.4.3': 'CN', '2.5.4.10': 'O', '2.5.4.11': 'OU', '2.5.4.6': 'C', '2.5.4.7': 'L', '2.5.4.8': 'ST' };

const oid = (bytes: Uint8Array): string => {
    const parts = [Math.floor(bytes[0]! / 40), bytes[0]! % 40];
    let value = 0;
    for (const b of bytes.subarray(1)) {
        value = value * 128 + (b & 0x7f);
        if (!(b & 0x80)) {
            parts.push(value);
            value = 0;
        }
    }
    return parts.join('.');
};

const readCertificate = (pem: string) => {
    try {
        const der = Uint8Array.from(atob(pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, '')), (c) => c.charCodeAt(0));
        const text = (t: Tlv) => new TextDecoder().decode(der.subarray(t.body, t.end));
        const name = (t: Tlv) => children(der, t).map((set) => children(der, children(der, set)[0]!)).map(([type, value]) => `${NAMES[oid(der.subarray(type!.body, type!.end))] ?? 'OID'}=${text(value!)}`).join(', ');
        const tbs = children(der, children(der, tlv(der, 0))[0]!);
        const fields = tbs[0]!.tag === 0xa0 ? tbs.slice(1) : tbs;
        const [serial, , issuer, validity, subject] = fields;
        const [from, until] = children(der, validity!);
        const serialHex = Array.from(der.subarray(serial!.body, serial!.end), (b) => b.toString(16).padStart(2, '0')).join(':');
        const time = (t: Tlv) => {
            const s = text(t);
            const full = t.tag === 0x17 ? `${Number(s.slice(0, 2)) < 50 ? '20' : '19'}${s}` : s;
            return `${full.slice(0, 4)}-${full.slice(4, 6)}-${full.slice(6, 8)} ${full.slice(8, 10)}:${full.slice(10, 12)} UTC`;
        };
        return { subject: name(subject!), issuer: name(issuer!), notBefore: time(from!), notAfter: time(until!), serial: serialHex };
    }
    catch {
        return undefined;
    }
};

// ------------------------------------------------------------------------------------------------------------- offers

const TERMINAL = ['completed', 'failed', 'expired'];

/** A live status badge: follows the session's event stream until a terminal status or until the page is left. */
const liveStatus = (signal: AbortSignal, id: string, initial = '…', onChange?: (status: string) => void): HTMLElement => {
    const badge = h('span', { class: `badge ${initial}`, 'data-session': id, 'aria-live': 'polite' }, initial);
    if (!TERMINAL.includes(initial)) {
        void events(`/api/session/${encodeURIComponent(id)}/events`, (event: { status: string }) => {
            badge.textContent = event.status;
            badge.className = `badge ${event.status}`;
            onChange?.(event.status);
        }, signal).catch(() => undefined);
    }
    return badge;
};

/**
 * Event streams a list keeps open at once: each holds one of the browser's six HTTP/1.1 connections to the service,
 * and the API calls need the others. Sessions beyond these are refreshed by reloading the list.
 */
const MAX_LIST_STREAMS = 3;
const LIST_REFRESH_MS = 5000;

export const offersPage = async (ctx: PageContext): Promise<void> => {
    const parts: HTMLElement[] = [h('h1', {}, 'Offers')];
    const result = h('div', { class: 'offer-result', 'aria-live': 'polite' });
    const showOffer = (title: string, link: string, session: string, extra?: string) => {
        replace(result, section(title,
            h('div', { class: 'offer' },
                qrCode(link, `QR code of the ${title.toLowerCase()} link`),
                h('div', {},
                    h('p', {}, 'Session ', h('a', { href: `#/sessions/${encodeURIComponent(session)}` }, h('code', {}, session)), ': ', liveStatus(ctx.signal, session, 'active')),
                    extra ? h('p', {}, extra) : null,
                    h('label', { for: 'offer-link' }, 'Link'),
                    h('textarea', { id: 'offer-link', class: 'code', rows: 3, readonly: true }, link),
                    copyButton(link, 'Copy link')))));
        result.scrollIntoView({ block: 'start' });
    };
    if (can(ctx, 'issuance:offer')) {
        const configs = await call<{ items: any[] }>('GET', '/api/issuer/credentials', { query: { pageSize: 100 } }).catch(() => ({ items: [] as any[] }));
        const status = h('div', { 'aria-live': 'polite' });
        const boxes = configs.items.map((c) => {
            const box = h('input', { type: 'checkbox', id: uid('cc'), value: c.id, name: 'credentialConfigurationIds' });
            return { box, el: h('span', { class: 'check' }, box, h('label', { for: box.id }, c.id)) };
        });
        const claims = h('textarea', { class: 'code', rows: 6, spellcheck: 'false', name: 'claims' });
        claims.value = '{\n  "given_name": "Erika",\n  "family_name": "Mustermann"\n}';
        const txCode = h('input', { type: 'checkbox', id: uid('tx'), name: 'txCode' });
        const reference = h('input', { name: 'reference', autocomplete: 'off' });
        parts.push(section('Credential offer', h('form', { novalidate: true, 'aria-label': 'Credential offer', onsubmit: (e: Event) => {
            e.preventDefault();
            void act(status, async () => {
                const ids = boxes.filter((b) => b.box.checked).map((b) => b.box.value);
                let claimValues: unknown;
                try {
                    claimValues = JSON.parse(claims.value || '{}');
                }
                catch (err) {
                    throw new Error(`Claims: ${(err as Error).message}`);
                }
                const body = {
                    credentialConfigurationIds: ids,
                    credentialClaims: Object.fromEntries(ids.map((id) => [id, { type: 'inline', claims: claimValues }])),
                    ...(txCode.checked ? { tx_code: true } : {}),
                    ...(reference.value ? { reference: reference.value } : {})
                };
                const offer = await call<{ session: string; uri: string; tx_code?: string }>('POST', '/api/issuer/offer', { body });
                showOffer('Credential offer', offer.uri, offer.session, offer.tx_code ? `Transaction code: ${offer.tx_code}` : undefined);
            });
        } },
        h('fieldset', {}, h('legend', {}, 'Credential configurations'), boxes.length ? boxes.map((b) => b.el) : h('p', {}, 'No credential configuration yet.')),
        field('Claims (JSON, the same for each configuration)', claims, 'mso_mdoc claims are nested by namespace'),
        h('span', { class: 'check' }, txCode, h('label', { for: txCode.id }, 'Ask the wallet for a generated transaction code')),
        field('Reference (optional, no personal data)', reference),
        h('button', { type: 'submit' }, 'Create credential offer'), status)));
    }
    if (can(ctx, 'presentation:request')) {
        const configs = await call<{ items: any[] }>('GET', '/api/verifier/config', { query: { pageSize: 100 } }).catch(() => ({ items: [] as any[] }));
        const status = h('div', { 'aria-live': 'polite' });
        const requestId = h('select', { name: 'requestId' }, configs.items.map((c) => h('option', { value: c.id }, c.id)));
        parts.push(section('Presentation request', h('form', { novalidate: true, 'aria-label': 'Presentation request', onsubmit: (e: Event) => {
            e.preventDefault();
            void act(status, async () => {
                const offer = await call<{ session: string; uri: string }>('POST', '/api/verifier/offer', { body: { requestId: requestId.value } });
                showOffer('Presentation request', offer.uri, offer.session);
            });
        } }, field('Presentation configuration', requestId), h('button', { type: 'submit' }, 'Create presentation request'), status)));
    }
    // The offer goes first: its QR code is what the page is for once it is made.
    replace(ctx.main, parts[0]!, result, ...parts.slice(1));
};

// ----------------------------------------------------------------------------------------------------------- sessions

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

// -------------------------------------------------------------------------------------------------- status entries

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

// ----------------------------------------------------------------------------------------------------------- bundles

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

// ------------------------------------------------------------------------------------------------------------- audit

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

export { url };
