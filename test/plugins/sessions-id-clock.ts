import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { OFF_CLOCK } from '../../plugins/sessions/migrations/20261128_0017_session_off_clock_ids';
import { idClock, SessionSearch, type SessionListQuery } from '../../plugins/sessions/services/search';
import { SessionService } from '../../plugins/sessions/services/session-service';
import type { SessionStatus } from '../../plugins/sessions/models/session';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

/**
 * An id prefix in the default order (issue #21): the window of the updated-at index where its ids' time puts the
 * sessions, the late updates, and the sessions whose id is off that clock (their own partial index).
 */

const MINUTE = 60_000;
const DAY = 86_400_000;

/** A version 7 UUID whose time digits say `ms` (upper case when asked), with a tail from `n`. */
const v7 = (ms: number, n: number, version = '7'): string => {
    const time = ms.toString(16).padStart(12, '0');
    const tail = n.toString(16).padStart(15, '0');
    return `${time.slice(0, 8)}-${time.slice(8)}-${version}${tail.slice(0, 3)}-8${tail.slice(3, 6)}-${tail.slice(3, 15)}`;
};

interface Row {
    id: string;
    tenantId: string;
    type: 'issuance' | 'presentation';
    status: SessionStatus;
    createdAt: string;
    updatedAt: string;
}

describe('idClock', () => {
    it('reads the creation times of a lowercase id prefix of a version 7 UUID, and nothing else', () => {
        const ms = Date.parse('2025-03-01T12:34:56.789Z');
        const id = v7(ms, 1);
        expect(idClock(id)).to.equal({ from: ms, to: ms });
        expect(idClock(id.slice(0, 13))).to.equal({ from: ms, to: ms });
        expect(idClock(id.slice(0, 9))).to.equal({ from: ms - (ms % 65_536), to: ms - (ms % 65_536) + 65_535 });
        expect(idClock(id.slice(0, 4))).to.equal({ from: parseInt(`${id.slice(0, 4)}00000000`, 16), to: parseInt(`${id.slice(0, 4)}ffffffff`, 16) });
        expect(idClock('0')).to.equal({ from: 0, to: 2 ** 44 - 1 });
        expect(idClock(id.slice(0, 14))).to.equal({ from: ms, to: ms });
        expect(idClock(id.slice(0, 15))).to.equal({ from: ms, to: ms });
        // A version other than 7 after the time digits, upper case, another layout: no such id is on the clock.
        expect(idClock(v7(ms, 1, '4'))).to.be.undefined();
        expect(idClock(id.toUpperCase())).to.be.undefined();
        expect(idClock(id.replace('-', ''))).to.be.undefined();
        expect(idClock('late-01')).to.be.undefined();
        expect(idClock('')).to.be.undefined();
    });
});

