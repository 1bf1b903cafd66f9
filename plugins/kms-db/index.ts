import type Hapi from '@hapi/hapi';
import { dbKmsProvider } from './provider';

/** Registers the db KMS provider (keys sealed in the service database); the default of every tenant. */
export const plugin: Hapi.Plugin<Record<string, never>> = {
    name: 'hallmark-kms-db',
    dependencies: ['hallmark-kms'],
    register(server) {
        server.registerKmsProvider(dbKmsProvider);
    }
};
