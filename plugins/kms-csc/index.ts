import type Hapi from '@hapi/hapi';
import Joi from 'joi';
import { pluginOptions } from '../../lib/compose';
import { cscKmsProvider } from './provider';

/** Registers the csc KMS provider: a credential of a remote signing service speaking the CSC API v2. */
export const plugin: Hapi.Plugin<Record<string, never>> = {
    name: 'hallmark-kms-csc',
    dependencies: ['hallmark-kms'],
    register(server, options) {
        pluginOptions('hallmark-kms-csc', Joi.object({}), options);
        server.registerKmsProvider(cscKmsProvider);
    }
};
