import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { ColumnCipher } from '../../lib/crypto/column-cipher';
import { Database } from '../../lib/db/database';
import { migrateLatest, migrationStatus } from '../../lib/db/migrate';
import { migrations } from '../../migrations';
import { createTestDatabase, DIALECTS } from '../helpers/databases';

export const lab = Lab.script();
const { describe, it } = lab;

for (const dialect of DIALECTS) {
    describe(`migrations (${dialect})`, () => {
        it('apply on an empty database, then report nothing pending', async () => {
            const testDb = await createTestDatabase(dialect);
            const db = Database.open(testDb.config, new ColumnCipher(Crypto.randomBytes(32)));
            try {
                expect((await migrationStatus(db.knex)).pending).to.equal(migrations.map((m) => m.name));
                expect(await migrateLatest(db.knex)).to.equal(migrations.map((m) => m.name));
                expect(await migrateLatest(db.knex)).to.equal([]);
                expect(await migrationStatus(db.knex)).to.equal({ completed: migrations.map((m) => m.name), pending: [] });
            }
            finally {
                await db.close();
                await testDb.drop();
            }
        });
    });
}

if (DIALECTS.includes('postgres')) {
    describe('migrations with several replicas starting at once (postgres)', () => {
        it('run one at a time: every migration is applied exactly once', async () => {
            const testDb = await createTestDatabase('postgres');
            const replicas = Array.from({ length: 4 }, () => Database.open(testDb.config, new ColumnCipher(Crypto.randomBytes(32))));
            try {
                const results = await Promise.all(replicas.map((r) => migrateLatest(r.knex)));
                expect(results.flat().sort()).to.equal(migrations.map((m) => m.name).sort());
                const rows = await replicas[0]!.knex('knex_migrations').select('name');
                expect(rows.length).to.equal(migrations.length);
            }
            finally {
                await Promise.all(replicas.map((r) => r.close()));
                await testDb.drop();
            }
        });
    });
}
