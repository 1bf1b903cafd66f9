import type Hapi from '@hapi/hapi';
import Joi from 'joi';
import { pluginOptions } from '../../lib/compose';
import { cloudKmsProvider } from './provider';

/** Registers the cloud-kms KMS provider: keys in AWS KMS, through the official SDK. */
export const plugin: Hapi.Plugin<Record<string, never>> = {
    name: 'hallmark-kms-cloud',
    dependencies: ['hallmark-kms'],
    register(server, options) {
        pluginOptions('hallmark-kms-cloud', Joi.object({}), options);
        server.registerKmsProvider(cloudKmsProvider);
    }
};
