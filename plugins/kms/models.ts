import { BaseModel } from '../../lib/db/model';

export interface PreviousKey {
    kmsProvider: string;
    keyRef: string;
    publicJwk: Record<string, unknown>;
    certificateChain: string[];
    retiredAt: string;
}

export class KeyChainKeyModel extends BaseModel {
    static override tableName = 'key_chain_keys';
    static override idColumn = ['tenantId', 'keyChainId'];
    static override jsonColumns = ['publicJwk', 'certificateChain', 'previousKeys'];

    tenantId!: string;
    keyChainId!: string;
    kmsProvider!: string;
    keyRef!: string;
    publicJwk!: Record<string, unknown>;
    certificateChain!: string[];
    rootCertificate!: string | null;
    previousKeys!: PreviousKey[];
    rotatedAt!: string;
}

export class TenantCaModel extends BaseModel {
    static override tableName = 'tenant_cas';
    static override idColumn = 'tenantId';

    tenantId!: string;
    kmsProvider!: string;
    keyRef!: string;
    certificate!: string;
    createdAt!: string;
}
