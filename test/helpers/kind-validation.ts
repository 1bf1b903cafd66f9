import { expect } from '@hapi/code';
import type { ErrorDetail } from '../../lib/errors';
import type { ResourceKind } from '../../lib/registry/kind';
import { Registry } from '../../lib/registry/registry';
import { defineKeyChainKind, type KeyChainMaterial } from '../../resources/key-chain';
import { defineKmsConfigKind } from '../../resources/kms-config';
import { offlineDatabase } from './databases';
import { tenantKind } from '../../resources/tenant';

// Validation never touches key material; a call would mean the test reached the store.
const noMaterial: KeyChainMaterial = {
    create: () => Promise.reject(new Error('no key material in validation tests')),
    replace: () => Promise.reject(new Error('no key material in validation tests')),
    remove: () => Promise.reject(new Error('no key material in validation tests')),
    holds: () => Promise.reject(new Error('no key material in validation tests')),
    exportKeySource: () => Promise.reject(new Error('no key material in validation tests'))
};

/**
 * A sealed registry with the kinds every configuration refers to (Tenant, KmsConfig, KeyChain) plus `kinds`, and the
 * helpers validation tests use on it. Nothing is stored: only the kinds' schemas and upgrades run.
 */
export const validationRegistry = (kinds: ResourceKind<any>[]) => {
    const registry = new Registry(offlineDatabase());
    registry.register(tenantKind);
    registry.register(defineKmsConfigKind(new Map(), async () => undefined));
    registry.register(defineKeyChainKind(noMaterial));
    kinds.forEach((kind) => registry.register(kind));
    registry.seal();

    const valid = <T>(kind: ResourceKind<T>, spec: unknown, version?: number): T => registry.validate(kind, spec, version).spec;

    /** The details of the ValidationError the spec is rejected with. */
    const problems = (kind: ResourceKind, spec: unknown, version?: number): ErrorDetail[] => {
        try {
            registry.validate(kind, spec, version);
        }
        catch (err) {
            expect((err as { status?: number }).status).to.equal(400);
            return (err as { details: ErrorDetail[] }).details;
        }
        throw new Error('expected the spec to be rejected');
    };

    const paths = (kind: ResourceKind, spec: unknown, version?: number): string[] => problems(kind, spec, version).map((d) => d.path);

    return { registry, valid, problems, paths };
};

/** A deep copy of `base` changed by `change`: every reject test starts from a valid document. */
export const variant = <T>(base: T, change: (copy: any) => void): T => {
    const copy = structuredClone(base);
    change(copy);
    return copy;
};
