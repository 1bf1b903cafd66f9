import type Hapi from '@hapi/hapi';
import { redactQuery, redactSensitive } from '../../lib/logging';
import type { HttpLogOptions } from './options';

const captureBody = (source: unknown, maxLength: number, redact: boolean): string | undefined => {
    if (source === null || source === undefined || typeof (source as NodeJS.ReadableStream).pipe === 'function') {
        return undefined;
    }
    const text = typeof source === 'string' || Buffer.isBuffer(source)
        ? source.toString()
        : JSON.stringify(redact ? redactSensitive(source) : source);
    return maxLength > 0 && text.length > maxLength ? `${text.slice(0, maxLength)}…[truncated]` : text;
};

/** LOG_ENABLE_HTTP_LOGGER: one line per response; LOG_HTTP_RESPONSE_BODY adds the (redacted, truncated) body. */
export const registerHttpLogger = (server: Hapi.Server, options: HttpLogOptions): void => {
    if (!options.enabled) {
        return;
    }
    server.events.on('response', (request) => {
        try {
            logResponse(request);
        }
        catch (err) {
            // A log line must never take the process down.
            request.server.app.log.warn({ err: (err as Error).message }, 'http log line skipped');
        }
    });
    const logResponse = (request: Hapi.Request) => {
        const response = request.response as Hapi.ResponseObject | null;
        const status = response?.statusCode ?? (request.response as any)?.output?.statusCode;
        const path = options.redact ? redactQuery(request.url.pathname + request.url.search) : request.url.pathname + request.url.search;
        const line: Record<string, unknown> = {
            method: request.method.toUpperCase(),
            path,
            statusCode: status,
            ms: Date.now() - request.info.received
        };
        if (options.responseBody && response && 'source' in response) {
            line.responseBody = captureBody(response.source, options.responseBodyMaxLength, options.redact);
        }
        (request.app.log ?? request.server.app.log).info(line, 'http');
    };
};
