import Crypto from 'node:crypto';
import type { Database } from '../../../lib/db/database';
import { KeyChainKeyModel, TenantCaModel, type PreviousKey } from '../models';
import { NotFoundError, ValidationError } from '../../../lib/errors';
import { certificatePublicJwk, issueLeafCertificate, issueRootCertificate, parsePem, toPem, type RawSigner } from '../../../lib/kms/certificates';
import { toEcP256PublicJwk } from '../../../lib/kms/jwk';
import type { KeyStore, PublicJwk } from '../../../lib/kms/types';
import { tenantOf, type StoreScope } from '../../../lib/registry/kind';
import type { ExportedKeySource, KeyChain, KeyChainMaterial, KeySource } from '../../../resources/key-chain';
import type { KmsService } from './kms-service';

const ROOT_CA_VALIDITY_DAYS = 3650;

const samePublicKey = (a: Record<string, unknown>, b: Record<string, unknown>) => a.x === b.x && a.y === b.y && a.crv === b.crv;

/**
 * Marks the stored reference to an external key whose id has the shape of a generated one (`kc-<chain>-...`, as an
 * export of a chain names its key): remove() deletes keys by that shape, and a key imported by reference belongs to
 * its owner (the deployment or tenant the export came from), never to the chain that references it.
 */
const EXTERNAL_MARK = 'ext:';

/** The key's name in its provider. */
export const providerKeyRef = (keyRef: string): string => (keyRef.startsWith(EXTERNAL_MARK) ? keyRef.slice(EXTERNAL_MARK.length) : keyRef);

const publicOfPrivate = (privateJwk: Record<string, unknown>): PublicJwk => ({ kty: 'EC', crv: privateJwk.crv as string, x: privateJwk.x as string, y: privateJwk.y as string });

interface NewKey {
    kmsProvider: string;
    keyRef: string;
    publicJwk: PublicJwk;
    certificateChain: string[];
    rootCertificate: string | null;
}

/** Key material of key chains: keys in the tenant's KMS providers, X.509 certificates, the tenant root CA. */
export class KeyChainService implements KeyChainMaterial {
    constructor(private readonly deps: { db: Database; kms: KmsService; publicUrl: string }) {}

    private signer(store: KeyStore, keyRef: string): RawSigner {
        return (data) => store.sign(providerKeyRef(keyRef), data, 'ES256');
    }

    private rows(scope: StoreScope) {
        return this.deps.db.model(KeyChainKeyModel).query(scope.trx);
    }

    /** The tenant's root CA, made on first use with the tenant's default provider. */
    private async tenantCa(scope: StoreScope) {
        const tenantId = tenantOf(scope);
        const Cas = this.deps.db.model(TenantCaModel);
        const existing = await Cas.query(scope.trx).findById(tenantId);
        if (existing) {
            const { store } = await this.deps.kms.provider(tenantId, existing.kmsProvider);
            return { certificate: parsePem(existing.certificate), signer: this.signer(store, existing.keyRef) };
        }
        const { entry, store } = await this.deps.kms.provider(tenantId);
        const keyRef = `root-ca-${Crypto.randomBytes(8).toString('hex')}`;
        const publicJwk = await store.create(keyRef, 'ES256');
        const signer = this.signer(store, keyRef);
        const certificate = await issueRootCertificate({ subject: { commonName: `${tenantId} Hallmark Root CA`, organization: tenantId }, publicJwk, signer, validityDays: ROOT_CA_VALIDITY_DAYS });
        await Cas.query(scope.trx).insert({ tenantId, kmsProvider: entry.id, keyRef, certificate: toPem(certificate), createdAt: new Date().toISOString() });
        return { certificate, signer };
    }

    private defaultSan(): string[] {
        return [new URL(this.deps.publicUrl).hostname];
    }

