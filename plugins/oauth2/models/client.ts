import { BaseModel } from '../../../lib/db/model';

export class ClientModel extends BaseModel {
    static override tableName = 'clients';
    static override idColumn = 'clientId';
    static override jsonColumns = ['roles', 'allowedPresentationConfigs', 'allowedIssuanceConfigs'];

    clientId!: string;
    tenantId!: string | null;
    description!: string | null;
    roles!: string[];
    allowedPresentationConfigs!: string[] | null;
    allowedIssuanceConfigs!: string[] | null;
    secretHash!: string;
    generation!: number;
    ownership!: 'unmanaged' | 'file-managed';
    createdAt!: string;
    updatedAt!: string;
}
