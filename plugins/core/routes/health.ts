import Joi from 'joi';
import type { ServerRoute } from '@hapi/hapi';

const healthSchema = Joi.object({
    status: Joi.string().valid('ok', 'error').required(),
    database: Joi.object({ status: Joi.string().valid('up', 'down').required() }).required()
}).label('Health');

const health: ServerRoute['handler'] = async (request, h) => {
    const up = await request.server.db.isUp();
    return h.response({ status: up ? 'ok' : 'error', database: { status: up ? 'up' : 'down' } }).code(up ? 200 : 503);
};

export const healthRoutes: ServerRoute[] = [
    {
        method: 'GET',
        path: '/',
        options: { auth: false, description: 'Service root; the version is in the X-Hallmark-Version header' },
        handler: () => ({ service: 'Hallmark', docs: '/api/docs', health: '/health' })
    },
    {
        method: 'GET',
        path: '/health',
        options: { auth: false, description: 'Liveness and database reachability' },
        handler: health
    },
    {
        method: 'GET',
        path: '/api/health',
        options: {
            auth: false,
            tags: ['api', 'health'],
            description: 'Liveness and database reachability',
            notes: 'Answers 503 when the database is down.',
            response: { status: { 200: healthSchema, 503: healthSchema } }
        },
        handler: health
    }
];