    /** Splits a given chain into the chain credentials carry (leaf first) and a trailing self-signed root. */
    private async givenChain(chain: string[], publicJwk: PublicJwk): Promise<{ certificateChain: string[]; rootCertificate: string | null }> {
        const leafKey = await certificatePublicJwk(chain[0]!).catch(() => {
            throw new ValidationError('certificateChain[0] is not a valid certificate', [{ path: 'certificateChain.0', message: 'is not a valid certificate' }]);
        });
        if (!samePublicKey(leafKey as Record<string, unknown>, publicJwk as Record<string, unknown>)) {
            throw new ValidationError('The first certificate does not hold the key chain\'s public key', [{ path: 'certificateChain.0', message: 'must certify the private key' }]);
        }
        const last = parsePem(chain[chain.length - 1]!);
        const selfSigned = chain.length > 1 && last.subject === last.issuer;
        return { certificateChain: selfSigned ? chain.slice(0, -1) : chain, rootCertificate: selfSigned ? chain[chain.length - 1]! : null };
    }

    private async makeKey(scope: StoreScope, spec: KeyChain, keySource: KeySource | undefined): Promise<NewKey> {
        const tenantId = tenantOf(scope);
        let providerId = spec.kmsProvider;
        if (keySource?.type === 'external-reference') {
            providerId = keySource.provider;
        }
        const { entry, store } = await this.deps.kms.provider(tenantId, providerId);
        let keyRef = `kc-${spec.id}-${Crypto.randomBytes(6).toString('hex')}`;
        let publicJwk: PublicJwk;
        let chain: string[] | undefined;
        if (keySource?.type === 'private-jwk') {
            if (!store.import) {
                throw new ValidationError(`KMS provider ${entry.id} cannot import private keys`, [{ path: 'keySource', message: `provider ${entry.id} cannot import keys` }]);
            }
            publicJwk = await store.import(keyRef, keySource.privateJwk, 'ES256');
            if (!samePublicKey(publicJwk as Record<string, unknown>, publicOfPrivate(keySource.privateJwk) as Record<string, unknown>)) {
                throw new ValidationError('The provider stored another key than the one given');
            }
            chain = keySource.certificateChain;
        }
        else if (keySource?.type === 'external-reference') {
            // Providers of the global kms.json are shared by every tenant: a key there could be another tenant's.
            if (!(await this.deps.kms.isTenantProvider(tenantId, entry.id))) {
                throw new ValidationError(`External keys can be referenced only in the tenant's own KMS providers, not in the shared provider ${entry.id}`, [{ path: 'keySource.provider', message: 'must be a provider of the tenant\'s own kms.json' }]);
            }
            keyRef = keySource.externalKeyId.startsWith('kc-') ? `${EXTERNAL_MARK}${keySource.externalKeyId}` : keySource.externalKeyId;
            if (keyRef.length > 255) {
                throw new ValidationError('keySource.externalKeyId is too long', [{ path: 'keySource.externalKeyId', message: `must be at most ${255 - EXTERNAL_MARK.length} characters when it starts with kc-` }]);
            }
            publicJwk = await this.provePossession(store, entry.id, keySource.externalKeyId, keySource.publicJwk);
            chain = keySource.certificateChain;
        }
        else {
            publicJwk = await store.create(keyRef, 'ES256');
        }

        if (chain) {
            return { kmsProvider: entry.id, keyRef, publicJwk, ...await this.givenChain(chain, publicJwk) };
        }
        const subject = spec.subject ?? { commonName: spec.id };
        const sanDns = spec.sanDns ?? this.defaultSan();
        const validityDays = spec.certValidityDays ?? 365;
        if ((spec.type ?? 'internalChain') === 'standalone') {
            const leaf = await issueLeafCertificate({ subject, sanDns, publicJwk, validityDays, selfSigner: this.signer(store, keyRef) });
            return { kmsProvider: entry.id, keyRef, publicJwk, certificateChain: [toPem(leaf)], rootCertificate: null };
        }
        const ca = await this.tenantCa(scope);
        const leaf = await issueLeafCertificate({ subject, sanDns, publicJwk, validityDays, issuer: ca });
        return { kmsProvider: entry.id, keyRef, publicJwk, certificateChain: [toPem(leaf)], rootCertificate: toPem(ca.certificate) };
    }

