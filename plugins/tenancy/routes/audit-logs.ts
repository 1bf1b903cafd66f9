import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { callerContext } from '../../../lib/auth/context';
import { AuditLogModel } from '../../../lib/db/models/audit-log';
import { NotFoundError, ValidationError } from '../../../lib/errors';
import { pageOf, pageQuery, pageResult, type Page } from '../../../lib/http/pagination';
import { tenantIdSchema } from '../../../resources/tenant';

const entry = Joi.object({
    id: Joi.number().integer().required(),
    tenantId: Joi.string().allow(null).required(),
    actor: Joi.string().required(),
    action: Joi.string().required(),
    kind: Joi.string().required(),
    resourceId: Joi.string().allow(null).required(),
    changes: Joi.array().items(Joi.object({ path: Joi.string(), before: Joi.any(), after: Joi.any() })).allow(null),
    createdAt: Joi.string().isoDate().required()
}).label('AuditLogEntry');

const query = Joi.object({
    ...pageQuery,
    tenantId: tenantIdSchema.description('tenant:manage only: entries of this tenant (default: entries of no tenant)'),
    kind: Joi.string().max(64),
    action: Joi.string().valid('create', 'update', 'delete'),
    actor: Joi.string().max(255).description('Client id that made the change'),
    from: Joi.date().iso().description('Entries at or after this time (ISO 8601 with time zone)'),
    to: Joi.date().iso().description('Entries at or before this time')
});

interface AuditQuery extends Page {
    tenantId?: string;
    kind?: string;
    action?: string;
    actor?: string;
    from?: Date;
    to?: Date;
}

export const auditLogRoutes: ServerRoute[] = [{
    method: 'GET',
    path: '/api/admin/audit-logs',
    options: {
        tags: ['api', 'audit'],
        description: 'Who changed tenant or configuration state, newest first',
        notes: 'A tenant client sees its tenant\'s entries; a tenant:manage client the entries of no tenant (tenant deletions, tenant-less clients) or those of ?tenantId.',
        auth: { access: { scope: ['tenant:admin', 'tenant:read', 'tenant:manage'] } },
        validate: { query },
        response: { status: { 200: pageOf(entry, 'AuditLogPage') } }
    },
    handler: async (request) => {
        const q = request.query as unknown as AuditQuery;
        const ctx = callerContext(request);
        if (ctx.tenantId && q.tenantId && q.tenantId !== ctx.tenantId) {
            throw new NotFoundError('Tenant not found');
        }
        if (q.from && q.to && q.from > q.to) {
            throw new ValidationError('from is after to', [{ path: 'from', message: 'must not be after to' }]);
        }
        const tenantId = ctx.tenantId ?? q.tenantId ?? null;
        const base = request.server.db.model(AuditLogModel).query()
            .where((b) => (tenantId ? b.where('tenantId', tenantId) : b.whereNull('tenantId')))
            .modify((b) => {
                if (q.kind) {
                    b.where('kind', q.kind);
                }
                if (q.action) {
                    b.where('action', q.action);
                }
                if (q.actor) {
                    b.where('actor', q.actor);
                }
                if (q.from) {
                    b.where('createdAt', '>=', q.from.toISOString());
                }
                if (q.to) {
                    b.where('createdAt', '<=', q.to.toISOString());
                }
            });
        const [total, items] = await Promise.all([
            base.clone().resultSize(),
            base.clone().orderBy('id', 'desc').offset((q.page - 1) * q.pageSize).limit(q.pageSize)
        ]);
        return pageResult(items.map((i) => ({ ...i, id: Number(i.id) })), total, q);
    }
}];