for (const dialect of DIALECTS) {
    describe(`session list by id prefix in the default order (${dialect})`, () => {
        let t: TestServer;
        let token: string;
        const base = Date.parse('2025-03-01T00:00:00.000Z');
        const rows: Row[] = [];
        const offClock: string[] = [];
        let edgePrefix = '';

        before(async () => {
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-sessions', 'hallmark-oid4vci', 'hallmark-kms-db', 'hallmark-tenancy') });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'clock');
            await createTenant(t.server, root, 'other');
            token = (await clientWithToken(t.server, root, { clientId: 'clock-admin', roles: ['tenant:admin'], tenantId: 'clock' })).token;
            // One session every 10 minutes for about three days, most updated within the hour, every 13th a day or
            // more later (late); every 17th off the clock in one of four ways.
            for (let i = 0; i < 420; i++) {
                const created = base + i * 10 * MINUTE + (i % 7) * 1000;
                const lag = i % 13 === 0 ? DAY + ((i * 7919) % (2 * DAY)) : i === 200 ? -5000 : (i * 37_000) % 3_600_000;
                let id = v7(created, i);
                let createdAt = created;
                if (i % 17 === 0) {
                    const way = (i / 17) % 4;
                    // A version 4 id with the right time; a time 30 days before its creation or 61 s after; upper case.
                    id = way === 0 ? v7(created, i, '4') : way === 1 ? v7(created, i) : way === 2 ? v7(created + 61_000, i) : v7(created, i).toUpperCase();
                    createdAt = way === 1 ? created + 30 * DAY : created;
                    offClock.push(id);
                }
                else if (i % 19 === 0) {
                    // Within the tolerance of a minute: on the clock.
                    id = v7(created - 59_000, i);
                }
                rows.push({
                    id,
                    tenantId: 'clock',
                    type: i % 2 ? 'presentation' : 'issuance',
                    status: i % 3 ? 'completed' : 'failed',
                    createdAt: new Date(createdAt).toISOString(),
                    updatedAt: new Date(createdAt + lag + i).toISOString()
                });
            }
            // At the edges of a 7-digit prefix's window: the first id of the prefix a minute after its creation, updated
            // an hour before that (a lagging replica's clock); the last id a minute before its creation, updated
            // exactly a day later (not late).
            const edge = Math.floor((base + 1.5 * DAY) / 2 ** 20) * 2 ** 20;
            const edges: Array<[number, number, number]> = [[edge, edge - MINUTE, -3_600_000], [edge + 2 ** 20 - 1, edge + 2 ** 20 - 1 + MINUTE, DAY]];
            for (const [n, [time, created, lag]] of edges.entries()) {
                rows.push({ id: v7(time, 5000 + n), tenantId: 'clock', type: 'issuance', status: 'completed', createdAt: new Date(created).toISOString(), updatedAt: new Date(created + lag).toISOString() });
            }
            edgePrefix = v7(edge, 0).slice(0, 7);
            // Version 4 ids that start with e and f: prefixes whose clock ends after the year 9999.
            for (const [n, first] of ['e', 'f', 'f'].entries()) {
                const id = `${first}${v7(base, 6000 + n, '4').slice(1)}`;
                rows.push({ id, tenantId: 'clock', type: 'presentation', status: 'completed', createdAt: new Date(base + n * MINUTE).toISOString(), updatedAt: new Date(base + n * MINUTE + 1000).toISOString() });
                offClock.push(id);
            }
            // Another tenant's sessions with the same ids' times, on and off the clock, never show.
            const foreign: Row[] = [3, 17, 34].map((i) => ({ ...rows[i]!, id: v7(base + i * 10 * MINUTE + (i % 7) * 1000, 10_000 + i, i === 3 ? '7' : '4'), tenantId: 'other' }));
            await t.server.db.knex.batchInsert('sessions', [...rows, ...foreign].map((r) => ({ txCodeFailures: 0, ...r })), 200);
        });
        after(() => t.stop());

        const predicate = () => (dialect === 'postgres' ? OFF_CLOCK.postgres : OFF_CLOCK.sqlite);

        it('indexes exactly the sessions whose id is off the clock, and none the service creates', async () => {
            const flagged = await t.server.db.knex('sessions').where('tenantId', 'clock').whereRaw(predicate()).pluck('id');
            expect([...flagged].sort()).to.equal([...offClock].sort());
            const sessions = new SessionService(t.server.db);
            const created = [];
            for (let i = 0; i < 20; i++) {
                created.push((await sessions.create({ tenantId: 'other', type: 'issuance' })).id);
            }
            const stray = await t.server.db.knex('sessions').whereIn('id', created).whereRaw(predicate()).pluck('id');
            expect(stray).to.equal([]);
            await t.server.db.knex('sessions').whereIn('id', created).delete();
        });

        it('lists every id prefix exactly, pages and totals, both ways, with and without other filters', async () => {
            const windowed = new SessionSearch(t.server.db, { lookupLimit: 1, rangeLimit: 1 });
            const both: Array<'issuance' | 'presentation'> = ['issuance', 'presentation'];
            const expected = (q: Partial<SessionListQuery>): string[] => {
                const dir = q.sortOrder === 'asc' ? 1 : -1;
                const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
                return rows
                    .filter((r) => r.id.startsWith(q.id!) && (!q.status || q.status.includes(r.status)) && (!q.type || r.type === q.type))
                    .filter((r) => (!q.createdFrom || r.createdAt >= q.createdFrom) && (!q.createdTo || r.createdAt <= q.createdTo))
                    .filter((r) => (!q.updatedFrom || r.updatedAt >= q.updatedFrom) && (!q.updatedTo || r.updatedAt <= q.updatedTo))
                    .sort((a, b) => dir * (cmp(a.updatedAt, b.updatedAt) || cmp(a.id, b.id)))
                    .map((r) => r.id);
            };
            const sample = rows[150]!.id;
            const prefixes = [
                sample.slice(0, 5), // about three days: every session of the tenant
                sample.slice(0, 6), // 4.7 hours
                sample.slice(0, 7), // 17 minutes
                sample.slice(0, 9), // 65 seconds, with the dash
                sample.slice(0, 15), // the whole time and the version
                rows[68]!.id.slice(0, 15), // a version 4 id's time and version: off the clock
                rows[17]!.id.slice(0, 7), // where an id 30 days off its creation says it was created
                rows[34]!.id.slice(0, 9), // an id 61 seconds after its creation
                rows[51]!.id.slice(0, 6), // upper case: only upper-case ids match (no clock)
                edgePrefix,
                'e', // the clock of e and f ends after the year 9999
                'f',
                'e1'
            ];
            let offClockSeen = 0;
            for (const id of prefixes) {
                for (const extra of [{}, { sortOrder: 'asc' as const }, { status: ['failed'] as SessionStatus[] }, { type: 'presentation' as const, sortOrder: 'asc' as const }, { createdTo: new Date(base + DAY).toISOString() },
                { updatedFrom: new Date(base + DAY / 2).toISOString(), updatedTo: new Date(base + 2 * DAY).toISOString(), sortOrder: 'asc' as const }]) {
                    const q = { id, ...extra };
                    const plan = await windowed.plan('clock', both, { page: 1, pageSize: 7, ...q } as SessionListQuery);
                    const want = expected(q);
                    if (plan.handles === 'lookup-id') {
                        // Too few sessions to scan even at lookupLimit 1 (none at all).
                        expect(want, JSON.stringify(q)).to.equal([]);
                        continue;
                    }
                    expect(plan.handles, JSON.stringify(q)).to.equal('scan');
                    expect(plan.window, JSON.stringify(q)).to.equal(idClock(id) ? true : ('createdTo' in q ? true : undefined));
                    offClockSeen += want.filter((w) => offClock.includes(w)).length;
                    for (const page of [1, 2, 9]) {
                        const got = await windowed.list('clock', both, { page, pageSize: 7, ...q } as SessionListQuery);
                        expect(got.items.map((i) => i.id), `${JSON.stringify(q)} page ${page}`).to.equal(want.slice((page - 1) * 7, page * 7));
                        if (got.items.length) {
                            expect(got.total, JSON.stringify(q)).to.equal(want.length);
                        }
                    }
                }
            }
            // The off-clock sessions really came from their own part: the window of their ids' time misses them.
            expect(offClockSeen).to.be.above(10);
            // Through the API (its own limits), the same answer.
            const res = await t.server.inject({ url: `/api/session?id=${prefixes[1]}&pageSize=100`, headers: bearer(token) });
            expect(res.statusCode, res.payload).to.equal(200);
            expect((res.result as { items: Array<{ id: string }> }).items.map((i) => i.id)).to.equal(expected({ id: prefixes[1] }));
        });
    });
}
