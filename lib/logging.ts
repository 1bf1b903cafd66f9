import Fs from 'node:fs';
import Path from 'node:path';
import Pino, { type Logger } from 'pino';
import PinoPretty from 'pino-pretty';

export type { Logger } from 'pino';

/** Keys whose values never reach a log line when LOG_REDACT_SENSITIVE_DATA is on (compared case-insensitively). */
const SENSITIVE_KEYS = new Set([
    'authorization', 'proxy-authorization', 'cookie', 'set-cookie', 'x-api-key',
    'password', 'passphrase', 'secret', 'client_secret', 'clientsecret', 'master_secret', 'mastersecret', 'pin',
    'token', 'access_token', 'refresh_token', 'id_token', 'accesstoken', 'vaulttoken', 'value',
    'code', 'pre-authorized_code', 'preauthorizedcode', 'tx_code', 'txcode', 'code_verifier', 'response_code',
    'q', 'credential', 'credentials', 'uri', 'credential_offer', 'credential_offer_uri',
    'private_key', 'privatekey', 'privatejwk', 'private_jwk', 'd', 'p', 'q', 'dp', 'dq', 'qi', 'k'
]);

export const REDACTED = '[redacted]';

/** A deep copy with sensitive values replaced. Used for structured log fields and captured bodies alike. */
export const redactSensitive = (value: unknown, depth = 0): unknown => {
    if (depth > 12 || value === null || typeof value !== 'object') {
        return value;
    }
    if (Array.isArray(value)) {
        return value.map((v) => redactSensitive(v, depth + 1));
    }
    if (Buffer.isBuffer(value) || value instanceof Error) {
        return value;
    }
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) =>
        [k, SENSITIVE_KEYS.has(k.toLowerCase()) && v !== undefined && v !== null ? REDACTED : redactSensitive(v, depth + 1)]));
};

/** Replaces sensitive query parameter values in a URL or query string, e.g. ?pre-authorized_code=… */
export const redactQuery = (url: string): string =>
    url.replace(/([?&])([^=&#]+)=([^&#]*)/g, (all, sep: string, key: string) => {
        let name: string | undefined;
        try {
            name = decodeURIComponent(key).toLowerCase();
        }
        catch {
            // A malformed key cannot be read, so it cannot be shown either.
        }
        return name === undefined || SENSITIVE_KEYS.has(name) ? `${sep}${key}=${REDACTED}` : all;
    });

/**
 * The console stays human-readable (pino-pretty, synchronous); LOG_TO_FILE adds JSON lines written synchronously
 * so the file keeps message order even when the process dies.
 */
/** `destination` replaces stdout for the formatted console output (tests). */
/** The logging settings (LOG_* variables). */
export interface LogSettings {
    level: 'debug' | 'info' | 'warn' | 'error';
    http: boolean;
    httpResponseBody: boolean;
    httpResponseBodyMaxLength: number;
    redact: boolean;
    session: boolean;
    sessionStore: 'off' | 'errors' | 'all' | 'verbose';
    toFile: boolean;
    filePath: string;
}

export const createLogger = (config: { log: LogSettings }, options: { destination?: NodeJS.WritableStream } = {}): Logger => {
    const streams: Pino.StreamEntry[] = [{
        level: config.log.level,
        stream: PinoPretty({ destination: options.destination ?? 1, sync: true, colorize: false, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' })
    }];
    if (config.log.toFile) {
        Fs.mkdirSync(Path.dirname(config.log.filePath), { recursive: true });
        streams.push({ level: config.log.level, stream: Pino.destination({ dest: config.log.filePath, sync: true, append: true }) });
    }
    return Pino({
        level: config.log.level,
        base: undefined,
        timestamp: Pino.stdTimeFunctions.isoTime,
        formatters: config.log.redact
            ? { log: (object) => redactSensitive(object) as Record<string, unknown> }
            : undefined,
        serializers: { err: Pino.stdSerializers.err }
    }, Pino.multistream(streams));
};
