import type Hapi from '@hapi/hapi';
import Joi from 'joi';
import { pluginOptions } from '../../lib/compose';
import { vaultKmsProvider } from './provider';

/** Registers the vault KMS provider: keys in the Transit secrets engine of HashiCorp Vault. */
export const plugin: Hapi.Plugin<Record<string, never>> = {
    name: 'hallmark-kms-vault',
    dependencies: ['hallmark-kms'],
    register(server, options) {
        pluginOptions('hallmark-kms-vault', Joi.object({}), options);
        server.registerKmsProvider(vaultKmsProvider);
    }
};
