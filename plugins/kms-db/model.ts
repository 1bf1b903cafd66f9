import { BaseModel } from '../../lib/db/model';

/** The db provider's private keys (table made by the kms plugin's migration 0003). */
export class KmsDbKeyModel extends BaseModel {
    static override tableName = 'kms_db_keys';
    static override idColumn = ['tenantId', 'kid'];
    static override jsonColumns = ['publicJwk'];
    static override encryptedColumns = ['privateJwk'];

    tenantId!: string;
    kid!: string;
    privateJwk!: string;
    publicJwk!: Record<string, unknown>;
    createdAt!: string;
}
