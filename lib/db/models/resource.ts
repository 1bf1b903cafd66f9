import { BaseModel } from '../model';

/** A configuration document of any registered kind except Tenant. Specs of kinds with secrets are encrypted. */
export class ResourceModel extends BaseModel {
    static override tableName = 'resources';
    static override idColumn = ['tenantId', 'kind', 'id'];
    static override jsonColumns = ['spec'];

    tenantId!: string;
    kind!: string;
    id!: string;
    version!: number;
    spec!: unknown;
    generation!: number;
    ownership!: 'unmanaged' | 'file-managed';
    createdAt!: string;
    updatedAt!: string;
}

export class SealedResourceModel extends ResourceModel {
    static override encryptedColumns = ['spec'];
}
