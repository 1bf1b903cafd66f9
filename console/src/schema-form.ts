import { button, h, uid } from './dom';

/**
 * A form generated from a JSON Schema as /api/schemas serves it (joi-to-json output): objects become fieldsets,
 * enums selects, booleans a yes/no/unset select, numbers and strings inputs, lists of plain values one per line,
 * lists of objects a repeatable group. What has no faithful form (alternatives, values of several types, schemas
 * nested too deep) gets a small JSON box of its own, so every document the schema allows can be entered.
 * Empty inputs are left out of the value, so the API applies its defaults.
 */

export type Schema = Record<string, any>;

export interface FormNode {
    readonly el: HTMLElement;
    get(): unknown;
    set(value: unknown): void;
    /** The node at a path below this one (API error paths, dot-separated), or the deepest one on the way. */
    find(path: string[]): FormNode;
    showError(message: string | undefined): void;
}

const MAX_DEPTH = 6;

const types = (schema: Schema): string[] => (Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : []).filter((t: string) => t !== 'null');

const resolve = (schema: Schema, root: Schema): Schema => {
    if (typeof schema.$ref === 'string' && schema.$ref.startsWith('#/')) {
        const target = schema.$ref.slice(2).split('/').reduce((node: any, key: string) => node?.[key], root) as Schema | undefined;
        return target ? { ...target, ...schema, $ref: undefined, description: schema.description ?? target.description } : {};
    }
    return schema;
};

const labelOf = (name: string, required: boolean) => required ? `${name} (required)` : name;

/** Error text below an input, tied to it with aria-describedby and aria-invalid. */
const errorSlot = (input: HTMLElement | undefined, id: string) => {
    const slot = h('p', { class: 'field-error', id: `${id}-error`, hidden: true });
    const show = (message: string | undefined) => {
        slot.textContent = message ?? '';
        slot.hidden = !message;
        if (input) {
            const described = (input.getAttribute('aria-describedby') ?? '').split(' ').filter((d) => d && d !== slot.id);
            if (message) {
                described.push(slot.id);
                input.setAttribute('aria-invalid', 'true');
            }
            else {
                input.removeAttribute('aria-invalid');
            }
            input.setAttribute('aria-describedby', described.join(' '));
        }
    };
    return { slot, show };
};

const leaf = (name: string, path: string, schema: Schema, required: boolean, kind: 'text' | 'number' | 'integer' | 'boolean' | 'enum' | 'lines' | 'json'): FormNode => {
    const id = uid('field');
    let input: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;
    if (kind === 'enum' || kind === 'boolean') {
        const values: unknown[] = kind === 'boolean' ? [true, false] : schema.enum ?? (schema.items?.enum as unknown[]) ?? [];
        input = h('select', { id, name: path }, h('option', { value: '' }, required ? '(choose)' : '(not set)'), values.map((v) => h('option', { value: JSON.stringify(v) }, String(v))));
    }
    else if (kind === 'lines' || kind === 'json') {
        input = h('textarea', { id, name: path, rows: kind === 'json' ? 4 : 2, spellcheck: 'false', class: kind === 'json' ? 'code' : '' });
    }
    else {
        input = h('input', { id, name: path, type: kind === 'text' ? 'text' : 'number', step: kind === 'integer' ? 1 : 'any', autocomplete: 'off' });
    }
    const hints = [schema.description, kind === 'lines' ? 'One value per line.' : '', kind === 'json' ? 'JSON value.' : ''].filter(Boolean).join(' ');
    const hintId = `${id}-hint`;
    if (hints) {
        input.setAttribute('aria-describedby', hintId);
    }
    if (required) {
        input.setAttribute('aria-required', 'true');
    }
    const error = errorSlot(input, id);
    const el = h('div', { class: 'field', 'data-path': path },
        h('label', { for: id }, labelOf(name, required)), input, hints ? h('small', { id: hintId }, hints) : null, error.slot);
    const node: FormNode = {
        el,
        get() {
            const raw = input.value;
            if (raw.trim() === '') {
                return undefined;
            }
            switch (kind) {
                case 'enum':
                case 'boolean':
                    return JSON.parse(raw);
                case 'number':
                case 'integer':
                    return Number(raw);
                case 'lines':
                    return raw.split('\n').map((l) => l.trim()).filter(Boolean).map((l) => types(schema.items ?? {}).some((t) => t === 'number' || t === 'integer') && !Number.isNaN(Number(l)) ? Number(l) : l);
                case 'json':
                    try {
                        return JSON.parse(raw);
                    }
                    catch {
                        // Sent as text: the API names the field and says what it expected.
                        return raw;
                    }
                default:
                    return raw;
            }
        },
        set(value) {
            if (value === undefined || value === null) {
                input.value = '';
            }
            else if (kind === 'enum' || kind === 'boolean') {
                input.value = JSON.stringify(value);
            }
            else if (kind === 'lines') {
                input.value = Array.isArray(value) ? value.join('\n') : String(value);
            }
            else if (kind === 'json') {
                input.value = JSON.stringify(value, null, 2);
            }
            else {
                input.value = String(value);
            }
        },
        find: () => node,
        showError: error.show
    };
    return node;
};

