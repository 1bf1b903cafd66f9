import Joi from 'joi';
import { jcs, sha256Hex } from '../../lib/config-import/plan';
import type { ErrorDetail } from '../../lib/errors';
import type { ExportRequirement, ResourceKind } from '../../lib/registry/kind';
import type { ConfigDocument } from '../../lib/registry/registry';
import { pathProblem, readZip, type ZipFileEntry, type ZipLimits } from './archive';
import { bundleInvalid } from './errors';

export { jcs, sha256Hex };

/** The bundle format of spec 2.9 and the contract: manifest, documents and assets, as JSON or as a ZIP archive. */

export const BUNDLE_FORMAT = 'hallmark.config-bundle';
export const BUNDLE_FORMAT_VERSION = 2;
/** Versions this service reads; version 1 has the same manifest fields. */
const READABLE_FORMAT_VERSIONS = [1, 2];
export const MANIFEST_PATH = 'manifest.json';
export const DEFAULT_SOURCE = 'bundle';

export interface ManifestResource {
    kind: string;
    id: string;
    $schema: string;
    path: string;
    sha256: string;
    ownership?: string;
    generation?: number;
}

export interface ManifestAsset {
    path: string;
    contentType: string;
    sha256: string;
}

export interface Manifest {
    format: string;
    formatVersion: number;
    sourceVersion?: string;
    exportedAt?: string;
    tenant?: string;
    /** Names who imports: replace deletes only resources the same source imported. */
    source?: string;
    resources: ManifestResource[];
    assets: ManifestAsset[];
    requirements: ExportRequirement[];
    warnings: Array<{ code: string; message: string; resource?: string }>;
}

export interface JsonBundle {
    manifest: Manifest;
    documents: Array<{ path: string; document: ConfigDocument }>;
    assets: Array<{ path: string; contentType: string; data: string }>;
}

/** A decoded, verified bundle: every listed document parsed, checksums checked. */
export interface Bundle {
    manifest: Manifest;
    /** In manifest order. */
    documents: Array<{ entry: ManifestResource; document: unknown }>;
    /** `data` only where it was asked for: a ZIP decoded for checking hashes its assets without keeping them. */
    assets: Array<{ entry: ManifestAsset; data?: Buffer }>;
    /** SHA-256 over the manifest and every file: what the plan fingerprint names as "the bundle". */
    digest: string;
}

const sha256 = /^[0-9a-f]{64}$/;
export const sourceSchema = Joi.string().pattern(/^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$/, 'source name');

export const manifestSchema = Joi.object<Manifest, true>({
    format: Joi.string().valid(BUNDLE_FORMAT).required(),
    formatVersion: Joi.number().integer().min(1).required(),
    sourceVersion: Joi.string().max(64),
    exportedAt: Joi.string().isoDate(),
    tenant: Joi.string().max(63),
    source: sourceSchema,
    resources: Joi.array().items(Joi.object<ManifestResource, true>({
        kind: Joi.string().max(64).required(),
        id: Joi.string().max(255).required(),
        $schema: Joi.string().max(255).required(),
        path: Joi.string().max(512).required(),
        sha256: Joi.string().pattern(sha256, 'lowercase hex SHA-256').required(),
        ownership: Joi.string().valid('unmanaged', 'file-managed'),
        generation: Joi.number().integer().min(1)
    })).max(10_000).required(),
    assets: Joi.array().items(Joi.object<ManifestAsset, true>({
        path: Joi.string().max(512).required(),
        contentType: Joi.string().max(255).required(),
        sha256: Joi.string().pattern(sha256, 'lowercase hex SHA-256').required()
    })).max(10_000).default([]),
    requirements: Joi.array().items(Joi.object({
        code: Joi.string().max(64).required(),
        resource: Joi.string().max(512).required(),
        path: Joi.string().max(512).required(),
        message: Joi.string().max(2000).required(),
        placeholder: Joi.string().max(512)
    })).max(10_000).default([]),
    warnings: Joi.array().items(Joi.object({ code: Joi.string().max(64).required(), message: Joi.string().max(2000).required(), resource: Joi.string().max(512) })).max(10_000).default([])
}).label('BundleManifest');

