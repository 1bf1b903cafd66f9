import { AsyncLocalStorage } from 'node:async_hooks';
import { ROOT_CONTEXT, type Context, type ContextManager } from '@opentelemetry/api';

/**
 * An OpenTelemetry context manager on AsyncLocalStorage that can also *enter* a context for the rest of the current
 * asynchronous execution. hapi offers no hook that wraps a request's whole lifecycle, so the request span is entered
 * in `onRequest`: every later step of that request (auth, handler, database queries) runs inside it.
 */
export class RequestContextManager implements ContextManager {
    private storage = new AsyncLocalStorage<Context>();

    active(): Context {
        return this.storage.getStore() ?? ROOT_CONTEXT;
    }

    with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(context: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
        return this.storage.run(context, () => fn.apply(thisArg, args));
    }

    bind<T>(context: Context, target: T): T {
        if (typeof target !== 'function') {
            return target;
        }
        // The returned function needs both this manager and its own call's `this`.
        // eslint-disable-next-line @typescript-eslint/no-this-alias
        const manager = this;
        const fn = target as unknown as (...args: unknown[]) => unknown;
        return function (this: unknown, ...args: unknown[]) {
            return manager.with(context, () => fn.apply(this, args));
        } as unknown as T;
    }

    /** Makes `context` the active one for the rest of the current asynchronous execution. */
    enterWith(context: Context): void {
        this.storage.enterWith(context);
    }

    enable(): this {
        return this;
    }

    disable(): this {
        this.storage.disable();
        this.storage = new AsyncLocalStorage<Context>();
        return this;
    }
}
