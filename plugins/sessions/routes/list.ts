import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { tenantContext } from '../../../lib/auth/context';
import type { SessionType } from '../models/session';
import { ForbiddenError, NotFoundError, ValidationError } from '../../../lib/errors';
import { pageOf, pageQuery, pageResult } from '../../../lib/http/pagination';
import { COUNT_CAP, MAX_INSTANT, MIN_INSTANT, SORT_KEYS, type SessionListQuery, type SessionSearch } from '../services/search';
import type { Session } from '../services/session-service';
import { listItem, SESSION_READ_ROLES, sessionListItem, visibleTypes } from '../view';

const READ = [...new Set([...Object.values(SESSION_READ_ROLES).flat(), 'tenant:read'])];

/** Who may delete a session of each type (tenant:admin holds both). */
export const SESSION_DELETE_ROLES: Record<SessionType, string[]> = {
    issuance: ['issuance:config'],
    presentation: ['presentation:config']
};

const DELETE = [...new Set(Object.values(SESSION_DELETE_ROLES).flat())];

const ISO_INSTANT = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(?:(Z)|([+-])(\d{2})(?::?(\d{2}))?)$/i;

/**
 * The instant of an ISO 8601 date and time with a time zone (Z, ±hh, ±hhmm or ±hh:mm), or undefined when a field is
 * out of range (Date would roll 2024-02-30 over into March) or the instant lies outside the years 1 to 9999 in UTC
 * (0001-01-01T00:00+05:00 is in year 0, whose ISO text PostgreSQL refuses). Fractions beyond milliseconds are cut.
 */
export const parseInstant = (value: string): Date | undefined => {
    const m = ISO_INSTANT.exec(value);
    if (!m) {
        return undefined;
    }
    const n = (i: number) => Number(m[i] ?? 0);
    const [year, month, day, hour, minute, second] = [n(1), n(2), n(3), n(4), n(5), n(6)];
    const millis = Number((m[7] ?? '0').slice(0, 3).padEnd(3, '0'));
    const [offsetHours, offsetMinutes] = [n(10), n(11)];
    const daysInMonth = [31, year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1] ?? 0;
    if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 59 || offsetHours > 23 || offsetMinutes > 59) {
        return undefined;
    }
    const offset = m[8] ? 0 : (m[9] === '-' ? -1 : 1) * (offsetHours * 60 + offsetMinutes);
    // setUTCFullYear, not Date.UTC: the latter reads years 0 to 99 as 1900 to 1999.
    const date = new Date(0);
    date.setUTCFullYear(year, month - 1, day);
    date.setUTCHours(hour, minute, second, millis);
    date.setTime(date.getTime() - offset * 60_000);
    const time = date.getTime();
    return time >= MIN_INSTANT && time <= MAX_INSTANT ? date : undefined;
};

/** ISO 8601 date and time with a time zone; answers the instant as toISOString() does. */
const instant = Joi.string()
    .pattern(ISO_INSTANT, 'ISO 8601 date and time with a time zone')
    .custom((value: string, helpers) => parseInstant(value)?.toISOString() ?? helpers.error('date.format', { format: 'iso' }));

/** Text compared with stored values; NUL is refused (PostgreSQL text cannot hold it). */
// eslint-disable-next-line no-control-regex -- matching NUL is the point
const text = (max: number) => Joi.string().max(max).pattern(/^[^\u0000]*$/, 'text without NUL');