/** A group of checkboxes for a list of enumerated values (e.g. proof types). */
const checkboxes = (name: string, path: string, schema: Schema, required: boolean): FormNode => {
    const values = schema.items.enum as unknown[];
    const id = uid('group');
    const boxes = values.map((v) => {
        const boxId = uid('opt');
        const box = h('input', { type: 'checkbox', id: boxId, value: JSON.stringify(v) });
        return { box, el: h('span', { class: 'check' }, box, h('label', { for: boxId }, String(v))) };
    });
    const error = errorSlot(undefined, id);
    const el = h('fieldset', { class: 'field', 'data-path': path, 'aria-describedby': `${id}-error` },
        h('legend', {}, labelOf(name, required)), schema.description ? h('small', {}, schema.description) : null, boxes.map((b) => b.el), error.slot);
    const node: FormNode = {
        el,
        get: () => {
            const chosen = boxes.filter((b) => b.box.checked).map((b) => JSON.parse(b.box.value));
            return chosen.length ? chosen : undefined;
        },
        set: (value) => boxes.forEach((b) => {
            b.box.checked = Array.isArray(value) && value.some((v) => JSON.stringify(v) === b.box.value);
        }),
        find: () => node,
        showError: error.show
    };
    return node;
};

const objectNode = (name: string | undefined, path: string, schema: Schema, root: Schema, depth: number, required: boolean, foldable = !required): FormNode => {
    const requiredKeys = new Set<string>(schema.required ?? []);
    const children = new Map<string, FormNode>();
    // Forbidden fields (read-only ones such as createdAt, private JWK members) are served as `{}` (the service drops
    // the `not: {}` its converter writes) or still as `not: {}`: no input, and never sent back.
    const ignored = new Set<string>();
    for (const [key, sub] of Object.entries(schema.properties ?? {})) {
        const s = sub as Schema;
        if (Object.keys(s).length === 0 || (s.not && Object.keys(s.not).length === 0)) {
            ignored.add(key);
            continue;
        }
        children.set(key, build(key, path ? `${path}.${key}` : key, sub as Schema, root, depth + 1, requiredKeys.has(key)));
    }
    const id = uid('obj');
    const error = errorSlot(undefined, id);
    // Keys the form has no input for (set from an existing document) are kept as they were.
    let extra: Record<string, unknown> = {};
    const body = [schema.description && name ? h('small', {}, schema.description) : null, error.slot, [...children.values()].map((c) => c.el)];
    // Optional groups start folded, so a long schema stays readable; they open when they hold a value or an error.
    const el: HTMLElement = !name
        ? h('div', { class: 'group root', 'data-path': path }, body)
        : !foldable
            ? h('fieldset', { class: 'group', 'data-path': path }, h('legend', {}, labelOf(name, required)), body)
            : h('details', { class: 'group', 'data-path': path }, h('summary', {}, name), h('fieldset', { class: 'group' }, h('legend', { class: 'visually-hidden' }, name), body));
    const node: FormNode = {
        el,
        get() {
            const value: Record<string, unknown> = { ...extra };
            for (const [key, child] of children) {
                const v = child.get();
                if (v !== undefined) {
                    value[key] = v;
                }
            }
            return Object.keys(value).length ? value : undefined;
        },
        set(value) {
            const object = value && typeof value === 'object' && !Array.isArray(value) ? value as Record<string, unknown> : {};
            extra = Object.fromEntries(Object.entries(object).filter(([k]) => !children.has(k) && !ignored.has(k)));
            for (const [key, child] of children) {
                child.set(object[key]);
            }
            if (el instanceof HTMLDetailsElement && Object.keys(object).length) {
                el.open = true;
            }
        },
        find(segments) {
            const [first, ...rest] = segments;
            const child = first === undefined ? undefined : children.get(first);
            return child ? child.find(rest) : node;
        },
        showError: error.show
    };
    return node;
};