export const jsonBundleSchema = Joi.object<JsonBundle, true>({
    manifest: Joi.object().unknown(true).required().description('See BundleManifest'),
    documents: Joi.array().items(Joi.object({ path: Joi.string().max(512).required(), document: Joi.object().unknown(true).required() })).max(10_000).required(),
    assets: Joi.array().items(Joi.object({ path: Joi.string().max(512).required(), contentType: Joi.string().max(255).required(), data: Joi.string().base64().required() })).max(10_000).default([])
}).label('ConfigBundle');

/** The path of a kind's document in a bundle (spec 2.9): the tenant-folder layout, or the kind's own bundle file. */
export const bundlePath = (kind: ResourceKind, id: string): string => {
    if ('file' in kind.location) {
        return kind.location.bundleFile ?? kind.location.file;
    }
    return `${kind.location.dir}/${id}.json`;
};

const parseManifest = (raw: unknown): Manifest => {
    const { value, error } = manifestSchema.validate(raw, { abortEarly: false });
    if (error) {
        throw bundleInvalid(`The manifest is invalid: ${error.message}`, error.details.map((d) => ({ path: `manifest.${d.path.join('.')}`, message: d.message })));
    }
    if (!READABLE_FORMAT_VERSIONS.includes(value.formatVersion)) {
        throw bundleInvalid(`Bundle formatVersion ${value.formatVersion} is not supported (this service reads ${READABLE_FORMAT_VERSIONS.join(' and ')})`, [{ path: 'manifest.formatVersion', message: 'unsupported version' }]);
    }
    return value;
};

/** Checks the listing itself: paths, duplicates. Problems are collected into `details`. */
const checkListing = (manifest: Manifest, details: ErrorDetail[]): void => {
    const paths = new Set<string>();
    const ids = new Set<string>();
    manifest.resources.forEach((r, i) => {
        const problem = pathProblem(r.path) ?? (r.path === MANIFEST_PATH ? 'is the manifest' : undefined);
        if (problem) {
            details.push({ path: `manifest.resources.${i}.path`, message: `${r.path} ${problem}` });
        }
        if (paths.has(r.path)) {
            details.push({ path: `manifest.resources.${i}.path`, message: `${r.path} is listed twice` });
        }
        if (ids.has(`${r.kind}/${r.id}`)) {
            details.push({ path: `manifest.resources.${i}`, message: `${r.kind} ${r.id} is listed twice` });
        }
        paths.add(r.path);
        ids.add(`${r.kind}/${r.id}`);
    });
    manifest.assets.forEach((a, i) => {
        const problem = pathProblem(a.path) ?? (a.path === MANIFEST_PATH ? 'is the manifest' : undefined);
        if (problem) {
            details.push({ path: `manifest.assets.${i}.path`, message: `${a.path} ${problem}` });
        }
        if (paths.has(a.path)) {
            details.push({ path: `manifest.assets.${i}.path`, message: `${a.path} is listed twice` });
        }
        paths.add(a.path);
    });
};

const finish = (manifest: Manifest, details: ErrorDetail[], documents: Bundle['documents'], assets: Bundle['assets'], fileDigests: string[]): Bundle => {
    if (details.length) {
        throw bundleInvalid(`The bundle is invalid: ${details[0]!.message}`, details);
    }
    return { manifest, documents, assets, digest: sha256Hex(jcs({ manifest, files: fileDigests })) };
};

/** The assets the manifest lists, found by path in `files` and checked against their checksums (both bundle forms). */
const listedAssets = (manifest: Manifest, files: ReadonlyMap<string, ZipFileEntry>, details: ErrorDetail[], digests: string[]): Bundle['assets'] => {
    const assets: Bundle['assets'] = [];
    manifest.assets.forEach((entry, i) => {
        const file = files.get(entry.path);
        if (!file) {
            details.push({ path: `manifest.assets.${i}.path`, message: `${entry.path} is listed but missing` });
            return;
        }
        if (file.sha256 !== entry.sha256) {
            details.push({ path: entry.path, message: `${entry.path}: checksum mismatch` });
        }
        digests.push(entry.sha256);
        assets.push({ entry, ...(file.data ? { data: file.data } : {}) });
    });
    return assets;
};

