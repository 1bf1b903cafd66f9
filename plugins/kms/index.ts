import Fs from 'node:fs';
import Path from 'node:path';
import type Hapi from '@hapi/hapi';
import Joi from 'joi';
import { pluginOptions } from '../../lib/compose';
import type { ConfigImportOptions } from '../../lib/config-import/options';
import { substitutePlaceholders } from '../../lib/config-import/placeholders';
import type { KmsProviderType } from '../../lib/kms/types';
import { defineKeyChainKind, keyChainKind } from '../../resources/key-chain';
import { defineKmsConfigKind, kmsConfigKind, kmsConfigSchema, type KmsConfig } from '../../resources/kms-config';
import { isFolderImport } from '../../lib/config-import';
import { changedProviderIds, checkTenantKmsConfig } from './tenant-policy';
import { TenantModel } from '../../lib/db/models/tenant';
import * as kmsTables from './migrations/20261125_0003_kms';
import { kmsOptionsSchema, type KmsOptions } from './options';
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

/**
 * A kms.json of the operator's configuration folder (the global one, or a tenant folder's), placeholders filled in and
 * validated once every provider type is known; undefined when the folder has none.
 */
const readFolderKmsConfig = (server: Hapi.Server, configImport: ConfigImportOptions, schema: Joi.ObjectSchema<KmsConfig>, ...segments: string[]): KmsConfig | undefined => {
    const { log } = server.app;
    const file = configImport.folder && Path.join(configImport.folder, ...segments, 'kms.json');
    if (!file || !Fs.existsSync(file)) {
        return undefined;
    }
    const raw = JSON.parse(Fs.readFileSync(file, 'utf8'));
    const { value, unresolved } = substitutePlaceholders(raw.spec ?? raw, configImport.variables);
    if (unresolved.length) {
        const message = `${file}: unresolved placeholders ${unresolved.join(', ')}`;
        if (configImport.unresolvedPlaceholders === 'fail-tenant') {
            throw new Error(message);
        }
        log.warn(message);
    }
    const { value: config, error } = schema.validate(value, { abortEarly: false });
    if (error) {
        throw new Error(`${file} is invalid: ${error.message}`);
    }
    return config;
};

/**
 * Keys and key chains. Registers: the KMS provider extension point, the KmsConfig and KeyChain kinds, the
 * /api/key-chain routes, the signing service every signer uses, and the hourly key-rotation job.
 */
export const plugin: Hapi.Plugin<KmsOptions> = {
    name: 'hallmark-kms',
    dependencies: ['hallmark-core', 'hallmark-oauth2'],
    register(server, rawOptions) {
        const options = pluginOptions('hallmark-kms', kmsOptionsSchema, rawOptions);
        const { log } = server.app;
        const { db, registry } = server;
        // key_chain_keys and tenant_cas (models.ts); 0003 also makes kms_db_keys for the kms-db provider, which
        // cannot register it itself without renaming a released migration.
        server.registerMigrations([{ name: '20261125_0003_kms', ...kmsTables }]);
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
        const globalKmsConfig = () => (globalConfig ??= { value: readFolderKmsConfig(server, options.configImport, schema()) }).value;
        // A tenant folder's kms.json as the operator wrote it: its providers are trusted, wherever else they came from.
        const operatorTenantConfig = (tenantId: string): KmsConfig | undefined => {
            try {
                return readFolderKmsConfig(server, options.configImport, schema(), tenantId);
            }
            catch (err) {
                log.warn({ tenantId, err: (err as Error).message }, 'the tenant folder\'s kms.json cannot be read: its providers are not trusted');
                return undefined;
            }
        };
        const kms = new KmsService({ db, registry, log, outbound: server.outbound, timeoutMs: options.timeoutMs, types, globalConfig: globalKmsConfig, operatorTenantConfig });
        const keyChains = new KeyChainService({ db, kms, publicUrl: options.publicUrl });
        server.decorate('server', 'kms', kms);
        const signing = new SigningService(kms, keyChains, registry);
        server.decorate('server', 'signing', signing);

        server.registerResource(defineKmsConfigKind(types, async (scope, config, ctx) => {
            // The operator's folder import is trusted; any other writer (the API, a bundle import, which records the
            // configuration file-managed like the operator's) is held to the tenant policy for what it adds or changes.
            if (isFolderImport(ctx)) {
                return kms.check(scope.tenantId!, config);
            }
            const previous = (await scope.get(kmsConfigKind, kmsConfigKind.kind))?.spec;
            await checkTenantKmsConfig(config, server.outbound, previous);
            // The health check connects under the policy too: the name checked above may answer another address now.
            await kms.check(scope.tenantId!, config, { outbound: server.outbound, providerIds: changedProviderIds(config, previous) });
        }));
        server.registerResource(defineKeyChainKind(keyChains));

        server.ext('onPreStart', () => {
            globalKmsConfig();
        });
        server.ext('onPostStop', () => kms.close());
        server.route([...providerRoutes(kms, schema), ...keyChainRoutes(keyChains)]);

        server.registerJob({
            name: 'key-chain.rotation',
            schedule: { cron: '17 * * * *' },
            async run({ log: jobLog }) {
                for (const { id: tenantId } of await db.model(TenantModel).query().select('id')) {
                    const ctx = { tenantId, clientId: 'system:key-rotation', roles: [] };
                    for (const chain of await registry.list(ctx, keyChainKind)) {
                        const policy = chain.spec.rotationPolicy;
                        const material = policy?.enabled ? await keyChains.material(tenantId, chain.spec.id) : undefined;
                        if (policy && material && Date.parse(material.rotatedAt) + policy.intervalDays * 86_400_000 <= Date.now()) {
                            await registry.write(ctx, keyChainKind, { ...chain.spec, keySource: { type: 'regenerate' } });
                            jobLog.info({ tenantId, keyChainId: chain.spec.id }, 'key chain rotated by its policy');
                        }
                    }
                }
            }
        });
    }
};
