import type Hapi from '@hapi/hapi';
import { httpKmsProvider } from './provider';

/** Registers the http KMS provider: keys held by an external service speaking the spec 2.5 HTTP protocol. */
export const plugin: Hapi.Plugin<Record<string, never>> = {
    name: 'hallmark-kms-http',
    dependencies: ['hallmark-kms'],
    register(server) {
        server.registerKmsProvider(httpKmsProvider);
    }
};
