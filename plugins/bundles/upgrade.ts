import { ValidationError } from '../../lib/errors';
import type { UpgradeWarning } from '../../lib/registry/kind';
import type { ConfigDocument, Registry } from '../../lib/registry/registry';
import { bundleInvalid } from './errors';

export interface UpgradedDocument {
    document: ConfigDocument;
    warnings: UpgradeWarning[];
}

/**
 * One configuration document moved to its kind's current version through the registry's upgrade steps, then
 * validated, so what is answered would import. The spec is answered as upgraded, not with the schema's defaults
 * filled in: the author's document stays the author's. An unknown or newer `$schema`, a failed upgrade step (such as
 * PresentationConfig v2 → v3 with empty DCQL values) or an invalid result is BUNDLE_INVALID with the problems.
 * `folder` names the tenant folder a file was read from.
 */
export const upgradeDocument = (registry: Registry, input: unknown, folder?: { tenantId: string }): UpgradedDocument => {
    try {
        const { kind, version, spec, metadata } = registry.parseDocument(input);
        const upgraded = registry.upgrade(kind, spec, version);
        // In a tenant folder the folder supplies what a file leaves out (the tenant's id); the file keeps leaving it out.
        registry.validate(kind, folder ? kind.fromFolder?.(structuredClone(upgraded.spec), folder.tenantId) ?? upgraded.spec : upgraded.spec);
        return {
            document: { $schema: registry.schemaUrl(kind), ...(metadata ? { metadata } : {}), spec: upgraded.spec },
            warnings: upgraded.warnings
        };
    }
    catch (err) {
        if (err instanceof ValidationError) {
            throw bundleInvalid(err.message, err.details ?? [{ path: '', message: err.message }]);
        }
        throw err;
    }
};
