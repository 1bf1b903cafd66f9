import type Hapi from '@hapi/hapi';
import Joi from 'joi';
import { pluginOptions } from '../../lib/compose';
import { pkcs11KmsProvider } from './provider';

/** Registers the pkcs11 KMS provider: keys generated and kept inside a PKCS#11 token (HSM or SoftHSM2). */
export const plugin: Hapi.Plugin<Record<string, never>> = {
    name: 'hallmark-kms-pkcs11',
    dependencies: ['hallmark-kms'],
    register(server, options) {
        pluginOptions('hallmark-kms-pkcs11', Joi.object({}), options);
        server.registerKmsProvider(pkcs11KmsProvider);
    }
};
