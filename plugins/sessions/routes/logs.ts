import type Hapi from '@hapi/hapi';
import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { tenantContext } from '../../../lib/auth/context';
import { NotFoundError } from '../../../lib/errors';
import { readSessionLogs, registerSessionLogger, SESSION_LOG_LEVELS } from '../session-log';
import type { SessionService } from '../services/session-service';
import { SESSION_READ_ROLES, visibleTypes } from '../view';
import type { SessionLogOptions } from '../options';

const READ = [...new Set([...Object.values(SESSION_READ_ROLES).flat(), 'tenant:read'])];

export const sessionLogEntry = Joi.object({
    timestamp: Joi.string().isoDate().required(),
    level: Joi.string().valid(...SESSION_LOG_LEVELS).required(),
    stage: Joi.string().description('Step of the flow: offer, token, credential, notification, …'),
    message: Joi.string().allow('').required(),
    detail: Joi.object().unknown(true)
        .description('event, flowType and context of the record, its further facts, and with LOG_SESSION_STORE=verbose the redacted request and response bodies and the error stack')
}).label('SessionLogEntry');

export const sessionLogRoutes = (sessions: SessionService): ServerRoute[] => [{
    method: 'GET',
    path: '/api/session/{id}/logs',
    options: {
        tags: ['api', 'sessions'],
        description: 'Flow log entries of one session, oldest first',
        notes: 'Entries are kept when LOG_ENABLE_SESSION_LOGGER is on, as LOG_SESSION_STORE says: off keeps none, errors keeps warn and error entries, all keeps every entry, verbose also keeps the redacted request and response bodies and error stacks. Same roles as GET /api/session/{id}.',
        auth: { access: { scope: READ } },
        validate: { params: Joi.object({ id: Joi.string().max(255).required() }) },
        response: { status: { 200: Joi.array().items(sessionLogEntry).label('SessionLogEntries') } }
    },
    handler: async (request) => {
        const ctx = tenantContext(request);
        const session = await sessions.get(request.params.id as string);
        if (!session || session.tenantId !== ctx.tenantId || !visibleTypes(ctx.roles).includes(session.type)) {
            throw new NotFoundError('Session not found');
        }
        return readSessionLogs(request.server.db, session.id);
    }
}];

/** GET /api/session/{id}/logs and the session flow logger (which is only installed when it is enabled). */
export const registerSessionLogs = (server: Hapi.Server, sessions: SessionService, options: SessionLogOptions): void => {
    registerSessionLogger(server, options);
    server.route(sessionLogRoutes(sessions));
};
