import { BaseModel } from '../model';

export class TenantModel extends BaseModel {
    static override tableName = 'tenants';
    static override jsonColumns = ['sessionConfig', 'statusListConfig'];

    id!: string;
    name!: string;
    description!: string | null;
    sessionConfig!: { ttlSeconds: number; cleanupMode: 'full' | 'anonymize' } | null;
    statusListConfig!: { bits: 1 | 2 | 4 | 8; capacity: number; ttlSeconds: number; immediateUpdate: boolean } | null;
    generation!: number;
    ownership!: 'unmanaged' | 'file-managed';
    createdAt!: string;
    updatedAt!: string;
}
