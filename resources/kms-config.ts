import Joi from 'joi';
import type { KmsProviderType } from '../lib/kms/types';
import { kindRef, type ResourceKind, type StoreScope, type TenantContext } from '../lib/registry/kind';

export interface KmsProviderEntry {
    id: string;
    type: string;
    description?: string;
    [option: string]: unknown;
}

export interface KmsConfig {
    defaultProvider?: string;
    providers: KmsProviderEntry[];
}

/** The provider every tenant has even without a kms.json. */
export const BUILT_IN_PROVIDER: KmsProviderEntry = { id: 'db', type: 'db', description: 'Keys sealed in the service database' };

const providerId = Joi.string().pattern(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/, 'provider id');

/**
 * The schema follows the registered provider types: each type validates its own fields (strict), and an unknown
 * type is rejected naming the known ones. Built when first used, after every kms-* plugin has registered.
 */
export const kmsConfigSchema = (types: ReadonlyMap<string, KmsProviderType<any>>): Joi.ObjectSchema<KmsConfig> => {
    const known = [...types.keys()];
    const entry = Joi.alternatives().conditional('.type', {
        switch: [...types.values()].map((t) => ({
            is: t.type,
            then: Joi.object({ id: providerId.required(), type: Joi.string().valid(t.type).required(), description: Joi.string().max(500) }).concat(t.optionsSchema)
        })),
        otherwise: Joi.object({
            type: Joi.string().valid(...known).required()
                .messages({ 'any.only': `{{#label}} names an unknown KMS provider type "{{#value}}" (known: ${known.join(', ')})` })
        }).unknown(true)
    });
    return Joi.object<KmsConfig>({
        defaultProvider: providerId,
        providers: Joi.array().items(entry).unique('id').required()
    }).custom((config: KmsConfig, helpers) => {
        const ids = new Set(['db', ...config.providers.map((p) => p.id)]);
        if (config.defaultProvider && !ids.has(config.defaultProvider)) {
            return helpers.message({ custom: `"defaultProvider" must name a listed provider (${[...ids].join(', ')})` });
        }
        return config;
    }).label('KmsConfig');
};

/** Secret fields of every provider type, as paths into a KmsConfig document. */
/**
 * The secret fields of every provider type spec 2.5 defines. They are secret whether or not the manifest loads the
 * plugin of that type: a stored configuration outlives a manifest change, and its secrets must never be exported or
 * answered in clear because the plugin that declares them is gone.
 */
const SPEC_PROVIDER_SECRETS = ['vaultToken', 'secretAccessKey', 'pin', 'clientSecret', 'sad', 'authorizeAuthData.*.value', 'auth.token', 'auth.clientSecret'];

export const kmsSecretPaths = (types: ReadonlyMap<string, KmsProviderType<any>>): string[] =>
    [...new Set([...SPEC_PROVIDER_SECRETS, ...[...types.values()].flatMap((t) => t.secretPaths)].map((p) => `providers.*.${p}`))];

/** Tenant settings over the global file: providers by id (the tenant's win), the tenant's default first. */
export const mergeKmsConfigs = (shared: KmsConfig | undefined, tenant: KmsConfig | undefined): KmsConfig => {
    const providers = new Map<string, KmsProviderEntry>([[BUILT_IN_PROVIDER.id, BUILT_IN_PROVIDER]]);
    for (const p of [...shared?.providers ?? [], ...tenant?.providers ?? []]) {
        providers.set(p.id, p);
    }
    return { defaultProvider: tenant?.defaultProvider ?? shared?.defaultProvider ?? 'db', providers: [...providers.values()] };
};

/**
 * `check` opens and health-checks every provider before a configuration is stored, by the API or from a file, so a
 * wrong PKCS#11 PIN or an unreachable KMS is refused when it is saved.
 */
/** Names the KmsConfig kind in registry calls; its definition is made by the kms plugin (it needs the provider types). */
export const kmsConfigKind = kindRef<KmsConfig>('KmsConfig');

export const defineKmsConfigKind = (types: ReadonlyMap<string, KmsProviderType<any>>, check: (scope: StoreScope, config: KmsConfig, ctx?: TenantContext) => Promise<void>): ResourceKind<KmsConfig> => {
    let schema: Joi.ObjectSchema<KmsConfig> | undefined;
    return {
        kind: kmsConfigKind.kind,
        file: 'KmsConfigFile',
        version: 1,
        get schema() {
            return (schema ??= kmsConfigSchema(types));
        },
        get secrets() {
            return kmsSecretPaths(types);
        },
        get secretDestinations() {
            return [...new Set([...types.values()].flatMap((t) => (t.destinationPaths ?? []).map((p) => `providers.*.${p}`)))];
        },
        dependsOn: ['Tenant'],
        singleton: true,
        id: () => 'KmsConfig',
        location: { file: 'kms.json' },
        check: (scope, spec, ctx) => check(scope, spec, ctx)
    };
};
