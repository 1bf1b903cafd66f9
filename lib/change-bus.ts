import Cluster from 'node:cluster';
import Crypto from 'node:crypto';
import type { Knex } from 'knex';
import type { Client, Notification } from 'pg';
import type { DatabaseConfig } from './db/config';
import { pgSsl } from './db/knex';
import { IPC_KEY } from './cluster-relay';
import type { Logger } from './logging';

export { relayClusterBus } from './cluster-relay';

/**
 * Tells the other processes of one deployment (cluster workers, replicas) what changed here, so their caches, client
 * lockouts and event streams follow at once instead of after a TTL or a poll. Messages are small JSON values on a
 * topic; they never carry secrets. Delivery is at most once and unordered across topics: state that must be exact
 * stays in the database, and the caches keep their TTL as the backstop for a message lost while a link was down.
 *
 * Transports, chosen by the database: PostgreSQL replicas and workers each LISTEN on one channel (NOTIFY reaches
 * every process on the database, wherever it runs); SQLite cluster workers send to the cluster primary, which
 * relays to the other workers over the IPC channel node:cluster already keeps (no disk writes, no polling: a
 * change-log table would add a write under SQLite's single write lock per change and a poll interval of delay).
 * A single SQLite process has no peers.
 */
export type BusTransport = 'none' | 'cluster-ipc' | 'postgres-notify';

export type BusHandler = (data: unknown) => void;

export interface ChangeBus {
    readonly transport: BusTransport;
    /** Sends to every other process; never back to this one (it has told its own listeners already). */
    publish(topic: string, data: unknown): void;
    /** Calls `handler` with each message another process publishes on `topic`. */
    subscribe(topic: string, handler: BusHandler): void;
    /** Starts receiving (PostgreSQL: LISTEN). */
    start(): Promise<void>;
    /** Sends what is pending and stops receiving. */
    close(): Promise<void>;
}

interface Message {
    topic: string;
    data: unknown;
}

/** What travels: one sender's messages of one batch window, so a burst of changes costs one NOTIFY or one IPC message. */
interface Envelope {
    origin: string;
    messages: Message[];
}

/**
 * Messages published within this window travel together: under load one NOTIFY or IPC message carries many changes
 * (a few hundred a second at most per process), and a peer hears of a change a few ms later at worst.
 */
const BATCH_MS = 5;


/** PostgreSQL's NOTIFY payload limit is 8000 bytes; batches are split well under it. */
const MAX_PAYLOAD = 7000;

const CHANNEL = 'hallmark_changes';

const isEnvelope = (value: unknown): value is Envelope =>
    !!value && typeof value === 'object' && typeof (value as Envelope).origin === 'string' && Array.isArray((value as Envelope).messages);

/** Batching, origin filtering and dispatch; the transports only move envelopes. */
abstract class BaseBus implements ChangeBus {
    abstract readonly transport: BusTransport;
    protected readonly origin = Crypto.randomUUID();
    private readonly handlers = new Map<string, BusHandler[]>();
    private pending: Message[] = [];
    private flushing?: NodeJS.Timeout;
    protected closed = false;

    constructor(protected readonly log?: Logger) {}

    publish(topic: string, data: unknown): void {
        if (this.closed) {
            return;
        }
        this.pending.push({ topic, data });
        this.flushing ??= setTimeout(() => this.flush(), BATCH_MS);
    }

    subscribe(topic: string, handler: BusHandler): void {
        this.handlers.set(topic, [...this.handlers.get(topic) ?? [], handler]);
    }

    async start(): Promise<void> {}

    async close(): Promise<void> {
        clearTimeout(this.flushing);
        this.flush();
        this.closed = true;
    }

    protected abstract send(envelope: Envelope, serialized: string): void;

    private flush(): void {
        this.flushing = undefined;
        const messages = this.pending;
        this.pending = [];
        let batch: Message[] = [];
        let size = 0;
        const sendBatch = () => {
            if (batch.length) {
                const envelope = { origin: this.origin, messages: batch };
                this.send(envelope, JSON.stringify(envelope));
            }
            batch = [];
            size = 0;
        };
        for (const message of messages) {
            const length = Buffer.byteLength(JSON.stringify(message));
            if (length > MAX_PAYLOAD - 100) {
                this.log?.warn({ topic: message.topic, bytes: length }, 'change bus: message too large, not sent');
                continue;
            }
            if (size + length > MAX_PAYLOAD - 100) {
                sendBatch();
            }
            batch.push(message);
            size += length + 1;
        }
        sendBatch();
    }

