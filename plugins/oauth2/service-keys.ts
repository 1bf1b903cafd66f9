import Crypto from 'node:crypto';
import * as Jose from 'jose';
import type { Database } from '../../lib/db/database';
import { ServiceKeyModel } from './models/service-key';

const REFRESH_MS = 30_000;

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
    private lastMissReload = 0;

    constructor(private readonly db: Database, private readonly tokenTtlSeconds: number) {}

    /** Loads the active key, creating the first one on a new database. */
    async init(): Promise<void> {
        this.lastReload = Date.now();
        await this.reload();
        if (!this.active) {
            await this.rotate();
        }
    }

    /** The active key. A rotation by another process is picked up within REFRESH_MS, without blocking a request. */
    signingKey(): SigningKey {
        if (!this.active) {
            throw new Error('Service keys are not initialised');
        }
        if (Date.now() - this.lastReload > REFRESH_MS) {
            this.lastReload = Date.now();
            this.reload().catch(() => undefined);
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

    /** The verification key for a kid; an unknown kid reloads (at most once a second) to see other replicas' keys. */
    async verificationKey(kid: string | undefined): Promise<Crypto.KeyObject | undefined> {
        if (!kid) {
            return undefined;
        }
        const known = this.verifying.get(kid);
        if (known || Date.now() - this.lastMissReload < 1000) {
            return known;
        }
        this.lastMissReload = Date.now();
        await this.reload();
        return this.verifying.get(kid);
    }

    private async liveKeys(): Promise<ServiceKeyModel[]> {
        // A process may sign with a key for up to REFRESH_MS after another process retired it.
        const cutoff = new Date(Date.now() - this.tokenTtlSeconds * 1000 - REFRESH_MS).toISOString();
        return this.db.model(ServiceKeyModel).query()
            .where((q) => q.whereNull('retiredAt').orWhere('retiredAt', '>', cutoff))
            .orderBy('createdAt', 'desc');
    }

    private async reload(): Promise<void> {
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
