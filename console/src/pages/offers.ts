import { call } from '../api';
import { field, h, replace, uid } from '../dom';
import { qrCode } from '../qr';
import { type PageContext, can, act, section, copyButton, liveStatus } from './common';

/** Credential offers and presentation requests: QR code, link, copy button and the session's live status. */

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