/** A JSON bundle `{manifest, documents, assets}`; `sha256` of a document is that of its RFC 8785 form. */
export const decodeJsonBundle = (body: JsonBundle): Bundle => {
    const manifest = parseManifest(body.manifest);
    const details: ErrorDetail[] = [];
    checkListing(manifest, details);
    const byPath = new Map<string, unknown>();
    body.documents.forEach((d, i) => {
        if (byPath.has(d.path)) {
            details.push({ path: `documents.${i}.path`, message: `${d.path} appears twice` });
        }
        byPath.set(d.path, d.document);
    });
    const assetData = new Map<string, ZipFileEntry>();
    body.assets.forEach((a, i) => {
        if (assetData.has(a.path) || byPath.has(a.path)) {
            details.push({ path: `assets.${i}.path`, message: `${a.path} appears twice` });
        }
        const data = Buffer.from(a.data, 'base64');
        assetData.set(a.path, { sha256: sha256Hex(data), data });
    });
    const listed = new Set([...manifest.resources.map((r) => r.path), ...manifest.assets.map((a) => a.path)]);
    for (const path of [...byPath.keys(), ...assetData.keys()].filter((p) => !listed.has(p))) {
        details.push({ path, message: `${path} is not listed in the manifest` });
    }
    const documents: Bundle['documents'] = [];
    const digests: string[] = [];
    manifest.resources.forEach((entry, i) => {
        const document = byPath.get(entry.path);
        if (document === undefined) {
            details.push({ path: `manifest.resources.${i}.path`, message: `${entry.path} is listed but missing` });
            return;
        }
        const digest = sha256Hex(jcs(document));
        if (digest !== entry.sha256) {
            details.push({ path: entry.path, message: `${entry.path}: checksum mismatch` });
        }
        digests.push(digest);
        documents.push({ entry, document });
    });
    return finish(manifest, details, documents, listedAssets(manifest, assetData, details, digests), digests);
};

/**
 * A ZIP bundle: `manifest.json` and the listed files at their paths, nothing else. Documents (JSON files) are read;
 * assets are only hashed unless `keepAssets` (a bundle that is written again) asks for their bytes.
 */
export const decodeZipBundle = async (archive: Buffer | { file: string }, limits?: ZipLimits, options: { keepAssets?: boolean } = {}): Promise<Bundle> => {
    const files = await readZip(archive, limits, (path) => options.keepAssets === true || path.endsWith('.json'));
    const manifestBytes = files.get(MANIFEST_PATH)?.data;
    if (!manifestBytes) {
        throw bundleInvalid('The archive has no manifest.json', [{ path: MANIFEST_PATH, message: 'is missing' }]);
    }
    const manifest = parseManifest(parseJson(manifestBytes, MANIFEST_PATH));
    const details: ErrorDetail[] = [];
    checkListing(manifest, details);
    const listed = new Set([MANIFEST_PATH, ...manifest.resources.map((r) => r.path), ...manifest.assets.map((a) => a.path)]);
    for (const path of [...files.keys()].filter((p) => !listed.has(p))) {
        details.push({ path, message: `${path} is not listed in the manifest` });
    }
    const documents: Bundle['documents'] = [];
    const digests: string[] = [];
    manifest.resources.forEach((entry, i) => {
        const file = files.get(entry.path);
        if (!file) {
            details.push({ path: `manifest.resources.${i}.path`, message: `${entry.path} is listed but missing` });
            return;
        }
        const { sha256: digest, data: bytes } = file;
        if (!bytes) {
            details.push({ path: entry.path, message: `${entry.path}: a configuration document is a .json file` });
            return;
        }
        if (digest !== entry.sha256) {
            details.push({ path: entry.path, message: `${entry.path}: checksum mismatch` });
            return;
        }
        try {
            documents.push({ entry, document: parseJson(bytes, entry.path) });
            digests.push(digest);
        }
        catch (err) {
            details.push({ path: entry.path, message: (err as Error).message });
        }
    });
    return finish(manifest, details, documents, listedAssets(manifest, files, details, digests), digests);
};

const parseJson = (bytes: Buffer, path: string): unknown => {
    try {
        return JSON.parse(bytes.toString('utf8'));
    }
    catch {
        // No quote of the content: it may hold a secret.
        throw bundleInvalid(`${path} is not valid JSON`, [{ path, message: 'is not valid JSON' }]);
    }
};