    /** An envelope from any process: this process's own (PostgreSQL echoes to every listener) is dropped. */
    protected receive(envelope: unknown): void {
        if (!isEnvelope(envelope) || envelope.origin === this.origin || this.closed) {
            return;
        }
        for (const message of envelope.messages) {
            for (const handler of this.handlers.get(message?.topic) ?? []) {
                try {
                    handler(message.data);
                }
                catch (err) {
                    this.log?.error({ err, topic: message.topic }, 'change bus: a handler failed');
                }
            }
        }
    }
}

/** One process, no peers: publishing is free and nothing arrives. */
export class LocalBus extends BaseBus {
    readonly transport = 'none';

    // Not even batched: a single process's hot path (three status changes per flow) pays nothing.
    override publish(): void {}

    protected send(): void {}
}

/** A cluster worker: envelopes go to the primary, which relays them to the other workers (relayClusterBus). */
export class ClusterIpcBus extends BaseBus {
    readonly transport = 'cluster-ipc';
    private readonly onMessage = (message: unknown) => {
        if (message && typeof message === 'object' && IPC_KEY in message) {
            this.receive((message as Record<string, unknown>)[IPC_KEY]);
        }
    };

    override async start(): Promise<void> {
        process.on('message', this.onMessage);
    }

    override async close(): Promise<void> {
        await super.close();
        process.off('message', this.onMessage);
    }

    protected send(envelope: Envelope): void {
        if (!process.send || !process.connected) {
            return;
        }
        try {
            process.send({ [IPC_KEY]: envelope });
        }
        catch (err) {
            // The primary went away (shutdown): nobody is left to tell.
            this.log?.debug({ err }, 'change bus: IPC send failed');
        }
    }
}

/**
 * PostgreSQL: one dedicated connection LISTENs (the pool's connections come and go); NOTIFY goes through the pool,
 * after the change committed (the registry publishes only then). A dropped listening connection is reopened with
 * backoff; what was sent meanwhile is lost, and the caches' TTLs cover that window.
 */
export class PgNotifyBus extends BaseBus {
    readonly transport = 'postgres-notify';
    private client?: Client;
    private retry?: NodeJS.Timeout;
    private attempts = 0;

    constructor(private readonly db: Extract<DatabaseConfig, { type: 'postgres' }>, private readonly knex: Knex, log?: Logger) {
        super(log);
    }

    override async start(): Promise<void> {
        await this.connect();
    }

    override async close(): Promise<void> {
        await super.close();
        clearTimeout(this.retry);
        const client = this.client;
        this.client = undefined;
        await client?.end().catch(() => undefined);
    }

    protected send(_envelope: Envelope, serialized: string): void {
        this.knex.raw('select pg_notify(?, ?)', [CHANNEL, serialized]).catch((err: Error) => {
            this.log?.warn({ err: err.message }, 'change bus: NOTIFY failed; other replicas will see the change after their cache TTL');
        });
    }

    private async connect(): Promise<void> {
        // pg is loaded here, not at start-up: a service on SQLite never needs it (about 20 ms and 1.5 MiB of a start).
        const { Client: PgClient } = require('pg') as typeof import('pg');
        const client = new PgClient({ host: this.db.host, port: this.db.port, user: this.db.user, password: this.db.password, database: this.db.database, ssl: pgSsl(this.db) });
        const lost = (err?: Error) => {
            if (this.client !== client || this.closed) {
                return;
            }
            this.client = undefined;
            client.end().catch(() => undefined);
            this.log?.warn({ err: err?.message }, 'change bus: listening connection lost; reconnecting');
            this.reconnect();
        };
        client.on('error', lost);
        client.on('end', () => lost());
        client.on('notification', (msg: Notification) => {
            if (msg.channel === CHANNEL && msg.payload) {
                try {
                    this.receive(JSON.parse(msg.payload));
                }
                catch {
                    // Not ours: another program notifying on the channel.
                }
            }
        });
        await client.connect();
        await client.query(`LISTEN ${CHANNEL}`);
        if (this.closed) {
            await client.end();
            return;
        }
        this.client = client;
        this.attempts = 0;
    }

    private reconnect(): void {
        const delay = Math.min(30_000, 250 * 2 ** this.attempts++);
        this.retry = setTimeout(() => {
            this.connect().catch((err: Error) => {
                this.log?.warn({ err: err.message }, 'change bus: reconnecting failed');
                this.reconnect();
            });
        }, delay);
        this.retry.unref();
    }
}

/** The transport that reaches every peer of this process: PostgreSQL's channel, the cluster's IPC, or none. */
export const createChangeBus = (db: DatabaseConfig, knex: Knex, log?: Logger): ChangeBus => {
    if (db.type === 'postgres') {
        return new PgNotifyBus(db, knex, log);
    }
    if (Cluster.isWorker && process.send) {
        return new ClusterIpcBus(log);
    }
    return new LocalBus(log);
};
