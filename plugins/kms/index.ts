import Fs from 'node:fs';
import Path from 'node:path';
import type Hapi from '@hapi/hapi';
import Joi from 'joi';
import { requirePlugins } from '../../lib/compose';
import { substitutePlaceholders } from '../../lib/config-import/placeholders';
import type { KmsProviderType } from '../../lib/kms/types';
import { keyChainKind, type KeyChain } from '../../resources/key-chain';
import { kmsConfigKind, kmsConfigSchema, type KmsConfig } from '../../resources/kms-config';
import { TenantModel } from '../../lib/db/models/tenant';
import { keyChainRoutes } from './routes/key-chains';
import { providerRoutes } from './routes/providers';
import { KeyChainService } from './services/key-chains';
import { KmsService } from './services/kms-service';
import { SigningService } from './services/signing';

declare module '@hapi/hapi' {
    interface Server {
        /** Adds a KMS provider type; a `kms-*` plugin or a third-party package calls it at registration. */
        registerKmsProvider(type: KmsProviderType<any>): void;
        kms: KmsService;
        signing: SigningService;
    }
}

/** The global <CONFIG_FOLDER>/kms.json, validated once every provider type is known. */
const readGlobalConfig = (server: Hapi.Server, schema: Joi.ObjectSchema<KmsConfig>): KmsConfig | undefined => {
    const { config, log } = server.app;
    const file = config.configImport.folder && Path.join(config.configImport.folder, 'kms.json');
    if (!file || !Fs.existsSync(file)) {
        return undefined;
    }
    const raw = JSON.parse(Fs.readFileSync(file, 'utf8'));
    const { value, unresolved } = substitutePlaceholders(raw.spec ?? raw, config.configImport.variables);
    if (unresolved.length) {
        const message = `${file}: unresolved placeholders ${unresolved.join(', ')}`;
        if (config.configImport.unresolvedPlaceholders === 'fail-tenant') {
            throw new Error(message);
        }
        log.warn(message);
    }
    const { value: global, error } = schema.validate(value, { abortEarly: false });
    if (error) {
        throw new Error(`${file} is invalid: ${error.message}`);
    }
    return global;
};

/**
 * Keys and key chains. Registers: the KMS provider extension point, the KmsConfig and KeyChain kinds, the
 * /api/key-chain routes, the signing service every signer uses, and the hourly key-rotation job.
 */
export const plugin: Hapi.Plugin<Record<string, never>> = {
    name: 'hallmark-kms',
    register(server) {
        requirePlugins(server, 'hallmark-kms', ['hallmark-core', 'hallmark-oauth2']);
        const { config, log } = server.app;
        const { db, registry } = server;
        const types = new Map<string, KmsProviderType<any>>();
        server.decorate('server', 'registerKmsProvider', (type: KmsProviderType<any>) => {
            if (registry.sealed) {
                throw new Error(`KMS provider type ${type.type} registered after start`);
            }
            if (types.has(type.type)) {
                throw new Error(`KMS provider type ${type.type} is registered twice`);
            }
            types.set(type.type, type);
        });

        const schema = () => kmsConfigSchema(types);
        // Read on first use (the startup import may need it) or at the latest when the server starts.
        let globalConfig: { value: KmsConfig | undefined } | undefined;
        const global = () => (globalConfig ??= { value: readGlobalConfig(server, schema()) }).value;
        const kms = new KmsService({ db, registry, log, config, types, globalConfig: global });
        const keyChains = new KeyChainService({ db, kms, config });
        server.decorate('server', 'kms', kms);
        const signing = new SigningService(kms, keyChains, registry);
        server.decorate('server', 'signing', signing);

        server.registerResource(kmsConfigKind(types, (tenantId, config) => kms.check(tenantId, config)));
        server.registerResource(keyChainKind(keyChains));

        server.ext('onPreStart', () => {
            global();
        });
        server.ext('onPostStop', () => kms.close());
        server.route([...providerRoutes(kms, schema), ...keyChainRoutes(keyChains)]);

        server.registerJob({
            name: 'key-chain.rotation',
            schedule: { cron: '17 * * * *' },
            async run({ log: jobLog }) {
                for (const { id: tenantId } of await db.model(TenantModel).query().select('id')) {
                    const ctx = { tenantId, clientId: 'system:key-rotation', roles: [] };
                    for (const chain of await registry.list<KeyChain>(db, ctx, 'KeyChain')) {
                        const policy = chain.spec.rotationPolicy;
                        const material = policy?.enabled ? await keyChains.material(tenantId, chain.spec.id) : undefined;
                        if (policy && material && Date.parse(material.rotatedAt) + policy.intervalDays * 86_400_000 <= Date.now()) {
                            await registry.write(db, ctx, 'KeyChain', { ...chain.spec, keySource: { type: 'regenerate' } });
                            jobLog.info({ tenantId, keyChainId: chain.spec.id }, 'key chain rotated by its policy');
                        }
                    }
                }
            }
        });
    }
};
