import type Hapi from '@hapi/hapi';
import { context, metrics, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Span, type Tracer, type UpDownCounter } from '@opentelemetry/api';
import type { W3CTraceContextPropagator } from '@opentelemetry/core';
import type { MeterProvider } from '@opentelemetry/sdk-metrics';
import type { BasicTracerProvider, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';

// The SDK packages cost ~30 MiB of memory; they are loaded only when something will receive spans or metrics.
const sdk = () => ({
    core: require('@opentelemetry/core') as typeof import('@opentelemetry/core'),
    resources: require('@opentelemetry/resources') as typeof import('@opentelemetry/resources'),
    metrics: require('@opentelemetry/sdk-metrics') as typeof import('@opentelemetry/sdk-metrics'),
    trace: require('@opentelemetry/sdk-trace-base') as typeof import('@opentelemetry/sdk-trace-base')
});
const otlp = () => (require('@opentelemetry/exporter-trace-otlp-http') as typeof import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter;
import { pluginOptions } from '../../lib/compose';
import { packageVersion } from '../../lib/package-info';
import type { SessionStatus, SessionType } from '../sessions/models/session';
import { RequestContextManager } from './context';
import { observabilityOptionsSchema, type ObservabilityOptions } from './options';
import { redactUrlQuery } from './redact';
import { sessionLogOf } from '../sessions/session-log';

export { redactUrlQuery } from './redact';
export type { ObservabilityOptions } from './options';

export const SESSIONS_METRIC = 'hallmark.sessions';
/** The attribute of a request span naming the session the request resolved. */
export const SESSION_ID_ATTRIBUTE = 'session.id';

export interface Telemetry {
    enabled: boolean;
    tracerProvider?: BasicTracerProvider;
    meterProvider?: MeterProvider;
    /** Counts the session changes seen so far and exports what is pending (spans of ended requests, metrics). */
    forceFlush(): Promise<void>;
}

declare module '@hapi/hapi' {
    interface PluginProperties {
        'hallmark-observability': Telemetry;
    }
}

interface KnexQuery {
    __knexQueryUid?: string;
    sql?: string;
    method?: string;
}

const MAX_OPEN_DB_SPANS = 10_000;

type OtlpEndpoints = Pick<ObservabilityOptions, 'otlpEndpoint' | 'otlpTracesEndpoint'>;

const defaultExporter = (otel: OtlpEndpoints): SpanExporter | undefined =>
    otel.otlpEndpoint || otel.otlpTracesEndpoint
        ? new (otlp())(otel.otlpTracesEndpoint ? { url: otel.otlpTracesEndpoint } : { url: `${otel.otlpEndpoint!.replace(/\/$/, '')}/v1/traces` })
        : undefined;

const exporterOf = (option: ObservabilityOptions['traceExporter'], otel: OtlpEndpoints): SpanExporter | undefined => {
    if (option === undefined) {
        return defaultExporter(otel);
    }
    if (option === 'otlp') {
        return new (otlp())();
    }
    if (option === 'console') {
        return new (sdk().trace.ConsoleSpanExporter)();
    }
    return option === 'none' ? undefined : option;
};

const statusCodeOf = (request: Hapi.Request): number | undefined => {
    const response = request.response as (Hapi.ResponseObject & { isBoom?: boolean; output?: { statusCode: number } }) | null;
    return response?.isBoom ? response.output?.statusCode : response?.statusCode;
};

/** The first keyword of a statement (SELECT, INSERT, …): the operation name of a database span. */
const operationOf = (query: KnexQuery): string => {
    const keyword = /^\s*([a-z]+)/i.exec(query.sql ?? '')?.[1];
    return (keyword ?? query.method ?? 'query').toUpperCase();
};

/** HTTP: a SERVER span starts in onRequest and is entered for the rest of the request; it ends with the response. */
const traceRequests = (server: Hapi.Server, tracer: Tracer, contextManager: RequestContextManager, propagator: W3CTraceContextPropagator): void => {
    const spans = new WeakMap<Hapi.Request, Span>();
    server.ext('onRequest', (request, h) => {
        // A caller's W3C traceparent continues its trace.
        const parent = propagator.extract(ROOT_CONTEXT, request.headers, {
            get: (carrier, key) => carrier[key],
            keys: (carrier) => Object.keys(carrier)
        });
        const method = request.method.toUpperCase();
        const query = redactUrlQuery(request.url.search);
        const span = tracer.startSpan(method, {
            kind: SpanKind.SERVER,
            attributes: {
                'http.request.method': method,
                'url.path': request.path,
                ...(query ? { 'url.query': query } : {})
            }
        }, parent);
        spans.set(request, span);
        sessionLogOf(request).onBind((session) => span.setAttribute(SESSION_ID_ATTRIBUTE, session.id));
        contextManager.enterWith(trace.setSpan(parent, span));
        return h.continue;
    });
    server.events.on('response', (request) => {
        const span = spans.get(request);
        if (!span) {
            return;
        }
        spans.delete(request);
        // hapi's not-found route has the internal method _special: such a request has no route.
        const route = request.route && (request.route.method as string) !== '_special' ? request.route.path : undefined;
        if (route) {
            span.updateName(`${request.method.toUpperCase()} ${route}`);
            span.setAttribute('http.route', route);
        }
        const status = statusCodeOf(request);
        if (status !== undefined) {
            span.setAttribute('http.response.status_code', status);
            if (status >= 500) {
                span.setStatus({ code: SpanStatusCode.ERROR });
            }
        }
        span.end();
    });
};

/** Database: a CLIENT span per knex query, child of the active (request) span. SQL text only, never bindings. */
const traceQueries = (server: Hapi.Server, tracer: Tracer, contextManager: RequestContextManager, requireParent: boolean): void => {
    const { knex } = server.db;
    const dbSystem = server.db.dialect === 'postgres' ? 'postgresql' : 'sqlite';
    const open = new Map<string, Span>();
    const onQuery = (query: KnexQuery) => {
        // Transaction control statements (BEGIN, COMMIT) carry no query id and never report an end.
        if (!query.__knexQueryUid || open.size >= MAX_OPEN_DB_SPANS) {
            return;
        }
        const parent = contextManager.active();
        if (requireParent && !trace.getSpan(parent)) {
            return;
        }
        const operation = operationOf(query);
        open.set(query.__knexQueryUid, tracer.startSpan(operation, {
            kind: SpanKind.CLIENT,
            attributes: {
                'db.system': dbSystem,
                'db.system.name': dbSystem,
                'db.operation.name': operation,
                'db.statement': query.sql ?? ''
            }
        }, parent));
    };
    const end = (query: KnexQuery | undefined, err?: Error & { code?: string }) => {
        const uid = query?.__knexQueryUid;
        const span = uid ? open.get(uid) : undefined;
        if (!span) {
            return;
        }
        open.delete(uid!);
        if (err) {
            // The driver's message may quote bound values: only the error's code or name is recorded.
            span.setAttribute('error.type', err.code ?? err.name ?? 'Error');
            span.setStatus({ code: SpanStatusCode.ERROR });
        }
        span.end();
    };
    const onResponse = (_response: unknown, query: KnexQuery) => end(query);
    const onError = (err: Error, query: KnexQuery) => end(query, err);
    knex.on('query', onQuery);
    knex.on('query-response', onResponse);
    knex.on('query-error', onError);
    server.ext('onPostStop', () => {
        knex.off('query', onQuery);
        knex.off('query-response', onResponse);
        knex.off('query-error', onError);
        for (const span of open.values()) {
            span.end();
        }
        open.clear();
    });
};

/** The sessions metric, fed by the session service's status changes (the sessions plugin comes later in the manifest). */
const countSessions = (server: Hapi.Server, meterProvider: MeterProvider, memory: number): SessionStatusTracker => {
    const counter = meterProvider.getMeter('hallmark').createUpDownCounter(SESSIONS_METRIC, {
        description: 'Sessions by tenant, type and status, from the status changes this process has seen'
    });
    const tracker = new SessionStatusTracker(counter, memory, async (id) => {
        const row = await server.db.knex('sessions').where({ id }).first('type');
        return row?.type as SessionType | undefined;
    });
    let stopped = false;
    server.ext('onPreStart', () => {
        if (server.sessions && typeof server.sessions.onStatusChange === 'function') {
            server.sessions.onStatusChange((change) => {
                if (!stopped) {
                    tracker.record(change);
                }
            });
        }
    });
    server.ext('onPreStop', async () => {
        await tracker.settled();
        stopped = true;
    });
    return tracker;
};

/**
 * OpenTelemetry traces and metrics (unless `disabled`): a SERVER span per HTTP request named
 * `<METHOD> <route path>`, a CLIENT span per database query as its child, `session.id` on requests that resolved
 * a session, and the `hallmark.sessions` up-down counter. Providers are per server, so several servers (tests) can
 * live in one process; `registerGlobal` hands them to the global API as well. Spans are only made when something
 * receives them (an exporter or a span processor), and the metric only fed when a reader reads it.
 */
export const plugin: Hapi.Plugin<ObservabilityOptions> = {
    name: 'hallmark-observability',
    // It counts sessions (server.sessions, the sessions table) and tags traces with the session a request binds.
    dependencies: ['hallmark-core', 'hallmark-sessions'],
    register(server, rawOptions) {
        const options = pluginOptions('hallmark-observability', observabilityOptionsSchema, rawOptions);
        const version = packageVersion();
        if (options.disabled) {
            server.expose('enabled', false);
            server.expose('forceFlush', async () => undefined);
            return;
        }

        const exporter = exporterOf(options.traceExporter, options);
        const metricReaders = options.metricReaders ?? [];
        if (!exporter && !options.spanProcessors?.length && !metricReaders.length && !options.registerGlobal) {
            // Nothing would receive a span or a metric: no SDK, no per-request work.
            server.expose('enabled', false);
            server.expose('forceFlush', async () => undefined);
            return;
        }
        const { core, resources, metrics: sdkMetrics, trace: sdkTrace } = sdk();
        const resource = resources.resourceFromAttributes({ 'service.name': options.serviceName ?? 'hallmark', 'service.version': version });
        const spanProcessors: SpanProcessor[] = [
            ...(exporter ? [options.simpleSpanProcessor ? new sdkTrace.SimpleSpanProcessor(exporter) : new sdkTrace.BatchSpanProcessor(exporter)] : []),
            ...(options.spanProcessors ?? [])
        ];
        const tracerProvider = new sdkTrace.BasicTracerProvider({ resource, spanProcessors });
        const meterProvider = new sdkMetrics.MeterProvider({ resource, readers: metricReaders });
        const contextManager = new RequestContextManager();
        const propagator = new core.W3CTraceContextPropagator();
        if (options.registerGlobal) {
            trace.setGlobalTracerProvider(tracerProvider);
            metrics.setGlobalMeterProvider(meterProvider);
            context.setGlobalContextManager(contextManager);
            propagation.setGlobalPropagator(propagator);
        }

        if (spanProcessors.length || options.registerGlobal) {
            const tracer = tracerProvider.getTracer('hallmark', version);
            traceRequests(server, tracer, contextManager, propagator);
            traceQueries(server, tracer, contextManager, options.requireParentSpan ?? true);
        }
        const tracker = metricReaders.length || options.registerGlobal ? countSessions(server, meterProvider, options.statusMemory ?? 10_000) : undefined;

        server.expose('enabled', true);
        server.expose('tracerProvider', tracerProvider);
        server.expose('meterProvider', meterProvider);
        server.expose('forceFlush', async () => {
            await tracker?.settled();
            await Promise.all([tracerProvider.forceFlush(), meterProvider.forceFlush()]);
        });
        server.ext('onPostStop', async () => {
            await Promise.allSettled([tracerProvider.shutdown(), meterProvider.shutdown()]);
            if (options.registerGlobal) {
                trace.disable();
                metrics.disable();
                context.disable();
                propagation.disable();
            }
        });
    }
};

interface StatusChange {
    id: string;
    tenantId: string;
    status: SessionStatus;
    /** Present when the session service reports it; otherwise looked up once per session. */
    type?: SessionType;
}

/**
 * The memory behind the sessions up-down counter: the last status seen per session (least recently used first
 * out). A change moves one count from the previous status to the new one. A session this process has not seen
 * before (created by another replica, or forgotten) only adds to its new status, so across replicas and restarts
 * the counter approximates; sessions removed by the maintenance job are not subtracted.
 */
export class SessionStatusTracker {
    private readonly last = new Map<string, { tenantId: string; type: SessionType; status: SessionStatus }>();
    private queue: Promise<void> = Promise.resolve();

    constructor(
        private readonly counter: UpDownCounter,
        private readonly capacity: number,
        private readonly typeOf: (sessionId: string) => Promise<SessionType | undefined>
    ) {}

    record(change: StatusChange): void {
        // In order, one after the other: a lookup of the type must not let a later change overtake an earlier one.
        this.queue = this.queue.then(() => this.apply(change)).catch(() => undefined);
    }

    /** Resolves when every recorded change has been counted. */
    settled(): Promise<void> {
        return this.queue;
    }

    private async apply(change: StatusChange): Promise<void> {
        const previous = this.last.get(change.id);
        const type = change.type ?? previous?.type ?? await this.typeOf(change.id);
        if (!type) {
            return;
        }
        if (previous?.status === change.status) {
            this.remember(change.id, previous);
            return;
        }
        if (previous) {
            this.counter.add(-1, { tenant: previous.tenantId, type: previous.type, status: previous.status });
        }
        this.counter.add(1, { tenant: change.tenantId, type, status: change.status });
        this.remember(change.id, { tenantId: change.tenantId, type, status: change.status });
    }

    private remember(id: string, entry: { tenantId: string; type: SessionType; status: SessionStatus }): void {
        this.last.delete(id);
        this.last.set(id, entry);
        if (this.last.size > this.capacity) {
            this.last.delete(this.last.keys().next().value as string);
        }
    }
}
