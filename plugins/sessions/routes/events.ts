import { PassThrough } from 'node:stream';
import type Hapi from '@hapi/hapi';
import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { tenantContext } from '../../../lib/auth/context';
import { TERMINAL_STATUSES, type SessionStatus } from '../models/session';
import { NotFoundError } from '../../../lib/errors';
import { SessionChangeFeed, type SessionChange, type SessionFeedEvent } from '../services/change-feed';
import type { SessionService } from '../services/session-service';
import { SESSION_READ_ROLES, visibleTypes } from '../view';

/**
 * Settings of the event streams, read when a server registers the route (pollIntervalMs) or when a stream opens
 * (keepAliveMs). Module-level so tests can shorten them; production keeps the defaults.
 */
export const eventStreamSettings = {
    /** A comment line this often keeps idle streams open through proxies (contract: every 15 s). */
    keepAliveMs: 15_000,
    /** How often open streams' sessions are read from the database, to see changes made by other processes. */
    pollIntervalMs: 500
};

declare module '@hapi/hapi' {
    interface Server {
        /** Status changes of watched sessions, from any process on the database (event streams listen). */
        sessionFeed: SessionChangeFeed;
    }
}

const READ = [...new Set([...Object.values(SESSION_READ_ROLES).flat(), 'tenant:read'])];

/** Statuses only move forward; a stream reports each step once and never goes back. */
const STEP: Record<SessionStatus, number> = { active: 0, fetched: 1, completed: 2, failed: 2, expired: 2 };

const event = (n: number, change: Pick<SessionChange, 'id' | 'status' | 'updatedAt'>): string =>
    `id: ${n}\nevent: status\ndata: ${JSON.stringify({ id: change.id, status: change.status, updatedAt: change.updatedAt })}\n\n`;

/**
 * GET /api/session/{id}/events (spec 6.1, contract "Sessions and events"): a text/event-stream that starts with the
 * session's current status, sends each later status change (made by any process on the database), and ends after
 * a terminal status. Registers the route, the change feed it listens to, and closes open streams when the server
 * stops (an open stream is a request that would otherwise hold the shutdown until its timeout).
 */
export const registerSessionEvents = (server: Hapi.Server, sessions: SessionService): void => {
    const feed = new SessionChangeFeed(server.db, sessions, { pollIntervalMs: eventStreamSettings.pollIntervalMs, log: server.app.log });
    relayStatusChanges(server, sessions);
    server.decorate('server', 'sessionFeed', feed);
    const open = new Set<() => void>();
    server.ext('onPreStop', () => {
        for (const close of [...open]) {
            close();
        }
    });
    server.ext('onPostStop', () => feed.close());
    server.route(sessionEventRoutes(sessions, feed, open));
};

const STATUS_TOPIC = 'sessions.status';

const isStatusChange = (value: unknown): value is Parameters<SessionService['relay']>[0] => {
    const c = value as Record<string, unknown>;
    return !!c && typeof c === 'object' && typeof c.id === 'string' && typeof c.tenantId === 'string' && typeof c.type === 'string'
        && typeof c.status === 'string' && c.status in STEP && typeof c.updatedAt === 'string';
};

/**
 * The fan-out across workers and replicas: a status change made here goes to the peers over the change bus, whose
 * streams (and metrics) hear it as one of their own at once; the feed's poll stays as the backstop for a lost message.
 */
const relayStatusChanges = (server: Hapi.Server, sessions: SessionService): void => {
    let relaying = false;
    sessions.onStatusChange((change) => {
        if (!relaying) {
            server.bus.publish(STATUS_TOPIC, change);
        }
    });
    server.bus.subscribe(STATUS_TOPIC, (data) => {
        if (isStatusChange(data)) {
            relaying = true;
            try {
                sessions.relay(data);
            }
            finally {
                relaying = false;
            }
        }
    });
};

const sessionEventRoutes = (sessions: SessionService, feed: SessionChangeFeed, open: Set<() => void>): ServerRoute[] => [{
    method: 'GET',
    path: '/api/session/{id}/events',
    options: {
        tags: ['api', 'sessions'],
        description: 'Event stream of a session\'s status',
        notes: 'text/event-stream. The first event is the current status, then one per status change; the stream ends after completed, failed or expired. '
            + 'Each event: `id: <n>`, `event: status`, `data: {"id","status","updatedAt"}`; a `: keep-alive` comment every 15 s. '
            + 'The token may come as Authorization: Bearer or as ?token= (EventSource cannot send headers). Roles as for GET /api/session/{id}.',
        auth: { access: { scope: READ } },
        app: { queryToken: true },
        validate: {
            params: Joi.object({ id: Joi.string().max(255).required() }),
            query: Joi.object({ token: Joi.string().max(8192).description('The bearer token, for clients that cannot send headers') })
        },
        plugins: { 'hapi-swagger': { produces: ['text/event-stream'] } }
    },
    handler: async (request, h) => {
        const ctx = tenantContext(request);
        const id = request.params.id as string;
        const session = await sessions.get(id);
        if (!session || session.tenantId !== ctx.tenantId || !visibleTypes(ctx.roles).includes(session.type)) {
            throw new NotFoundError('Session not found');
        }

        const stream = new PassThrough();
        let sent = 0;
        let step = -1;
        let closed = false;
        let keepAlive: NodeJS.Timeout | undefined;
        let unwatch: (() => void) | undefined;

        const close = () => {
            if (closed) {
                return;
            }
            closed = true;
            clearInterval(keepAlive);
            unwatch?.();
            open.delete(close);
            if (!stream.destroyed) {
                stream.end();
            }
        };
        const send = (change: Pick<SessionChange, 'id' | 'status' | 'updatedAt'>) => {
            if (closed || STEP[change.status] <= step) {
                return;
            }
            step = STEP[change.status];
            stream.write(event(++sent, change));
            if (TERMINAL_STATUSES.includes(change.status)) {
                close();
            }
        };

        // Written before hapi pipes the stream: the headers and the first event leave together.
        send(session);
        if (!closed) {
            open.add(close);
            // Watching starts after the read above; the feed's first sighting (or the next poll) covers the gap.
            unwatch = feed.watch(id, (e: SessionFeedEvent) => (e.kind === 'gone' ? close() : send(e)));
            keepAlive = setInterval(() => {
                if (!closed) {
                    stream.write(': keep-alive\n\n');
                }
            }, eventStreamSettings.keepAliveMs);
            keepAlive.unref();
            // The client went away: hapi destroys the stream and the raw response closes; either one cleans up.
            stream.once('close', close);
            request.raw.res.once('close', close);
        }

        // text/event-stream counts as compressible, and gzip would hold events back in its buffer. hapi picks the
        // encoding from this field when it transmits; `response.compressed('identity')` would instead send a
        // `Content-Encoding: identity` header, which RFC 9110 reserves for Accept-Encoding.
        request.info.acceptEncoding = 'identity';
        return h.response(stream)
            .type('text/event-stream')
            .header('cache-control', 'no-cache, no-store')
            // Proxies such as nginx buffer responses unless told not to.
            .header('x-accel-buffering', 'no');
    }
}];
