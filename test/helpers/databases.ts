import Crypto from 'node:crypto';
import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import Knex from 'knex';
import type { DatabaseConfig } from '../../lib/db/config';
import { ColumnCipher } from '../../lib/crypto/column-cipher';
import { Database } from '../../lib/db/database';

/**
 * Every database test runs on both dialects. Each call makes a fresh database (a new SQLite file, or a new
 * PostgreSQL database on 127.0.0.1:5432) that its `drop()` removes, so test files and concurrent runs never collide.
 */

export type DialectName = 'sqlite' | 'postgres';

export const DIALECTS: DialectName[] = (process.env.HALLMARK_TEST_DIALECTS ?? 'sqlite,postgres')
    .split(',').map((d) => d.trim()).filter((d): d is DialectName => d === 'sqlite' || d === 'postgres');

export const PG = {
    host: process.env.HALLMARK_TEST_PG_HOST ?? '127.0.0.1',
    port: Number(process.env.HALLMARK_TEST_PG_PORT ?? 5432),
    user: process.env.HALLMARK_TEST_PG_USER ?? 'postgres',
    password: process.env.HALLMARK_TEST_PG_PASSWORD ?? 'postgres'
};

export interface TestDatabase {
    dialect: DialectName;
    config: DatabaseConfig;
    /** Environment variables that point the service at this database. */
    env: Record<string, string>;
    folder: string;
    drop(): Promise<void>;
}

const admin = () => Knex({ client: 'pg', connection: { ...PG, database: 'postgres' }, pool: { min: 0, max: 1 } });

export const createTestDatabase = async (dialect: DialectName): Promise<TestDatabase> => {
    const folder = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-test-'));
    if (dialect === 'sqlite') {
        return {
            dialect,
            folder,
            config: { type: 'sqlite', filename: Path.join(folder, 'service.db') },
            env: { DB_TYPE: 'sqlite', FOLDER: folder },
            drop: async () => Fs.rmSync(folder, { recursive: true, force: true })
        };
    }

    const database = `hallmark_test_${process.pid}_${Crypto.randomBytes(4).toString('hex')}`;
    const knex = admin();
    try {
        await knex.raw(`create database "${database}"`);
    }
    finally {
        await knex.destroy();
    }
    return {
        dialect,
        folder,
        config: { type: 'postgres', host: PG.host, port: PG.port, user: PG.user, password: PG.password, database },
        env: {
            DB_TYPE: 'postgres',
            DB_HOST: PG.host,
            DB_PORT: String(PG.port),
            DB_USERNAME: PG.user,
            DB_PASSWORD: PG.password,
            DB_DATABASE: database,
            FOLDER: folder
        },
        drop: async () => {
            const k = admin();
            try {
                await k.raw(`drop database if exists "${database}" with (force)`);
            }
            finally {
                await k.destroy();
            }
            Fs.rmSync(folder, { recursive: true, force: true });
        }
    };
};

/** A database that is never connected (an in-memory SQLite opened lazily): for registries used without storage. */
export const offlineDatabase = (): Database => Database.open({ type: 'sqlite', filename: ':memory:' }, new ColumnCipher(Crypto.randomBytes(32)));
