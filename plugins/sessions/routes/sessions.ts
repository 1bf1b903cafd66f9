import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { tenantContext } from '../../../lib/auth/context';
import { NotFoundError } from '../../../lib/errors';
import type { SessionService } from '../services/session-service';
import { detail, SESSION_READ_ROLES, sessionDetail, visibleTypes } from '../view';

const READ = [...new Set([...Object.values(SESSION_READ_ROLES).flat(), 'tenant:read'])];

export const sessionRoutes = (sessions: SessionService): ServerRoute[] => [{
    method: 'GET',
    path: '/api/session/{id}',
    options: {
        tags: ['api', 'sessions'],
        description: 'One session with its result fields',
        notes: 'Issuance sessions need issuance:offer or issuance:config, presentation sessions presentation:request or presentation:config (or tenant:admin / tenant:read).',
        auth: { access: { scope: READ } },
        validate: { params: Joi.object({ id: Joi.string().max(255).required() }) },
        response: { status: { 200: sessionDetail } }
    },
    handler: async (request) => {
        const ctx = tenantContext(request);
        const session = await sessions.get(request.params.id as string);
        if (!session || session.tenantId !== ctx.tenantId || !visibleTypes(ctx.roles).includes(session.type)) {
            throw new NotFoundError('Session not found');
        }
        return detail(session);
    }
}];
