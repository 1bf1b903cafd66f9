import type { MetricReader } from '@opentelemetry/sdk-metrics';
import type { SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import Joi from 'joi';

export interface ObservabilityOptions {
    /** No traces and no metrics at all (OTEL_SDK_DISABLED). */
    disabled?: boolean;
    /** OTLP/HTTP collector base address (OTEL_EXPORTER_OTLP_ENDPOINT); spans go to <endpoint>/v1/traces. */
    otlpEndpoint?: string;
    /** OTLP/HTTP traces address (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); wins over `otlpEndpoint`. */
    otlpTracesEndpoint?: string;
    /**
     * Where spans go: an exporter instance (tests pass an InMemorySpanExporter), 'otlp' (OTLP over HTTP, configured
     * by the standard OTEL_EXPORTER_OTLP_* variables), 'console' or 'none'. Default: 'otlp' when `otlpEndpoint` or
     * `otlpTracesEndpoint` is set, else 'none'. With no exporter and no
     * span processor (and no registerGlobal) no spans are made at all.
     */
    traceExporter?: SpanExporter | 'otlp' | 'console' | 'none';
    /** Export each span when it ends instead of in batches (tests, debugging). */
    simpleSpanProcessor?: boolean;
    /** Extra span processors. */
    spanProcessors?: SpanProcessor[];
    /** Readers of the meter provider, e.g. a PeriodicExportingMetricReader with an exporter. None: the sessions metric is not fed. */
    metricReaders?: MetricReader[];
    /** service.name of the resource; default "hallmark". */
    serviceName?: string;
    /** Database spans only for queries inside a traced request (default true); false also traces jobs and start-up. */
    requireParentSpan?: boolean;
    /**
     * Also register the tracer and meter providers, the context manager and the W3C propagator with the global
     * OpenTelemetry API, for other instrumentation in the process. One server per process only. Default false.
     */
    registerGlobal?: boolean;
    /** Size of the memory of last-known session statuses behind the sessions metric; default 10000. */
    statusMemory?: number;
}

export const observabilityOptionsSchema = Joi.object<ObservabilityOptions, true>({
    disabled: Joi.boolean().default(false),
    otlpEndpoint: Joi.string().uri({ scheme: ['http', 'https'] }),
    otlpTracesEndpoint: Joi.string().uri({ scheme: ['http', 'https'] }),
    traceExporter: Joi.alternatives(Joi.string().valid('otlp', 'console', 'none'), Joi.object()),
    simpleSpanProcessor: Joi.boolean(),
    spanProcessors: Joi.array().items(Joi.object()),
    metricReaders: Joi.array().items(Joi.object()),
    serviceName: Joi.string(),
    requireParentSpan: Joi.boolean(),
    registerGlobal: Joi.boolean(),
    statusMemory: Joi.number().integer().min(1)
});
