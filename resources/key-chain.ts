import Joi from 'joi';
import { kindRef, type ResourceKind, type ResourceStore, type StoreScope, type TenantContext } from '../lib/registry/kind';
import type { Registry } from '../lib/registry/registry';
import { tableResourceStore } from '../lib/registry/resource-store';

export const KEY_CHAIN_USAGES = ['access', 'attestation', 'statusList', 'trustList'] as const;

export type KeySource =
    | { type: 'generate' }
    | { type: 'regenerate' }
    | { type: 'private-jwk'; privateJwk: Record<string, unknown>; certificateChain?: string[] }
    | { type: 'external-reference'; provider: string; externalKeyId: string; publicJwk: Record<string, unknown>; certificateChain?: string[] };

export interface KeyChainSubject {
    commonName: string;
    organization?: string;
    country?: string;
}

export interface KeyChain {
    id: string;
    usageType: (typeof KEY_CHAIN_USAGES)[number];
    type?: 'internalChain' | 'standalone';
    kmsProvider?: string;
    subject?: KeyChainSubject;
    sanDns?: string[];
    certValidityDays?: number;
    rotationPolicy?: { enabled: boolean; intervalDays: number };
    /** Write-only: where the key comes from. Absent means a new key generated in the provider. */
    keySource?: KeySource;
}

const pem = Joi.string().pattern(/^-----BEGIN CERTIFICATE-----[\s\S]+-----END CERTIFICATE-----\s*$/, 'PEM certificate');
const publicJwk = Joi.object({ kty: Joi.string().valid('EC').required(), crv: Joi.string().valid('P-256').required(), x: Joi.string().required(), y: Joi.string().required(), kid: Joi.string(), alg: Joi.string(), use: Joi.string() });
const privateJwk = Joi.object({ kty: Joi.string().valid('EC').required(), crv: Joi.string().valid('P-256').required(), x: Joi.string().required(), y: Joi.string().required(), d: Joi.string().required(), kid: Joi.string(), alg: Joi.string(), use: Joi.string() });

export const keyChainSubjectSchema = Joi.object<KeyChainSubject, true>({
    commonName: Joi.string().min(1).max(64).required(),
    organization: Joi.string().max(64),
    country: Joi.string().length(2).uppercase().description('ISO 3166-1 alpha-2; required by mso_mdoc credentials (ISO 18013-5)')
}).label('KeyChainSubject');

export const keySourceSchema = Joi.alternatives().conditional('.type', {
    switch: [
        { is: 'generate', then: Joi.object({ type: Joi.string().valid('generate').required() }) },
        { is: 'regenerate', then: Joi.object({ type: Joi.string().valid('regenerate').required() }) },
        { is: 'private-jwk', then: Joi.object({ type: Joi.string().valid('private-jwk').required(), privateJwk: privateJwk.required(), certificateChain: Joi.array().items(pem).min(1) }) },
        {
            is: 'external-reference',
            then: Joi.object({
                type: Joi.string().valid('external-reference').required(),
                provider: Joi.string().required(),
                externalKeyId: Joi.string().max(255).required(),
                publicJwk: publicJwk.required(),
                certificateChain: Joi.array().items(pem).min(1)
            })
        }
    ],
    otherwise: Joi.object({ type: Joi.string().valid('generate', 'regenerate', 'private-jwk', 'external-reference').required() }).unknown(true)
}).label('KeySource');

export const keyChainSchema = Joi.object<KeyChain, true>({
    id: Joi.string().pattern(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, 'key chain id').required(),
    usageType: Joi.string().valid(...KEY_CHAIN_USAGES).required()
        .description('access: signs request objects, metadata and readerAuth; attestation: signs credentials'),
    type: Joi.string().valid('internalChain', 'standalone').default('internalChain')
        .description('internalChain: the tenant root CA signs the leaf; standalone: a self-signed leaf'),
    kmsProvider: Joi.string().description('Provider id; default: the tenant\'s default provider'),
    subject: keyChainSubjectSchema,
    sanDns: Joi.array().items(Joi.string().hostname()).max(20).description('DNS names of the leaf; default: the host of PUBLIC_URL'),
    certValidityDays: Joi.number().integer().min(1).max(3650).default(365),
    rotationPolicy: Joi.object({ enabled: Joi.boolean().required(), intervalDays: Joi.number().integer().min(1).max(3650).required() }),
    keySource: keySourceSchema
}).label('KeyChain');

