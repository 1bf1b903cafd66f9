import Joi from 'joi';
import type { SessionType } from './models/session';
import type { Session } from './services/session-service';

export const SESSION_READ_ROLES: Record<SessionType, string[]> = {
    issuance: ['issuance:offer', 'issuance:config'],
    presentation: ['presentation:request', 'presentation:config']
};

/** Session types a caller's roles may see (tenant:admin expands to all; tenant:read sees all). */
export const visibleTypes = (roles: readonly string[]): SessionType[] =>
    (Object.keys(SESSION_READ_ROLES) as SessionType[]).filter((type) => roles.includes('tenant:read') || SESSION_READ_ROLES[type].some((r) => roles.includes(r)));

export const sessionListItem = Joi.object({
    id: Joi.string().required(),
    type: Joi.string().valid('issuance', 'presentation').required(),
    status: Joi.string().valid('active', 'fetched', 'completed', 'failed', 'expired').required(),
    requestId: Joi.string(),
    credentialConfigurationIds: Joi.array().items(Joi.string()),
    reference: Joi.string(),
    failureCode: Joi.string(),
    createdAt: Joi.string().isoDate().required(),
    updatedAt: Joi.string().isoDate().required(),
    expiresAt: Joi.string().isoDate()
}).label('SessionListItem');

export const sessionDetail = sessionListItem.keys({
    errorReason: Joi.string(),
    responseCode: Joi.string(),
    consumedAt: Joi.string().isoDate(),
    outcome: Joi.object().unknown(true),
    credentials: Joi.array().items(Joi.object().unknown(true)),
    transaction_data: Joi.array().items(Joi.object().unknown(true)),
    notifications: Joi.array().items(Joi.object({ notificationId: Joi.string(), event: Joi.string(), description: Joi.string(), at: Joi.string() }))
}).label('Session');

const present = <T>(value: T | null | undefined): value is T => value !== null && value !== undefined;

export const listItem = (s: Session) => ({
    id: s.id,
    type: s.type,
    status: s.status,
    ...(present(s.requestId) ? { requestId: s.requestId } : {}),
    ...(present(s.credentialConfigurationIds) ? { credentialConfigurationIds: s.credentialConfigurationIds } : {}),
    ...(present(s.reference) ? { reference: s.reference } : {}),
    ...(present(s.failureCode) ? { failureCode: s.failureCode } : {}),
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
    ...(present(s.expiresAt) ? { expiresAt: s.expiresAt } : {})
});

/** The result fields of spec 2.7; issuance claims stay in the sealed data and are never shown. */
export const detail = (s: Session) => {
    const data = (s.data ?? {}) as Record<string, unknown>;
    const result = (data.result ?? {}) as Record<string, unknown>;
    return {
        ...listItem(s),
        ...(present(s.errorReason) ? { errorReason: s.errorReason } : {}),
        ...(present(s.responseCode) ? { responseCode: s.responseCode } : {}),
        ...(present(s.consumedAt) ? { consumedAt: s.consumedAt } : {}),
        ...(result.outcome ? { outcome: result.outcome } : {}),
        ...(result.credentials && s.status === 'completed' ? { credentials: result.credentials } : {}),
        ...(Array.isArray(data.transactionData) ? { transaction_data: (data.transactionData as string[]).map((t) => JSON.parse(Buffer.from(t, 'base64url').toString('utf8'))) } : {}),
        ...(s.type === 'issuance' && Array.isArray(data.events) ? { notifications: data.events } : {})
    };
};
