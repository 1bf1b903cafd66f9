import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { tenantContext } from '../../../lib/auth/context';
import { NotFoundError } from '../../../lib/errors';
import { statusListIdSchema, STATUS_LIST_MAX_CAPACITY } from '../../../resources/status-list';
import { tenantIdSchema } from '../../../resources/tenant';
import type { SessionService } from '../../sessions/services/session-service';
import type { StatusEntryService } from '../services/entries';

const ROLES = ['issuance:offer', 'issuance:config'];
const tags = ['api', 'issuance'];

/** 8 bits is the widest entry; the list's own width is checked against its layout. */
const entryValueSchema = Joi.number().integer().min(0).max(255);

const entryChange = Joi.object({
    listId: Joi.string().required(),
    index: Joi.number().integer().required(),
    value: Joi.number().integer().required()
}).label('StatusListEntry');

/** Entry values of token status lists (spec 3.3, 4.7) and the revocation of an issuance session's credentials. */
export const statusEntryRoutes = (entries: StatusEntryService, sessions: SessionService): ServerRoute[] => [
    {
        method: 'PATCH',
        path: '/issuers/{tenant}/status-management/status-list/{listId}/entry/{index}',
        options: {
            tags,
            description: 'Set the status of one entry of a status list',
            notes: [
                'Values: 0 valid; on 1-bit lists 1 revoked; on wider lists 1 suspended, 2 revoked, 3 and above custom.',
                'A value above 2^bits-1 answers 400, an index never allocated 404, and a revoked entry is final (409).',
                'A suspended entry may go back to 0. The tenant in the path must be the caller\'s own.'
            ].join(' '),
            auth: { access: { scope: ROLES } },
            validate: {
                params: Joi.object({
                    tenant: tenantIdSchema.required(),
                    listId: statusListIdSchema.required(),
                    index: Joi.number().integer().min(0).max(STATUS_LIST_MAX_CAPACITY - 1).required()
                }),
                payload: Joi.object({ value: entryValueSchema.required() }).label('StatusListEntryValue')
            },
            response: { status: { 200: entryChange } }
        },
        handler: async (request) => {
            const ctx = tenantContext(request);
            const { tenant, listId, index } = request.params as { tenant: string; listId: string; index: number };
            // Another tenant's list is answered as an unknown one: whether it exists is none of the caller's business.
            if (tenant !== ctx.tenantId) {
                throw new NotFoundError('Unknown status list');
            }
            return entries.set(ctx, listId, index, (request.payload as { value: number }).value);
        }
    },
    {
        method: 'POST',
        path: '/api/session/revoke',
        options: {
            tags: ['api', 'sessions'],
            description: 'Set the status of every credential issued in an issuance session',
            notes: [
                'status defaults to revoked (1 on 1-bit lists, 2 on wider ones); credentialConfigurationId limits it to that configuration\'s credentials.',
                'Entries already revoked stay revoked. Answers how many entries changed.'
            ].join(' '),
            auth: { access: { scope: ROLES } },
            validate: {
                payload: Joi.object({
                    sessionId: Joi.string().max(255).required(),
                    credentialConfigurationId: Joi.string().max(255),
                    status: entryValueSchema
                }).label('SessionRevocation')
            },
            response: { status: { 200: Joi.object({ updated: Joi.number().integer().min(0).required() }).label('SessionRevocationResult') } }
        },
        handler: async (request) => {
            const ctx = tenantContext(request);
            const body = request.payload as { sessionId: string; credentialConfigurationId?: string; status?: number };
            const session = await sessions.get(body.sessionId);
            if (!session || session.tenantId !== ctx.tenantId || session.type !== 'issuance') {
                throw new NotFoundError('Session not found');
            }
            return { updated: await entries.setSession(ctx, session.id, body) };
        }
    }
];
