import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import joiToJson from 'joi-to-json';
import { NotFoundError } from '../../../lib/errors';
import type { ResourceKind } from '../../../lib/registry/kind';
import { schemaUrl, versionTargets } from '../../../lib/registry/schema-url';

const cache = new WeakMap<ResourceKind, Map<number, object>>();

const NUMERIC_KEYWORDS = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'minLength', 'maxLength', 'minItems', 'maxItems', 'minProperties', 'maxProperties', 'multipleOf'];

const isForbidden = (node: unknown) => !!node && typeof node === 'object' && 'not' in node && Object.keys((node as { not: object }).not).length === 0;

/**
 * Rules that depend on another field have no faithful form in the converter's output: comparisons with a sibling
 * ("lower than batch_size") come out as objects, and "only when type is object" as a bare "forbidden". Both are
 * dropped, so the JSON Schema accepts what the joi schema accepts and a little more; joi still enforces them.
 */
const withoutReferences = (node: unknown): unknown => {
    if (Array.isArray(node)) {
        return node.filter((n) => !isForbidden(n)).map(withoutReferences);
    }
    if (!node || typeof node !== 'object') {
        return node;
    }
    return Object.fromEntries(Object.entries(node)
        .filter(([key, value]) => !(NUMERIC_KEYWORDS.includes(key) && typeof value !== 'number'))
        .filter(([key, value]) => !(key === 'not' && typeof value === 'object' && value && Object.keys(value).length === 0))
        .map(([key, value]) => [key, withoutReferences(value)]));
};

/**
 * The JSON Schema of a configuration document of a kind at a version, generated from the joi schema that validates
 * it: an earlier version is the current schema tailored to that version (the fields that differed carry `alter`).
 */
const documentSchema = (kind: ResourceKind, version: number): object => {
    const versions = cache.get(kind) ?? new Map<number, object>();
    cache.set(kind, versions);
    let schema = versions.get(version);
    if (!schema) {
        const url = schemaUrl(kind.file, version);
        const joi = version === kind.version ? kind.schema : kind.schema.tailor(versionTargets(kind.file, version, kind.version));
        // Shared definitions (recursive claim fields) are referenced as #/$defs/…: they belong at the document root.
        const { $defs, ...spec } = withoutReferences(joiToJson(joi, 'json')) as { $defs?: object };
        schema = {
            $schema: 'http://json-schema.org/draft-07/schema#',
            $id: url,
            title: kind.file,
            type: 'object',
            properties: {
                $schema: { type: 'string', const: url },
                metadata: {
                    type: 'object',
                    properties: { generation: { type: 'integer', minimum: 1 }, ownership: { type: 'string', enum: ['unmanaged', 'file-managed'] } },
                    additionalProperties: false
                },
                spec
            },
            required: ['$schema', 'spec'],
            additionalProperties: false,
            ...($defs ? { $defs } : {})
        };
        versions.set(version, schema);
    }
    return schema;
};

export const schemaRoutes: ServerRoute[] = [{
    method: 'GET',
    path: '/api/schemas/v{version}/{file}.schema.json',
    options: {
        auth: false,
        tags: ['api', 'schemas'],
        description: 'JSON Schema of a configuration document kind and version',
        notes: 'Generated from the same joi schema that validates the API, the import and the export. Every version from 1 to the current one is served; documents of an earlier version are upgraded on import.',
        validate: { params: Joi.object({ version: Joi.number().integer().min(1).required(), file: Joi.string().pattern(/^[A-Za-z]+$/).required() }) }
    },
    handler: (request, h) => {
        const { version, file } = request.params as { version: number; file: string };
        const kind = request.server.registry.ordered().find((k) => k.file === file);
        if (!kind || version > kind.version) {
            throw new NotFoundError(kind ? `${file} is served at versions 1 to ${kind.version}` : `Unknown document kind ${file}`);
        }
        return h.response(documentSchema(kind, version)).type('application/schema+json').header('Cache-Control', 'public, max-age=300');
    }
}];
