import Crypto from 'node:crypto';
import Joi from 'joi';
import type { JWK } from 'jose';
import type { Database } from '../../lib/db/database';
import { KmsDbKeyModel } from './model';
import { NotFoundError, ValidationError } from '../../lib/errors';
import type { KeyStore, KmsProviderType, PublicJwk } from '../../lib/kms/types';
import { signOffLoop } from '../../lib/crypto/thread-pool';

/** The db provider has no options of its own. */
export type DbKmsOptions = Record<string, never>;

const publicPart = (jwk: JWK): PublicJwk => ({ kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y });

/**
 * Private keys in the service's own database, sealed with the column encryption. Signing happens in-process with
 * a cached KeyObject, so it runs at node:crypto speed. The default provider of every tenant.
 */
class DbKeyStore implements KeyStore {
    private readonly cache = new Map<string, Crypto.KeyObject>();

    constructor(private readonly db: Database, private readonly tenantId: string) {}

    private get keys() {
        return this.db.model(KmsDbKeyModel);
    }

    /** Inside a write (a key chain being created), join its transaction. */
    private query() {
        return this.keys.query(this.db.ambient());
    }

    async create(kid: string): Promise<PublicJwk> {
        const { privateKey } = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
        return this.store(kid, privateKey);
    }

    async import(kid: string, privateJwk: JWK): Promise<PublicJwk> {
        let key: Crypto.KeyObject;
        try {
            key = Crypto.createPrivateKey({ key: privateJwk as Crypto.JsonWebKey, format: 'jwk' });
        }
        catch {
            throw new ValidationError('privateJwk is not a valid private key', [{ path: 'privateJwk', message: 'must be a private JWK' }]);
        }
        if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
            throw new ValidationError('privateJwk must be an EC P-256 key', [{ path: 'privateJwk', message: 'must be an EC P-256 key for ES256' }]);
        }
        return this.store(kid, key);
    }

    private async store(kid: string, key: Crypto.KeyObject): Promise<PublicJwk> {
        const jwk = key.export({ format: 'jwk' }) as JWK;
        const publicJwk = publicPart(jwk);
        await this.query().insert({ tenantId: this.tenantId, kid, privateJwk: JSON.stringify(jwk), publicJwk, createdAt: new Date().toISOString() });
        this.cache.set(kid, key);
        return publicJwk;
    }

    private async privateKey(kid: string): Promise<Crypto.KeyObject> {
        let key = this.cache.get(kid);
        if (!key) {
            const row = await this.query().findById([this.tenantId, kid]);
            if (!row) {
                throw new NotFoundError(`Key ${kid} not found in the db provider`);
            }
            key = Crypto.createPrivateKey({ key: JSON.parse(row.privateJwk), format: 'jwk' });
            this.cache.set(kid, key);
        }
        return key;
    }

    async sign(kid: string, data: Uint8Array): Promise<Uint8Array> {
        return signOffLoop('sha256', data, { key: await this.privateKey(kid), dsaEncoding: 'ieee-p1363' });
    }

    async publicJwk(kid: string): Promise<PublicJwk> {
        return publicPart((await this.privateKey(kid)).export({ format: 'jwk' }) as JWK);
    }

    async delete(kid: string): Promise<void> {
        this.cache.delete(kid);
        await this.query().deleteById([this.tenantId, kid]);
    }

    async health(): Promise<void> {
        if (!(await this.db.isUp())) {
            throw new Error('database is down');
        }
    }
}

export const dbKmsProvider: KmsProviderType<DbKmsOptions> = {
    type: 'db',
    optionsSchema: Joi.object({}),
    secretPaths: [],
    async open(_options, ctx) {
        return new DbKeyStore(ctx.services.db as Database, ctx.tenantId);
    }
};