/** A list of objects: one fieldset per item, with buttons to add and remove items. */
const listNode = (name: string, path: string, schema: Schema, root: Schema, depth: number, required: boolean): FormNode => {
    const itemSchema = resolve(schema.items, root);
    const list = h('div', { class: 'items' });
    const id = uid('list');
    const error = errorSlot(undefined, id);
    let items: FormNode[] = [];
    const render = (values: unknown[]) => {
        items = values.map((v, i) => {
            const item = objectNode(`${name} ${i + 1}`, `${path}.${i}`, itemSchema, root, depth + 1, false, false);
            item.set(v);
            item.el.appendChild(button(`Remove ${name} ${i + 1}`, () => render(current().filter((_, j) => j !== i)), { class: 'secondary' }));
            return item;
        });
        list.replaceChildren(...items.map((i) => i.el));
    };
    const current = () => items.map((i) => i.get() ?? {});
    const content = [schema.description ? h('small', {}, schema.description) : null, error.slot, list,
        button(`Add ${name}`, () => render([...current(), {}]), { class: 'secondary' })];
    const el: HTMLElement = required
        ? h('fieldset', { class: 'group', 'data-path': path }, h('legend', {}, labelOf(name, required)), content)
        : h('details', { class: 'group', 'data-path': path }, h('summary', {}, name), h('fieldset', { class: 'group' }, h('legend', { class: 'visually-hidden' }, name), content));
    const node: FormNode = {
        el,
        get() {
            const values = items.map((i) => i.get()).filter((v) => v !== undefined);
            return values.length ? values : undefined;
        },
        set(value) {
            render(Array.isArray(value) ? value : []);
            if (el instanceof HTMLDetailsElement && items.length) {
                el.open = true;
            }
        },
        find(segments) {
            const [first, ...rest] = segments;
            const item = first === undefined ? undefined : items[Number(first)];
            return item ? item.find(rest) : node;
        },
        showError: error.show
    };
    return node;
};

const build = (name: string, path: string, raw: Schema, root: Schema, depth: number, required: boolean): FormNode => {
    const schema = resolve(raw, root);
    const t = types(schema);
    if (depth > MAX_DEPTH || schema.anyOf || schema.oneOf || t.length > 1) {
        return leaf(name, path, schema, required, 'json');
    }
    if (schema.const !== undefined) {
        return leaf(name, path, { ...schema, enum: [schema.const] }, required, 'enum');
    }
    if (schema.enum) {
        return leaf(name, path, schema, required, 'enum');
    }
    switch (t[0]) {
        case 'object':
            return schema.properties ? objectNode(name, path, schema, root, depth, required) : leaf(name, path, schema, required, 'json');
        case 'array': {
            const items = resolve(schema.items ?? {}, root);
            const itemTypes = types(items);
            if (items.enum && schema.uniqueItems) {
                return checkboxes(name, path, { ...schema, items }, required);
            }
            if (itemTypes.length === 1 && ['string', 'number', 'integer'].includes(itemTypes[0]!) && !items.enum) {
                return leaf(name, path, schema, required, 'lines');
            }
            if (itemTypes.length === 1 && itemTypes[0] === 'object' && items.properties && depth < MAX_DEPTH - 1) {
                return listNode(name, path, schema, root, depth, required);
            }
            return leaf(name, path, schema, required, 'json');
        }
        case 'boolean':
            return leaf(name, path, schema, required, 'boolean');
        case 'integer':
            return leaf(name, path, schema, required, 'integer');
        case 'number':
            return leaf(name, path, schema, required, 'number');
        case 'string':
            return leaf(name, path, schema, required, 'text');
        default:
            return leaf(name, path, schema, required, 'json');
    }
};

/** The form of a resource's spec: `schema` is the `spec` property of a served document schema, `root` the document. */
export const schemaForm = (schema: Schema, root: Schema = schema): FormNode => objectNode(undefined, '', schema, root, 0, true);
