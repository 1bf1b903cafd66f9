import type Hapi from '@hapi/hapi';
import type { Span } from '@opentelemetry/api';

/**
 * The span of each traced request, kept apart from the plugin so code that only tags spans (the session flow
 * logger) needs nothing but this module, and costs nothing when telemetry is off.
 */
const requestSpans = new WeakMap<Hapi.Request, Span>();

export const SESSION_ID_ATTRIBUTE = 'session.id';

export const trackRequestSpan = (request: Hapi.Request, span: Span): void => {
    requestSpans.set(request, span);
};

/** The span of a request, when the observability plugin traces it. */
export const requestSpan = (request: Hapi.Request): Span | undefined => requestSpans.get(request);

/** Tags the request's trace with the session it resolved (`session.id`); a no-op when the request is not traced. */
export const setSessionOnSpan = (request: Hapi.Request, sessionId: string): void => {
    requestSpans.get(request)?.setAttribute(SESSION_ID_ATTRIBUTE, sessionId);
};
