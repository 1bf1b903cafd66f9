import { BaseModel } from '../../lib/db/model';

export type OperationType = 'export' | 'import' | 'detach';
export type OperationStatus = 'running' | 'succeeded' | 'failed' | 'interrupted';

export class BundleOperationModel extends BaseModel {
    static override tableName = 'config_bundle_operations';
    static override jsonColumns = ['summary'];

    id!: string;
    tenantId!: string;
    type!: OperationType;
    mode!: string | null;
    status!: OperationStatus;
    actor!: string;
    startedAt!: string;
    finishedAt!: string | null;
    summary!: Record<string, unknown> | null;
    workerHost!: string | null;
    workerPid!: number | null;
}

export class BundleLockModel extends BaseModel {
    static override tableName = 'config_bundle_locks';
    static override idColumn = 'tenantId';

    tenantId!: string;
    operationId!: string;
    acquiredAt!: string;
}

export class BundleSourceModel extends BaseModel {
    static override tableName = 'config_bundle_sources';
    static override idColumn = ['tenantId', 'kind', 'resourceId'];

    tenantId!: string;
    kind!: string;
    resourceId!: string;
    source!: string;
}