    /** An external key is accepted only when the provider signs a fresh challenge that the stated public key verifies. */
    private async provePossession(store: KeyStore, providerId: string, keyRef: string, stated: Record<string, unknown>): Promise<PublicJwk> {
        let key: Crypto.KeyObject;
        try {
            key = Crypto.createPublicKey({ key: toEcP256PublicJwk(stated) as Crypto.JsonWebKey, format: 'jwk' });
        }
        catch (err) {
            throw new ValidationError(`keySource.publicJwk: ${(err as Error).message}`, [{ path: 'keySource.publicJwk', message: (err as Error).message }]);
        }
        const challenge = Crypto.randomBytes(32);
        const signature = await store.sign(keyRef, challenge, 'ES256');
        if (!Crypto.verify('sha256', challenge, { key, dsaEncoding: 'ieee-p1363' }, signature)) {
            throw new ValidationError(`Key ${keyRef} of provider ${providerId} does not match the stated public key`, [{ path: 'keySource.publicJwk', message: 'does not match the key in the provider' }]);
        }
        return { kty: 'EC', crv: stated.crv as string, x: stated.x as string, y: stated.y as string };
    }

    async create(scope: StoreScope, spec: KeyChain, keySource: KeySource | undefined): Promise<void> {
        const key = await this.makeKey(scope, spec, keySource);
        await this.rows(scope).insert({ tenantId: tenantOf(scope), keyChainId: spec.id, ...key, previousKeys: [], rotatedAt: new Date().toISOString() });
    }

    /** A new key (and certificate); the previous one stays listed for verification. */
    async replace(scope: StoreScope, spec: KeyChain, keySource: KeySource): Promise<void> {
        const current = await this.rows(scope).findById([tenantOf(scope), spec.id]);
        if (!current) {
            return this.create(scope, spec, keySource);
        }
        const key = await this.makeKey(scope, spec, keySource.type === 'regenerate' ? undefined : keySource);
        const previous: PreviousKey = {
            kmsProvider: current.kmsProvider,
            keyRef: current.keyRef,
            publicJwk: current.publicJwk,
            certificateChain: current.certificateChain,
            retiredAt: new Date().toISOString()
        };
        await this.rows(scope).findById([tenantOf(scope), spec.id]).patch({ ...key, previousKeys: [previous, ...current.previousKeys], rotatedAt: new Date().toISOString() });
    }

    async holds(scope: StoreScope, id: string, keySource: KeySource): Promise<boolean> {
        const current = await this.rows(scope).findById([tenantOf(scope), id]);
        if (!current) {
            return false;
        }
        if (keySource.type === 'private-jwk') {
            return samePublicKey(current.publicJwk, keySource.privateJwk);
        }
        if (keySource.type === 'external-reference') {
            return current.kmsProvider === keySource.provider && providerKeyRef(current.keyRef) === keySource.externalKeyId;
        }
        return keySource.type === 'generate';
    }

    async exportKeySource(scope: StoreScope, id: string): Promise<ExportedKeySource> {
        const tenantId = tenantOf(scope);
        const current = await this.rows(scope).findById([tenantId, id]);
        if (!current) {
            throw new NotFoundError(`Key chain ${id} has no key material`);
        }
        const provider = (await this.deps.kms.effectiveConfig(tenantId)).providers.find((p) => p.id === current.kmsProvider);
        if (provider?.type === 'db') {
            return { type: 'required', publicJwk: current.publicJwk };
        }
        return { type: 'external-reference', provider: current.kmsProvider, externalKeyId: providerKeyRef(current.keyRef), publicJwk: current.publicJwk };
    }

    async remove(scope: StoreScope, id: string): Promise<void> {
        const tenantId = tenantOf(scope);
        const current = await this.rows(scope).findById([tenantId, id]);
        if (!current) {
            return;
        }
        await this.rows(scope).deleteById([tenantId, id]);
        // Keys referenced from outside (external-reference) belong to their owner; generated ones go with the chain.
        for (const key of [current, ...current.previousKeys]) {
            if (!key.keyRef.startsWith(`kc-${id}-`)) {
                continue;
            }
            const { store } = await this.deps.kms.provider(tenantId, key.kmsProvider);
            await store.delete(key.keyRef);
        }
    }

    async material(tenantId: string, id: string): Promise<KeyChainKeyModel> {
        const row = await this.deps.db.model(KeyChainKeyModel).query(this.deps.db.ambient()).findById([tenantId, id]);
        if (!row) {
            throw new NotFoundError(`Key chain ${id} not found`);
        }
        return row;
    }
}
