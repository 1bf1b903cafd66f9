import { BaseModel } from '../../lib/db/model';

export class StatusListStateModel extends BaseModel {
    static override tableName = 'status_list_states';
    static override idColumn = ['tenantId', 'listId'];

    tenantId!: string;
    listId!: string;
    entries!: Buffer;
    allocated!: Buffer;
    used!: number;
    token!: string | null;
    tokenEtag!: string | null;
    tokenRefreshAt!: string | null;
    entriesVersion!: number;
    tokenVersion!: number | null;
    createdAt!: string;
}

export class StatusAllocationModel extends BaseModel {
    static override tableName = 'status_allocations';
    static override idColumn = ['tenantId', 'listId', 'idx'];

    tenantId!: string;
    listId!: string;
    idx!: number;
    sessionId!: string | null;
    credentialConfigurationId!: string;
    subjectHash!: string | null;
    createdAt!: string;
}
