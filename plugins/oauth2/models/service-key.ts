import { BaseModel } from '../../../lib/db/model';

export class ServiceKeyModel extends BaseModel {
    static override tableName = 'service_keys';
    static override idColumn = 'kid';
    static override jsonColumns = ['publicJwk'];
    static override encryptedColumns = ['privateJwk'];

    kid!: string;
    privateJwk!: string;
    publicJwk!: Record<string, unknown>;
    createdAt!: string;
    retiredAt!: string | null;
}
