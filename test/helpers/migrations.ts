import Pino from 'pino';
import { createServer } from '../../lib/compose';
import type { Migration } from '../../lib/db/migrate';
import { loadConfig } from '../../manifests/environment';
import { manifest as defaultManifest } from '../../manifests/default';
import { createTestDatabase } from './databases';
import { testEnv, type TestManifest } from './server';

/**
 * The migrations a manifest's plugins register (default: the full default manifest), in the order core runs them.
 * The manifest is composed but never started, so no database is touched.
 */
export const manifestMigrations = async (manifest?: TestManifest): Promise<Migration[]> => {
    const database = await createTestDatabase('sqlite');
    try {
        const config = loadConfig(testEnv(database));
        const composed = typeof manifest === 'function' ? manifest(config) : manifest ?? defaultManifest(config);
        const server = await createServer(composed, { logger: Pino({ level: 'silent' }) });
        try {
            return server.migrations();
        }
        finally {
            await server.stop();
        }
    }
    finally {
        await database.drop();
    }
};
