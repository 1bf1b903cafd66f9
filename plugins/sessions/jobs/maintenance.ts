import type { Knex } from 'knex';
import type { Database } from '../../../lib/db/database';
import { TenantModel } from '../../../lib/db/models/tenant';
import type { SingleUseStore } from '../../../lib/db/single-use';
import type { JobDefinition } from '../../../lib/jobs';
import type { SessionsOptions } from '../options';

export const SESSION_MAINTENANCE_JOB = 'session.maintenance';

/** Rows per statement: a large backlog is worked off in short statements that never hold the table for long. */
export const MAINTENANCE_BATCH_SIZE = 1000;

export interface MaintenanceDeps {
    db: Database;
    singleUse: SingleUseStore;
    /** SESSION_TTL and SESSION_CLEANUP_MODE: the defaults of tenants without a session configuration. */
    sessions: Pick<SessionsOptions, 'ttl' | 'cleanupMode'>;
}

export interface MaintenanceResult {
    /** Sessions moved to expired. */
    expired: number;
    /** Sessions past retention removed (full mode). */
    deleted: number;
    /** Sessions past retention stripped of personal data, claims, credentials and handles (anonymize mode). */
    anonymized: number;
    /** Expired single-use values removed. */
    singleUsePruned: number;
}

/**
 * What an anonymized session keeps: id, tenant, type, status, the configuration ids, the caller's reference (spec
 * 2.7: plaintext, never personal data), failure code and reason (display-safe), counters and timestamps. Everything
 * else goes: the sealed `data` column (claims, credentials, outcome, offer with its code, transaction data), and the
 * handles a wallet or caller could still use or correlate: offer id, code and access token hashes, wallet nonce,
 * response code.
 */
const ANONYMIZED = {
    data: null,
    offerId: null,
    codeHash: null,
    accessTokenHash: null,
    accessTokenExpiresAt: null,
    walletNonce: null,
    responseCode: null
} as const;

/** Runs `step` until it handles fewer rows than a batch; the total of the rows handled. */
const inBatches = async (step: () => Promise<number>): Promise<number> => {
    let total = 0;
    for (;;) {
        const n = await step();
        total += n;
        if (n < MAINTENANCE_BATCH_SIZE) {
            return total;
        }
    }
};

/**
 * (a) Spec 3.1: an overdue presentation session (active or fetched) and an issuance offer not redeemed before its
 * expiresAt become expired. A redeemed offer (code_used_at set) never expires: the wallet may keep requesting
 * credentials. One conditional update per batch, so a wallet finishing the session at the same moment wins or
 * loses cleanly; no webhook is sent (spec 6.2), and event streams see the change through their poll.
 */
const expireOverdue = (db: Database, now: string): Promise<number> => {
    const overdue = (q: Knex.QueryBuilder) => q
        .whereNotNull('expiresAt')
        .where('expiresAt', '<=', now)
        .where((w) => w
            .where((p) => p.where('type', 'presentation').whereIn('status', ['active', 'fetched']))
            .orWhere((i) => i.where('type', 'issuance').where('status', 'active').whereNull('codeUsedAt')));
    return inBatches(async () => {
        const ids = (await overdue(db.knex('sessions').select('id')).limit(MAINTENANCE_BATCH_SIZE)).map((r: { id: string }) => r.id);
        if (!ids.length) {
            return 0;
        }
        // The conditions again in the update: a row that changed since the select is left alone.
        await overdue(db.knex('sessions').whereIn('id', ids)).update({ status: 'expired', updatedAt: now });
        return ids.length;
    });
};

/** (b) full: sessions of the tenant created before the cutoff are deleted (their flow logs go with them, by cascade). */
const deleteOld = (db: Database, tenantId: string, cutoff: string): Promise<number> => inBatches(async () => {
    const ids = (await db.knex('sessions').select('id').where('tenantId', tenantId).where('createdAt', '<', cutoff).limit(MAINTENANCE_BATCH_SIZE))
        .map((r: { id: string }) => r.id);
    if (!ids.length) {
        return 0;
    }
    await db.knex('sessions').whereIn('id', ids).delete();
    return ids.length;
});

/** (b) anonymize: sessions of the tenant created before the cutoff keep their row, without personal data or handles. */
const anonymizeOld = (db: Database, tenantId: string, cutoff: string): Promise<number> => inBatches(async () => {
    const ids = (await db.knex('sessions').select('id')
        .where('tenantId', tenantId)
        .where('createdAt', '<', cutoff)
        // Rows already anonymized are skipped, so each run only touches new ones and the loop ends.
        .where((w) => {
            for (const column of Object.keys(ANONYMIZED)) {
                w.orWhereNotNull(column);
            }
        })
        .limit(MAINTENANCE_BATCH_SIZE)).map((r: { id: string }) => r.id);
    if (!ids.length) {
        return 0;
    }
    await db.knex('sessions').whereIn('id', ids).update({ ...ANONYMIZED });
    // Session flow logs may hold request and response bodies (LOG_SESSION_STORE=verbose): personal data too.
    await db.knex('session_logs').whereIn('sessionId', ids).delete();
    return ids.length;
});

/**
 * One maintenance run: expiry, retention (per tenant: sessionConfig.ttlSeconds and cleanupMode, else SESSION_TTL
 * and SESSION_CLEANUP_MODE; retention counts from createdAt), and pruning of expired single-use values.
 */
export const runSessionMaintenance = async (deps: MaintenanceDeps, options: { now?: Date } = {}): Promise<MaintenanceResult> => {
    const { db, singleUse, sessions } = deps;
    const now = options.now ?? new Date();
    const expired = await expireOverdue(db, now.toISOString());

    let deleted = 0;
    let anonymized = 0;
    const tenants = await db.model(TenantModel).query().select('id', 'sessionConfig');
    for (const tenant of tenants) {
        const ttl = tenant.sessionConfig?.ttlSeconds ?? sessions.ttl;
        const mode = tenant.sessionConfig?.cleanupMode ?? sessions.cleanupMode;
        const cutoff = new Date(now.getTime() - ttl * 1000).toISOString();
        if (mode === 'anonymize') {
            anonymized += await anonymizeOld(db, tenant.id, cutoff);
        }
        else {
            deleted += await deleteOld(db, tenant.id, cutoff);
        }
    }

    const singleUsePruned = await singleUse.prune();
    return { expired, deleted, anonymized, singleUsePruned };
};

/** The session maintenance job, every SESSION_TIDY_UP_INTERVAL seconds (once across replicas on PostgreSQL). */
export const sessionMaintenanceJob = (deps: MaintenanceDeps & { tidyUpInterval: number }): JobDefinition => ({
    name: SESSION_MAINTENANCE_JOB,
    schedule: { everySeconds: deps.tidyUpInterval },
    async run({ log }) {
        const started = Date.now();
        const result = await runSessionMaintenance(deps);
        const changed = result.expired + result.deleted + result.anonymized + result.singleUsePruned > 0;
        log[changed ? 'info' : 'debug']({ ...result, ms: Date.now() - started }, 'session maintenance done');
    }
});
