import { BaseModel } from '../model';

export class AuditLogModel extends BaseModel {
    static override tableName = 'audit_logs';
    static override jsonColumns = ['changes'];

    id!: number;
    tenantId!: string | null;
    actor!: string;
    action!: 'create' | 'update' | 'delete' | string;
    kind!: string;
    resourceId!: string | null;
    changes!: unknown;
    createdAt!: string;
}
