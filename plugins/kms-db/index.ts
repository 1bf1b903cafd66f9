import type Hapi from '@hapi/hapi';
import Joi from 'joi';
import { pluginOptions } from '../../lib/compose';
import { dbKmsProvider } from './provider';

/** Registers the db KMS provider (keys sealed in the service database); the default of every tenant. */
export const plugin: Hapi.Plugin<Record<string, never>> = {
    name: 'hallmark-kms-db',
    dependencies: ['hallmark-kms'],
    register(server, options) {
        pluginOptions('hallmark-kms-db', Joi.object({}), options);
        server.registerKmsProvider(dbKmsProvider);
    }
};
