import { BaseModel } from '../../../lib/db/model';

export type SessionType = 'issuance' | 'presentation';
export type SessionStatus = 'active' | 'fetched' | 'completed' | 'failed' | 'expired';
export const TERMINAL_STATUSES: SessionStatus[] = ['completed', 'failed', 'expired'];

export class SessionModel extends BaseModel {
    static override tableName = 'sessions';
    static override jsonColumns = ['credentialConfigurationIds', 'data'];
    static override encryptedColumns = ['data'];

    id!: string;
    tenantId!: string;
    type!: SessionType;
    status!: SessionStatus;
    requestId!: string | null;
    credentialConfigurationIds!: string[] | null;
    reference!: string | null;
    walletNonce!: string | null;
    offerId!: string | null;
    codeHash!: string | null;
    accessTokenHash!: string | null;
    offerFetchedAt!: string | null;
    codeUsedAt!: string | null;
    txCodeFailures!: number;
    accessTokenExpiresAt!: string | null;
    failureCode!: string | null;
    errorReason!: string | null;
    responseCode!: string | null;
    consumedAt!: string | null;
    expiresAt!: string | null;
    /** Protocol state and personal data, sealed; each flow keeps its own shape here. */
    data!: Record<string, unknown> | null;
    createdAt!: string;
    updatedAt!: string;
}
