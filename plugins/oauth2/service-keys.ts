import Crypto from 'node:crypto';
import * as Jose from 'jose';
import type { Database } from '../../lib/db/database';
import { ServiceKeyModel } from '../../lib/db/models/service-key';

interface SigningKey {
    kid: string;
    key: Crypto.KeyObject;
}

/**
 * ES256 keys of the integrated OAuth2 server. One active key signs; retired keys stay published (and accepted)
 * until every token they signed has expired. Private keys are sealed with the column cipher.
 */
export class ServiceKeys {
    private active?: SigningKey;
    private readonly verifying = new Map<string, Crypto.KeyObject>();
    private lastReload = 0;

    constructor(private readonly db: Database, private readonly tokenTtlSeconds: number) {}

    /** Loads the active key, creating the first one on a new database. */
    async init(): Promise<void> {
        await this.reload();
        if (!this.active) {
            await this.rotate();
        }
    }

    signingKey(): SigningKey {
        if (!this.active) {
            throw new Error('Service keys are not initialised');
        }
        return this.active;
    }

    /** A new active key; the previous one is retired and kept until its tokens expire. */
    async rotate(): Promise<string> {
        const { privateKey, publicKey } = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
        const publicJwk = publicKey.export({ format: 'jwk' });
        const kid = await Jose.calculateJwkThumbprint(publicJwk as Jose.JWK);
        const now = new Date().toISOString();
        const Keys = this.db.model(ServiceKeyModel);
        await this.db.transaction(async (trx) => {
            await Keys.query(trx).whereNull('retiredAt').patch({ retiredAt: now });
            await Keys.query(trx).insert({
                kid,
                privateJwk: JSON.stringify(privateKey.export({ format: 'jwk' })),
                publicJwk: { ...publicJwk, kid, alg: 'ES256', use: 'sig' },
                createdAt: now,
                retiredAt: null
            });
        });
        await this.reload();
        return kid;
    }

    /** Public keys still able to verify a live token. */
    async publicJwks(): Promise<{ keys: Jose.JWK[] }> {
        const rows = await this.liveKeys();
        return { keys: rows.map((r) => r.publicJwk as Jose.JWK) };
    }

    /** The verification key for a kid; reloads at most once a second to pick up keys rotated by other replicas. */
    async verificationKey(kid: string | undefined): Promise<Crypto.KeyObject | undefined> {
        if (!kid) {
            return undefined;
        }
        const known = this.verifying.get(kid);
        if (known || Date.now() - this.lastReload < 1000) {
            return known;
        }
        await this.reload();
        return this.verifying.get(kid);
    }

    private async liveKeys(): Promise<ServiceKeyModel[]> {
        const cutoff = new Date(Date.now() - this.tokenTtlSeconds * 1000).toISOString();
        return this.db.model(ServiceKeyModel).query()
            .where((q) => q.whereNull('retiredAt').orWhere('retiredAt', '>', cutoff))
            .orderBy('createdAt', 'desc');
    }

    private async reload(): Promise<void> {
        this.lastReload = Date.now();
        const rows = await this.liveKeys();
        this.verifying.clear();
        for (const row of rows) {
            this.verifying.set(row.kid, Crypto.createPublicKey({ key: row.publicJwk as Crypto.JsonWebKey, format: 'jwk' }));
        }
        const active = rows.find((r) => !r.retiredAt);
        this.active = active
            ? { kid: active.kid, key: Crypto.createPrivateKey({ key: JSON.parse(active.privateJwk), format: 'jwk' }) }
            : undefined;
    }
}
