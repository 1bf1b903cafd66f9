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
    createdAt!: string;
}
