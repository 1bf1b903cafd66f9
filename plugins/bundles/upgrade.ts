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
/** Whether the value at a validation problem's path is a string with a `${…}` placeholder in it. */
export const holdsPlaceholder = (spec: unknown, path: string): boolean => {
    let value = spec;
    for (const key of path.split('.').filter(Boolean)) {
        value = value && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined;
    }
    return typeof value === 'string' && value.includes('${');
};

export const upgradeDocument = (registry: Registry, input: unknown, folder?: { tenantId: string }): UpgradedDocument => {
    try {
        const { kind, version, spec, metadata } = registry.parseDocument(input);
        const upgraded = registry.upgrade(kind, spec, version);
        // In a tenant folder the folder supplies what a file leaves out (the tenant's id); the file keeps leaving it out.
        try {
            registry.validate(kind, folder ? kind.fromFolder?.(structuredClone(upgraded.spec), folder.tenantId) ?? upgraded.spec : upgraded.spec);
        }
        catch (err) {
            // A `${VAR}` placeholder (as export writes for secrets) is resolved only on import: a problem of that
            // value alone is not one of the document.
            const problems = err instanceof ValidationError ? (err.details ?? []).filter((d) => !holdsPlaceholder(upgraded.spec, d.path)) : [];
            if (!(err instanceof ValidationError) || problems.length || !err.details?.length) {
                throw err instanceof ValidationError && err.details?.length ? new ValidationError(err.message, problems) : err;
            }
        }
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
