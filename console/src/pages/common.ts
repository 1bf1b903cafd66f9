import { events } from '../api';
import { button, h, notice, replace } from '../dom';

/** What every page shares: its context, role checks, outcome messages, copy buttons and live session status. */

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

export const can = (ctx: PageContext, ...roles: string[]) => roles.some((r) => ctx.scopes.has(r));

export const errorText = (err: unknown) => err instanceof Error ? err.message : String(err);

/** Runs an action, showing its outcome in `status`; answers whether it succeeded. */
export const act = async (status: HTMLElement, action: () => Promise<string | void>): Promise<boolean> => {
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

export const section = (title: string, ...children: Array<Node | string | null>) => h('section', { 'aria-label': title }, h('h2', {}, title), ...children);

export const copyButton = (text: string, label = 'Copy') => {
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
export const secretOnce = (ctx: PageContext, clientId: string, secret: string) => h('div', { class: 'secret', role: 'status' },
    h('p', {}, `Secret of ${clientId}, shown once: store it now.`),
    h('code', { class: 'selectable' }, secret), ' ', copyButton(secret, 'Copy secret'), ' ',
    button(`Sign in as ${clientId}`, () => void ctx.signInAs(clientId, secret), { class: 'secondary' }));

export const TERMINAL = ['completed', 'failed', 'expired'];

/** A live status badge: follows the session's event stream until a terminal status or until the page is left. */
export const liveStatus = (signal: AbortSignal, id: string, initial = '…', onChange?: (status: string) => void): HTMLElement => {
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
export const MAX_LIST_STREAMS = 3;
export const LIST_REFRESH_MS = 5000;