export const sessionListQuery = Joi.object({
    createdFrom: instant.description('Created at or after (ISO 8601 with time zone)'),
    createdTo: instant.description('Created at or before (ISO 8601 with time zone)'),
    updatedFrom: instant.description('Last changed at or after (ISO 8601 with time zone)'),
    updatedTo: instant.description('Last changed at or before (ISO 8601 with time zone)'),
    status: Joi.array().items(Joi.string().valid('active', 'fetched', 'completed', 'failed', 'expired')).single()
        .description('One or more statuses; repeat the parameter'),
    type: Joi.string().valid('issuance', 'presentation'),
    credentialConfigurationId: text(128).description('Issuance sessions offering this credential configuration'),
    requestId: text(255).description('Presentation sessions of this presentation configuration'),
    failureCode: text(255).description('Failed sessions with this failure code'),
    id: text(255).allow('').description('Sessions whose id starts with this (at most 255 characters)'),
    q: text(8192).allow('').description('Session id or its start, walletNonce, pre-authorized code, reference, or a pasted credential offer link or OpenID4VP request link'),
    sortBy: Joi.string().valid(...SORT_KEYS).default('updatedAt'),
    sortOrder: Joi.string().valid('asc', 'desc').default('desc'),
    ...pageQuery
}).label('SessionListQuery');

const sessionPage = pageOf(sessionListItem, 'SessionPage')
    .keys({ totalCapped: Joi.boolean().description(`Present and true when more than ${COUNT_CAP} sessions match: total is then a lower bound`) })
    .label('SessionPage');

const checkRange = (query: SessionListQuery, from: 'createdFrom' | 'updatedFrom', to: 'createdTo' | 'updatedTo'): void => {
    const start = query[from];
    const end = query[to];
    if (start && end && Date.parse(start) > Date.parse(end)) {
        throw new ValidationError(`${from} is after ${to}`, [{ path: from, message: `"${from}" must not be after "${to}"` }]);
    }
};

export const sessionListRoutes = (search: SessionSearch): ServerRoute[] => [{
    method: 'GET',
    path: '/api/session',
    options: {
        tags: ['api', 'sessions'],
        description: 'List and search the sessions of the tenant',
        notes: [
            'Most recently updated first unless sortBy/sortOrder say otherwise; filters are combined with AND; only the session types the roles allow ',
            '(issuance:offer or issuance:config for issuance, presentation:request or presentation:config for presentation, tenant:admin / tenant:read both). ',
            `total is exact up to ${COUNT_CAP} matching sessions; beyond that it is a lower bound and totalCapped is true.`
        ].join(''),
        auth: { access: { scope: READ } },
        validate: { query: sessionListQuery },
        response: { status: { 200: sessionPage } }
    },
    handler: async (request) => {
        const ctx = tenantContext(request);
        const query = request.query as unknown as SessionListQuery;
        checkRange(query, 'createdFrom', 'createdTo');
        checkRange(query, 'updatedFrom', 'updatedTo');
        const result = await search.list(ctx.tenantId, visibleTypes(ctx.roles), query);
        return {
            ...pageResult(result.items.map((s) => listItem(s as Session)), result.total, query),
            ...(result.totalCapped ? { totalCapped: true } : {})
        };
    }
}, {
    method: 'DELETE',
    path: '/api/session/{id}',
    options: {
        tags: ['api', 'sessions'],
        description: 'Delete a session and its logs',
        notes: 'Issuance sessions need issuance:config, presentation sessions presentation:config (or tenant:admin).',
        auth: { access: { scope: DELETE } },
        validate: { params: Joi.object({ id: Joi.string().max(255).required() }) }
    },
    handler: async (request, h) => {
        const ctx = tenantContext(request);
        const id = request.params.id as string;
        const type = await search.typeOf(ctx.tenantId, id);
        if (!type || !visibleTypes(ctx.roles).includes(type)) {
            throw new NotFoundError('Session not found');
        }
        if (!SESSION_DELETE_ROLES[type].some((role) => ctx.roles.includes(role))) {
            throw new ForbiddenError(`Deleting a ${type} session needs ${SESSION_DELETE_ROLES[type].join(' or ')}`);
        }
        if (!(await search.remove(ctx.tenantId, id))) {
            throw new NotFoundError('Session not found');
        }
        return h.response().code(204);
    }
}];
