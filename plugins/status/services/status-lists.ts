import Crypto from 'node:crypto';
import Zlib from 'node:zlib';
import type { Database } from '../../../lib/db/database';
import { ConflictError, UnavailableError } from '../../../lib/errors';
import { tenantOf, type ResourceStore, type StoredResource, type TenantContext } from '../../../lib/registry/kind';
import type { Registry } from '../../../lib/registry/registry';
import { tableResourceStore } from '../../../lib/registry/resource-store';
import { keyChainKind } from '../../../resources/key-chain';
import { statusListKind, type StatusList } from '../../../resources/status-list';
import { tenantKind } from '../../../resources/tenant';
import type { SigningService } from '../../kms/services/signing';
import { StatusListStateModel } from '../models';

/** Token ttl when the tenant sets no statusListConfig. */
export const DEFAULT_TTL_SECONDS = 3600;

export const systemContext = (tenantId: string): TenantContext => ({ tenantId, clientId: 'system:status', roles: [] });

/** Bytes holding `capacity` entries of `bits` bits. */
const entryBytes = (bits: number, capacity: number) => Math.ceil((bits * capacity) / 8);

/** The list's configuration is an ordinary document; its entries live beside it, made with it and gone with it. */
export const statusListStore: ResourceStore<StatusList> = {
    get: tableResourceStore.get,
    list: tableResourceStore.list,
    async put(scope, id, resource, existing) {
        await tableResourceStore.put(scope, id, resource, existing);
        if (!existing) {
            const { bits, capacity } = resource.spec;
            await scope.trx(StatusListStateModel.tableName).insert({
                tenantId: tenantOf(scope),
                listId: id,
                entries: Buffer.alloc(entryBytes(bits, capacity)),
                allocated: Buffer.alloc(Math.ceil(capacity / 8)),
                used: 0,
                createdAt: new Date().toISOString()
            });
        }
    },
    async delete(scope, id) {
        const state = scope.trx(StatusListStateModel.tableName).where({ tenantId: tenantOf(scope), listId: id });
        const row = await state.clone().first('used');
        if (row && row.used > 0) {
            throw new ConflictError(`Status list ${id} has ${row.used} allocated entries`);
        }
        await state.clone().delete();
        await tableResourceStore.delete(scope, id);
    }
};

export interface StatusListView {
    id: string;
    uri: string;
    bits: number;
    capacity: number;
    used: number;
    credentialConfigurationId?: string;
    keyChainId?: string;
    createdAt: string;
}

export interface StatusListToken {
    jwt: string;
    etag: string;
    ttl: number;
}

export interface StatusListDeps {
    db: Database;
    registry: Registry;
    signing: SigningService;
    publicUrl: string;
}

/** Status lists of a tenant: their URIs, signing chains, and the signed token (IETF Token Status List, JWT form). */
export class StatusListService {
    constructor(private readonly deps: StatusListDeps) {}

    /** `{tenant base}/status-management/status-list/{listId}`: the token's `sub` and what credentials will carry. */
    uri(tenantId: string, listId: string): string {
        return `${this.deps.publicUrl}/issuers/${tenantId}/status-management/status-list/${listId}`;
    }

    /** The chain a list without its own keyChainId is signed with: the tenant's statusList chain, else its attestation chain. */
    async defaultKeyChain(tenantId: string): Promise<string | undefined> {
        const chains = await this.deps.registry.list(systemContext(tenantId), keyChainKind);
        return (chains.find((c) => c.spec.usageType === 'statusList') ?? chains.find((c) => c.spec.usageType === 'attestation'))?.spec.id;
    }

    /** Layout defaults of new lists: the tenant's statusListConfig. */
    async tenantDefaults(tenantId: string): Promise<{ bits: StatusList['bits']; capacity: number; ttlSeconds: number }> {
        const config = (await this.deps.registry.get(systemContext(tenantId), tenantKind, tenantId))?.spec.statusListConfig;
        return { bits: config?.bits ?? 1, capacity: config?.capacity ?? 100_000, ttlSeconds: config?.ttlSeconds ?? DEFAULT_TTL_SECONDS };
    }

    private async state(tenantId: string, listId: string): Promise<StatusListStateModel | undefined> {
        return await this.deps.db.model(StatusListStateModel).query().findById([tenantId, listId]);
    }

    async view(tenantId: string, stored: StoredResource<StatusList>): Promise<StatusListView> {
        const { spec } = stored;
        const keyChainId = spec.keyChainId ?? await this.defaultKeyChain(tenantId);
        return {
            id: spec.id,
            uri: this.uri(tenantId, spec.id),
            bits: spec.bits,
            capacity: spec.capacity,
            used: (await this.state(tenantId, spec.id))?.used ?? 0,
            ...(spec.credentialConfigurationId ? { credentialConfigurationId: spec.credentialConfigurationId } : {}),
            ...(keyChainId ? { keyChainId } : {}),
            createdAt: stored.createdAt
        };
    }

    /**
     * The list's signed token, or undefined for an unknown list. A token is kept and served until it is due (ttl
     * after signing); it stays valid for another ttl, so a relying party caching it for max-age never holds an
     * expired one.
     */
    async token(tenantId: string, listId: string): Promise<StatusListToken | undefined> {
        const list = await this.deps.registry.get(systemContext(tenantId), statusListKind, listId);
        // The entries (up to megabytes) are read only to sign.
        const cached = list && await this.deps.db.model(StatusListStateModel).query().findById([tenantId, listId]).select('token', 'tokenEtag', 'tokenRefreshAt');
        if (!list || !cached) {
            return undefined;
        }
        const { ttlSeconds: ttl } = await this.tenantDefaults(tenantId);
        if (cached.token && cached.tokenEtag && cached.tokenRefreshAt && Date.parse(cached.tokenRefreshAt) > Date.now()) {
            return { jwt: cached.token, etag: cached.tokenEtag, ttl };
        }
        const state = (await this.state(tenantId, listId))!;
        const keyChainId = list.spec.keyChainId ?? await this.defaultKeyChain(tenantId);
        if (!keyChainId) {
            throw new UnavailableError(`Status list ${listId} has no keyChainId and the tenant has no statusList or attestation key chain`);
        }
        const iat = Math.floor(Date.now() / 1000);
        const jwt = await this.deps.signing.jws(tenantId, keyChainId, {
            header: { typ: 'statuslist+jwt' },
            payload: {
                sub: this.uri(tenantId, listId),
                iat,
                exp: iat + 2 * ttl,
                ttl,
                status_list: { bits: list.spec.bits, lst: Zlib.deflateSync(state.entries).toString('base64url') }
            }
        });
        const etag = Crypto.createHash('sha256').update(jwt).digest('base64url').slice(0, 32);
        await this.deps.db.model(StatusListStateModel).query().findById([tenantId, listId])
            .patch({ token: jwt, tokenEtag: etag, tokenRefreshAt: new Date((iat + ttl) * 1000).toISOString() });
        return { jwt, etag, ttl };
    }
}