/** How an export names a chain's key (spec 2.9): a key the database holds is asked for; one in a KMS is referenced. */
export type ExportedKeySource =
    | { type: 'required'; publicJwk: Record<string, unknown> }
    | { type: 'external-reference'; provider: string; externalKeyId: string; publicJwk: Record<string, unknown> };

/** Makes and keeps key chains' key material (keys in the KMS, certificates); implemented by the kms plugin. */
export interface KeyChainMaterial {
    create(scope: StoreScope, spec: KeyChain, keySource: KeySource | undefined): Promise<void>;
    replace(scope: StoreScope, spec: KeyChain, keySource: KeySource): Promise<void>;
    remove(scope: StoreScope, id: string): Promise<void>;
    /** Whether the chain already holds this key (re-importing the same private key or reference changes nothing). */
    holds(scope: StoreScope, id: string, keySource: KeySource): Promise<boolean>;
    /** The chain's current key as an export writes it. */
    exportKeySource(scope: StoreScope, id: string): Promise<ExportedKeySource>;
}

/** The configuration is an ordinary document; the key material beside it is made when the chain is written. */
const keyChainStore = (material: KeyChainMaterial): ResourceStore<KeyChain> => ({
    get: tableResourceStore.get,
    list: tableResourceStore.list,
    async put(scope, id, resource, existing) {
        const { keySource, ...spec } = resource.spec;
        await tableResourceStore.put(scope, id, { ...resource, spec }, existing);
        if (!existing) {
            await material.create(scope, spec, keySource);
        }
        else if (keySource && keySource.type !== 'generate') {
            await material.replace(scope, spec, keySource);
        }
    },
    async delete(scope, id) {
        await material.remove(scope, id);
        await tableResourceStore.delete(scope, id);
    },
    async writeOnlyUnchanged(scope, id, spec) {
        const source = spec.keySource;
        return !source || source.type === 'generate' || (source.type !== 'regenerate' && material.holds(scope, id, source));
    }
});

/** Names the KeyChain kind in registry calls; its definition is made by the kms plugin (it needs the key material). */
export const keyChainKind = kindRef<KeyChain>('KeyChain');

/** The id of the tenant's first key chain of the first of `usages` it has (in id order), if any. */
export const keyChainOfUsage = async (registry: Registry, ctx: TenantContext, ...usages: Array<KeyChain['usageType']>): Promise<string | undefined> => {
    const chains = await registry.list(ctx, keyChainKind);
    for (const usage of usages) {
        const chain = chains.find((c) => c.spec.usageType === usage);
        if (chain) {
            return chain.spec.id;
        }
    }
    return undefined;
};

export const defineKeyChainKind = (material: KeyChainMaterial): ResourceKind<KeyChain> => ({
    kind: keyChainKind.kind,
    file: 'KeyChainConfigFile',
    version: 1,
    schema: keyChainSchema,
    dependsOn: ['Tenant', 'KmsConfig'],
    writeOnly: ['keySource'],
    secrets: ['keySource.privateJwk'],
    id: (spec) => spec.id,
    location: { dir: 'key-chains' },
    store: keyChainStore(material),
    async exportFields(scope, id) {
        const keySource = await material.exportKeySource(scope, id);
        return {
            fields: { keySource },
            requirements: keySource.type === 'required'
                ? [{ code: 'PRIVATE_KEY_REQUIRED', path: 'keySource', message: 'The private key stays in the database: supply keySource {type: private-jwk}, or {type: regenerate} for new key material' }]
                : []
        };
    }
});
