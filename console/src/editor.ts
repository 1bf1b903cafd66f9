import { ApiError, type ErrorDetail } from './api';
import { button, h, notice, replace, uid } from './dom';
import { schemaForm, type FormNode, type Schema } from './schema-form';

/** JSON Schemas of the configuration kinds, loaded once from /api/schemas (public, cached by the browser too). */
const schemas = new Map<string, Promise<Schema>>();

export const documentSchema = (file: string, version: number): Promise<Schema> => {
    const key = `${file}@${version}`;
    let found = schemas.get(key);
    if (!found) {
        found = fetch(`/api/schemas/v${version}/${file}.schema.json`).then(async (res) => {
            if (!res.ok) {
                throw new Error(`Schema ${file} v${version} is not served (${res.status})`);
            }
            return res.json() as Promise<Schema>;
        });
        schemas.set(key, found);
    }
    return found;
};

export interface Editor {
    el: HTMLElement;
    set(value: unknown): void;
}

/**
 * A resource editor: the form generated from the kind's schema and a raw JSON editor of the same value (tabs), one
 * submit. A 400 answer's details are shown at the fields they name (and listed for the JSON editor).
 */
export const editor = (options: { title: string; schema: Schema; root: Schema; submitLabel: string; initial?: unknown; submit(value: unknown): Promise<string | void> }): Editor => {
    const form: FormNode = schemaForm(options.schema, options.root);
    const raw = h('textarea', { class: 'code', rows: 18, spellcheck: 'false', id: uid('json') });
    const status = h('div', { 'aria-live': 'polite' });
    const errorList = h('div');
    let mode: 'form' | 'json' = 'form';
    const formPanel = h('div', { role: 'tabpanel', id: uid('panel') }, form.el);
    const jsonPanel = h('div', { role: 'tabpanel', id: uid('panel'), hidden: true }, h('label', { for: raw.id }, 'Document spec as JSON'), raw);
    const tab = (label: string, which: 'form' | 'json', panel: HTMLElement) => h('button', { type: 'button', role: 'tab', 'aria-controls': panel.id, 'aria-selected': String(which === 'form'), onclick: () => switchTo(which) }, label);
    const tabs = [tab('Form', 'form', formPanel), tab('JSON', 'json', jsonPanel)];
    const switchTo = (which: 'form' | 'json') => {
        if (which === mode) {
            return;
        }
        if (which === 'json') {
            raw.value = JSON.stringify(form.get() ?? {}, null, 2);
        }
        else {
            try {
                form.set(JSON.parse(raw.value || '{}'));
            }
            catch {
                replace(status, notice('error', 'The JSON is not valid: fix it before switching to the form.'));
                return;
            }
        }
        mode = which;
        formPanel.hidden = which !== 'form';
        jsonPanel.hidden = which !== 'json';
        tabs.forEach((t, i) => t.setAttribute('aria-selected', String((i === 0) === (which === 'form'))));
    };
    const clearErrors = () => {
        form.el.querySelectorAll('[aria-invalid]').forEach((el) => el.removeAttribute('aria-invalid'));
        form.el.querySelectorAll<HTMLElement>('.field-error').forEach((el) => {
            el.hidden = true;
            el.textContent = '';
        });
        replace(errorList);
    };
    const showDetails = (details: ErrorDetail[]) => {
        const byNode = new Map<FormNode, string[]>();
        for (const d of details) {
            const node = form.find(d.path ? d.path.split('.') : []);
            byNode.set(node, [...byNode.get(node) ?? [], d.message]);
        }
        byNode.forEach((messages, node) => {
            node.showError(messages.join('; '));
            // A folded group holding the field opens, so the message is seen.
            for (let at: HTMLElement | null = node.el; at; at = at.parentElement) {
                if (at instanceof HTMLDetailsElement) {
                    at.open = true;
                }
            }
        });
        replace(errorList, h('ul', { class: 'errors' }, details.map((d) => h('li', {}, h('code', {}, d.path || '(document)'), ': ', d.message))));
        if (mode === 'form') {
            form.el.querySelector<HTMLElement>('[aria-invalid="true"]')?.focus();
        }
    };
    const submit = async (event: Event) => {
        event.preventDefault();
        clearErrors();
        let value: unknown;
        if (mode === 'json') {
            try {
                value = JSON.parse(raw.value);
            }
            catch (err) {
                replace(status, notice('error', `The JSON is not valid: ${(err as Error).message}`));
                return;
            }
        }
        else {
            value = form.get() ?? {};
        }
        replace(status, notice('ok', 'Saving…'));
        try {
            const done = await options.submit(value);
            replace(status, notice('ok', done || 'Saved.'));
        }
        catch (err) {
            if (err instanceof ApiError && err.body.details?.length) {
                showDetails(err.body.details);
            }
            replace(status, notice('error', err instanceof Error ? err.message : String(err)));
        }
    };
    const el = h('form', { class: 'editor', novalidate: true, onsubmit: submit, 'aria-label': options.title },
        h('div', { role: 'tablist', 'aria-label': 'Editor' }, tabs),
        formPanel, jsonPanel, errorList,
        h('div', { class: 'actions' }, h('button', { type: 'submit' }, options.submitLabel)),
        status);
    const set = (value: unknown) => {
        form.set(value);
        // The form's reading of the value: read-only fields of an answer are not offered for sending back.
        raw.value = JSON.stringify(form.get() ?? {}, null, 2);
    };
    if (options.initial !== undefined) {
        set(options.initial);
    }
    return { el, set };
};

export { button };
