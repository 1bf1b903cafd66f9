import type Hapi from '@hapi/hapi';
import Joi from 'joi';
import { pluginOptions } from '../../lib/compose';
import { httpKmsProvider } from './provider';

/** Registers the http KMS provider: keys held by an external service speaking the spec 2.5 HTTP protocol. */
export const plugin: Hapi.Plugin<Record<string, never>> = {
    name: 'hallmark-kms-http',
    dependencies: ['hallmark-kms'],
    register(server, options) {
        pluginOptions('hallmark-kms-http', Joi.object({}), options);
        server.registerKmsProvider(httpKmsProvider);
    }
};
