import { call } from '../api';
import { button, field, h, pre, replace, table, when } from '../dom';
import { editor } from '../editor';
import { type PageContext, can, act, section } from './common';
import { specSchema } from './kinds';

/** Key chains: list, create, import, rotate, delete, and the certificates of one chain. */

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
