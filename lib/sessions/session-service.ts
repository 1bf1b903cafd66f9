import Crypto from 'node:crypto';
import type { Database } from '../db/database';
import { SessionModel, TERMINAL_STATUSES, type SessionStatus, type SessionType } from '../db/models/session';

export type SessionPatch = Partial<Omit<SessionModel, 'id' | 'tenantId' | 'type' | 'createdAt'>>;

export const sha256Hex = (value: string): string => Crypto.createHash('sha256').update(value).digest('hex');

/**
 * Sessions of both flows. Every status change is one conditional update (`where status in (...)`), so a late or
 * concurrent request can never overwrite a final status, and single-use values are consumed exactly once.
 */
export class SessionService {
    private readonly listeners: Array<(session: { id: string; tenantId: string; status: SessionStatus; updatedAt: string }) => void> = [];

    constructor(private readonly db: Database) {}

    private get model() {
        return this.db.model(SessionModel);
    }

    /** Called after every status change in this process (event streams and metrics listen). */
    onStatusChange(listener: (session: { id: string; tenantId: string; status: SessionStatus; updatedAt: string }) => void): void {
        this.listeners.push(listener);
    }

    async create(input: { tenantId: string; type: SessionType } & SessionPatch): Promise<SessionModel> {
        const now = new Date().toISOString();
        const id = Crypto.randomUUID();
        await this.model.query(this.db.ambient()).insert({ id, status: 'active', txCodeFailures: 0, ...input, createdAt: now, updatedAt: now });
        const session = (await this.get(id))!;
        this.notify(session);
        return session;
    }

    get(id: string): Promise<SessionModel | undefined> {
        return this.model.query(this.db.ambient()).findById(id) as unknown as Promise<SessionModel | undefined>;
    }

    /** A session of the tenant found by one of its public handles. */
    async findBy(tenantId: string, field: 'offerId' | 'codeHash' | 'accessTokenHash' | 'walletNonce', value: string): Promise<SessionModel | undefined> {
        return this.model.query().where({ tenantId, [field]: value }).first() as unknown as Promise<SessionModel | undefined>;
    }

    /**
     * Applies `patch` only when the session still matches `where` (e.g. its status is one of `from`, a code is
     * unused). True when this call made the change.
     */
    async update(id: string, patch: SessionPatch, where: { status?: SessionStatus[]; isNull?: Array<keyof SessionModel>; extra?: (q: any) => void } = {}): Promise<boolean> {
        const query = this.model.query(this.db.ambient()).where('id', id);
        if (where.status) {
            query.whereIn('status', where.status);
        }
        for (const column of where.isNull ?? []) {
            query.whereNull(column as string);
        }
        where.extra?.(query);
        const updatedAt = new Date().toISOString();
        const changed = await query.patch({ ...patch, updatedAt }) === 1;
        if (changed && patch.status) {
            const session = await this.get(id);
            if (session) {
                this.notify(session);
            }
        }
        return changed;
    }

    /** Moves a session to `to` unless it is already in a final status. */
    transition(id: string, from: SessionStatus[], to: SessionStatus, patch: SessionPatch = {}): Promise<boolean> {
        return this.update(id, { ...patch, status: to }, { status: from.filter((s) => !TERMINAL_STATUSES.includes(s)) });
    }

    private notify(session: SessionModel): void {
        for (const listener of this.listeners) {
            listener({ id: session.id, tenantId: session.tenantId, status: session.status, updatedAt: session.updatedAt });
        }
    }
}
