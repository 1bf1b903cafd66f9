/** A few DOM helpers: elements are built with createElement and text nodes, never from HTML strings of data. */

type Child = Node | string | number | null | undefined | false | Child[];
type AttrValue = string | number | boolean | null | undefined | ((event: any) => void);

export const h = <K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, AttrValue> = {}, ...children: Child[]): HTMLElementTagNameMap[K] => {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
        if (typeof value === 'function') {
            el.addEventListener(key.slice(2).toLowerCase(), value);
        }
        else if (value === true) {
            el.setAttribute(key, '');
        }
        else if (value !== false && value !== null && value !== undefined) {
            el.setAttribute(key, String(value));
        }
    }
    append(el, ...children);
    return el;
};

export const append = (el: Element, ...children: Child[]): void => {
    for (const child of children) {
        if (Array.isArray(child)) {
            append(el, ...child);
        }
        else if (child instanceof Node) {
            el.appendChild(child);
        }
        else if (child !== null && child !== undefined && child !== false) {
            el.appendChild(document.createTextNode(String(child)));
        }
    }
};

export const replace = (el: Element, ...children: Child[]): void => {
    el.replaceChildren();
    append(el, ...children);
};

let ids = 0;
/** A unique element id, for label/for and aria-describedby pairs. */
export const uid = (prefix = 'f'): string => `${prefix}-${++ids}`;

/** A message in a live region, so screen readers announce it. */
export const notice = (kind: 'ok' | 'error', text: string): HTMLElement =>
    h('p', { class: `notice ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, text);

export const when = (iso: unknown): string => typeof iso === 'string' ? new Date(iso).toLocaleString() : '';

/** A table with a caption (screen readers name it) and header cells. */
export const table = (caption: string, headers: string[], rows: Child[][]): HTMLElement =>
    h('div', { class: 'table-wrap' }, h('table', {},
        h('caption', {}, caption),
        h('thead', {}, h('tr', {}, headers.map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', {}, rows.length ? rows.map((r) => h('tr', {}, r.map((c) => h('td', {}, c)))) : h('tr', {}, h('td', { colspan: headers.length }, 'Nothing yet.')))));

export const pre = (value: unknown): HTMLElement => h('pre', { class: 'json' }, JSON.stringify(value, null, 2));

export const field = (label: string, input: HTMLElement, hint?: string): HTMLElement => {
    const id = input.id || uid();
    input.id = id;
    const hintId = hint ? `${id}-hint` : undefined;
    if (hintId) {
        input.setAttribute('aria-describedby', hintId);
    }
    return h('div', { class: 'field' }, h('label', { for: id }, label), input, hint ? h('small', { id: hintId }, hint) : null);
};

export const button = (label: string, onClick: (event: MouseEvent) => void, attrs: Record<string, AttrValue> = {}): HTMLButtonElement =>
    h('button', { type: 'button', onclick: onClick, ...attrs }, label);
