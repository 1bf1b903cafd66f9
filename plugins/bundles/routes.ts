import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import type Hapi from '@hapi/hapi';
import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { callerContext } from '../../lib/auth/context';
import { NotFoundError, ValidationError } from '../../lib/errors';
import { tenantIdSchema } from '../../resources/tenant';
import { jsonBundleSchema, type JsonBundle } from './bundle';
import { BundleError } from './errors';
import { IMPORT_MODES, type ImportMode } from '../../lib/config-import/plan';
import type { BundleContext, BundleService } from './service';

const ROLES = ['tenant:admin', 'tenant:manage'];
const tags = ['api', 'config-bundles'];
const MiB = 1024 * 1024;
// A JSON bundle carries base64 assets: room for the expanded limit plus the encoding.
const JSON_BODY_BYTES = 140 * MiB;
// The archive limit plus the multipart framing.
const ARCHIVE_BODY_BYTES = 50 * MiB + 64 * 1024;

const tenantQuery = { tenantId: tenantIdSchema.description('tenant:manage only: the tenant to act on; a tenant client acts on its own') };
const planQuery = Joi.object({ ...tenantQuery, mode: Joi.string().valid(...IMPORT_MODES).default('upsert') });
const importQuery = Joi.object({
    ...tenantQuery,
    mode: Joi.string().valid(...IMPORT_MODES).default('upsert'),
    planFingerprint: Joi.string().pattern(/^[0-9a-f]{64}$/).required().description('The fingerprint of the reviewed plan'),
    confirmReplace: Joi.boolean().default(false).description('Required (true) with mode=replace')
});
const change = Joi.object({ path: Joi.string().required(), before: Joi.any(), after: Joi.any() }).label('BundleFieldChange');
const action = Joi.object({
    kind: Joi.string().required(),
    id: Joi.string().allow('').required(),
    action: Joi.string().valid('create', 'update', 'unchanged', 'skip', 'delete', 'blocked').required(),
    changes: Joi.array().items(change).description('update: the changed field paths; secret values shown as [redacted]'),
    code: Joi.string().description('blocked: why (spec 7.4); skip: RESOURCE_EXISTS'),
    message: Joi.string()
}).label('BundlePlanAction');
const warning = Joi.object({ code: Joi.string().required(), resource: Joi.string().required(), message: Joi.string().required() }).label('BundleWarning');
const planView = Joi.object({
    planFingerprint: Joi.string().required().description('Present it to the import: it fails with CONFIG_PLAN_STALE when the bundle, mode or tenant changed'),
    mode: Joi.string().valid(...IMPORT_MODES).required(),
    tenant: Joi.string().required(),
    blocked: Joi.boolean().required().description('One blocked action blocks the whole plan'),
    actions: Joi.array().items(action).required(),
    requirements: Joi.array().items(Joi.object({ code: Joi.string().required(), resource: Joi.string().required(), path: Joi.string().required(), message: Joi.string().required(), placeholder: Joi.string() }).label('BundleRequirement')).required(),
    warnings: Joi.array().items(warning).required()
}).label('BundlePlan');
const importView = Joi.object({
    operationId: Joi.string().guid().required(),
    actions: Joi.array().items(action).required(),
    warnings: Joi.array().items(warning).required(),
    generatedSecrets: Joi.array().items(Joi.object({ kind: Joi.string().required(), id: Joi.string().required(), secret: Joi.string().required() }).label('GeneratedSecret'))
        .description('Secrets made for !generate: shown once, never stored in clear')
}).label('BundleImport');
const operationView = Joi.object({
    id: Joi.string().guid().required(),
    type: Joi.string().valid('export', 'import', 'detach').required(),
    mode: Joi.string().valid(...IMPORT_MODES),
    status: Joi.string().valid('running', 'succeeded', 'failed', 'interrupted').required(),
    actor: Joi.string().required(),
    startedAt: Joi.string().isoDate().required(),
    finishedAt: Joi.string().isoDate(),
    summary: Joi.object().unknown(true).required()
}).label('BundleOperation');
const resourceView = Joi.object({
    kind: Joi.string().required(),
    id: Joi.string().required(),
    ownership: Joi.string().valid('unmanaged', 'file-managed').required(),
    generation: Joi.number().integer().min(1).required(),
    source: Joi.string().description('Who imported it (manifest.source); file-managed resources only'),
    updatedAt: Joi.string().isoDate().required()
}).label('BundleResource');

const schemaUrl = Joi.string().max(512).description('The schema URL naming kind and version, e.g. https://schemas.hallmark.dev/config/v1/PresentationConfigFile.schema.json');
const documentMetadata = Joi.object({
    generation: Joi.number().integer().min(1),
    ownership: Joi.string().valid('unmanaged', 'file-managed')
}).label('ConfigDocumentMetadata');
const upgradeRequest = Joi.object({
    $schema: schemaUrl.required(),
    metadata: documentMetadata,
    spec: Joi.object().unknown(true).required().description('The resource configuration in the version $schema names')
}).label('ConfigDocumentToUpgrade');
const upgradeView = Joi.object({
    document: Joi.object({
        $schema: schemaUrl.required(),
        metadata: documentMetadata,
        spec: Joi.object().unknown(true).required()
    }).label('UpgradedConfigDocument').required(),
    warnings: Joi.array().items(Joi.object({ code: Joi.string().required(), message: Joi.string().required() }).label('UpgradeWarning')).required()
        .description('What the upgrade changed beyond the version, e.g. PROVIDED_ATTESTATIONS_REMOVED')
}).label('ConfigDocumentUpgrade');

// The upload is streamed into a temporary file (hapi's multipart `file` output) that the handler reads from, so a
// 50 MiB archive is never held in memory; the file is removed once the response is sent, whatever happened.
const archivePayload = Joi.object({
    bundle: Joi.object({ path: Joi.string().required(), bytes: Joi.number(), filename: Joi.string().allow(''), headers: Joi.object() }).unknown(true).required()
        .messages({ 'object.base': '{{#label}} must be a file (multipart part with a filename)' })
        .meta({ swaggerType: 'file' }).description('The ZIP bundle')
});
export const UPLOADS_FOLDER = Path.join(Os.tmpdir(), `hallmark-uploads-${process.pid}`);
const archiveUpload = {
    payload: { maxBytes: ARCHIVE_BODY_BYTES, output: 'data' as const, parse: true, multipart: { output: 'file' as const }, uploads: UPLOADS_FOLDER },
    ext: {
        onPostResponse: {
            method: async (request: Hapi.Request, h: Hapi.ResponseToolkit) => {
                // A repeated field is an array of parts: each was written to its own file.
                for (const part of Object.values((request.payload ?? {}) as Record<string, unknown>).flat()) {
                    const path = (part as { path?: unknown } | null)?.path;
                    if (typeof path === 'string' && path.startsWith(UPLOADS_FOLDER)) {
                        await Fs.promises.rm(path, { force: true });
                    }
                }
                return h.continue;
            }
        }
    }
};
const uploaded = (request: Hapi.Request) => ({ file: (request.payload as { bundle: { path: string } }).bundle.path });

/** The tenant acted on: the token's own, or for a tenant:manage client the one `?tenantId=` names. */
const bundleContext = (request: Hapi.Request): BundleContext => {
    const ctx = callerContext(request);
    const named = (request.query as { tenantId?: string }).tenantId;
    if (ctx.tenantId) {
        if (named && named !== ctx.tenantId) {
            throw new NotFoundError('Tenant not found');
        }
        return ctx as BundleContext;
    }
    if (!named) {
        throw new ValidationError('A client without a tenant names the tenant with ?tenantId=', [{ path: 'tenantId', message: 'is required' }]);
    }
    return { ...ctx, tenantId: named };
};

/** BundleErrors answer the Boom body plus their `code` (and the plan, for a blocked import). */
const answering = (handler: (request: Hapi.Request, h: Hapi.ResponseToolkit) => Promise<unknown>) =>
    async (request: Hapi.Request, h: Hapi.ResponseToolkit) => {
        try {
            return await handler(request, h);
        }
        catch (err) {
            if (!(err instanceof BundleError)) {
                throw err;
            }
            const error = ({ 400: 'Bad Request', 409: 'Conflict', 413: 'Payload Too Large' } as Record<number, string>)[err.status] ?? 'Error';
            return h.response({ statusCode: err.status, error, message: err.message, code: err.code, ...(err.extra?.details ? { details: err.extra.details } : {}) }).code(err.status);
        }
    };

const imported = async (service: BundleService, request: Hapi.Request, archive?: { file: string }) => {
    const q = request.query as { mode: ImportMode; planFingerprint: string; confirmReplace: boolean };
    const ctx = bundleContext(request);
    if (q.mode === 'replace' && !q.confirmReplace) {
        throw new ValidationError('mode=replace deletes resources: confirm with confirmReplace=true', [{ path: 'confirmReplace', message: 'must be true with mode=replace' }]);
    }
    const bundle = await service.decode(archive ? { zip: archive } : { json: request.payload as JsonBundle });
    return service.import(ctx, bundle, q.mode, q.planFingerprint);
};

export const bundleRoutes = (service: BundleService): ServerRoute[] => {
    Fs.mkdirSync(UPLOADS_FOLDER, { recursive: true });
    return routes(service);
};

const routes = (service: BundleService): ServerRoute[] => [
    {
        method: 'GET',
        path: '/api/config-bundles/export',
        options: {
            tags,
            description: 'Export the tenant\'s configuration as a bundle',
            notes: 'JSON `{manifest, documents, assets}` or a ZIP archive (spec 2.9). Secrets and database-held private keys are never exported: the manifest lists what an import must supply.',
            auth: { access: { scope: ROLES } },
            validate: { query: Joi.object({ ...tenantQuery, format: Joi.string().valid('json', 'zip').default('json') }) }
        },
        handler: answering(async (request, h) => {
            const ctx = bundleContext(request);
            const exported = await service.export(ctx);
            if ((request.query as { format: string }).format !== 'zip') {
                return exported.json;
            }
            const day = exported.json.manifest.exportedAt!.slice(0, 10).replace(/-/g, '');
            return h.response(await exported.zip()).type('application/zip').header('content-disposition', `attachment; filename="${ctx.tenantId}-${day}.zip"`);
        })
    },
    {
        method: 'POST',
        path: '/api/config-bundles/plan',
        options: {
            tags,
            description: 'Plan the import of a JSON bundle',
            notes: 'Answers what an import would do to each resource, what the import still needs, and the planFingerprint the import must present.',
            auth: { access: { scope: ROLES } },
            payload: { maxBytes: JSON_BODY_BYTES },
            validate: { query: planQuery, payload: jsonBundleSchema },
            response: { status: { 200: planView } }
        },
        handler: answering(async (request) => {
            const ctx = bundleContext(request);
            return service.plan(ctx, await service.decode({ json: request.payload as JsonBundle }), (request.query as { mode: ImportMode }).mode);
        })
    },
    {
        method: 'POST',
        path: '/api/config-bundles/plan/archive',
        options: {
            tags,
            description: 'Plan the import of a ZIP bundle (multipart field `bundle`)',
            auth: { access: { scope: ROLES } },
            ...archiveUpload,
            plugins: { 'hapi-swagger': { payloadType: 'form' } },
            validate: { query: planQuery, payload: archivePayload },
            response: { status: { 200: planView } }
        },
        handler: answering(async (request) => {
            const ctx = bundleContext(request);
            return service.plan(ctx, await service.decode({ zip: uploaded(request) }), (request.query as { mode: ImportMode }).mode);
        })
    },
    {
        method: 'POST',
        path: '/api/config-bundles/import',
        options: {
            tags,
            description: 'Import a JSON bundle as planned',
            notes: 'All or nothing, in one transaction. 409 CONFIG_PLAN_STALE when the bundle, mode or tenant changed since the plan; 409 with the blocking code when the plan is blocked; 409 OPERATION_IN_PROGRESS while another import into the tenant runs.',
            auth: { access: { scope: ROLES } },
            payload: { maxBytes: JSON_BODY_BYTES },
            validate: { query: importQuery, payload: jsonBundleSchema },
            response: { status: { 200: importView } }
        },
        handler: answering((request) => imported(service, request))
    },
    {
        method: 'POST',
        path: '/api/config-bundles/import/archive',
        options: {
            tags,
            description: 'Import a ZIP bundle as planned (multipart field `bundle`)',
            auth: { access: { scope: ROLES } },
            ...archiveUpload,
            plugins: { 'hapi-swagger': { payloadType: 'form' } },
            validate: { query: importQuery, payload: archivePayload },
            response: { status: { 200: importView } }
        },
        handler: answering((request) => imported(service, request, uploaded(request)))
    },
    {
        method: 'POST',
        path: '/api/config-bundles/documents/upgrade',
        options: {
            tags,
            description: 'Upgrade one configuration document to the current version of its kind',
            notes: 'Runs the registry\'s upgrade steps from the version `$schema` names (spec 9) and validates the result. Answers the document with the current `$schema` and the upgrade warnings. 400 BUNDLE_INVALID for an unknown or newer `$schema`, a failed upgrade step or an invalid result. Reads and stores nothing.',
            auth: { access: { scope: ROLES } },
            payload: { maxBytes: 1024 * 1024 },
            validate: { payload: upgradeRequest },
            response: { status: { 200: upgradeView } }
        },
        handler: answering(async (request) => service.upgrade(request.payload))
    },
    {
        method: 'GET',
        path: '/api/config-bundles/operations',
        options: {
            tags,
            description: 'The latest 50 export and import reports of the tenant',
            auth: { access: { scope: ROLES } },
            validate: { query: Joi.object(tenantQuery) },
            response: { status: { 200: Joi.object({ items: Joi.array().items(operationView).max(50).required() }).label('BundleOperationList') } }
        },
        handler: async (request) => ({ items: await service.operations(bundleContext(request)) })
    },
    {
        method: 'GET',
        path: '/api/config-bundles/operations/{id}',
        options: {
            tags,
            description: 'One export or import report',
            auth: { access: { scope: ROLES } },
            validate: { query: Joi.object(tenantQuery), params: Joi.object({ id: Joi.string().guid().required() }) },
            response: { status: { 200: operationView } }
        },
        handler: async (request) => service.operation(bundleContext(request), (request.params as { id: string }).id)
    },
    {
        method: 'POST',
        path: '/api/config-bundles/operations/{id}/acknowledge-interruption',
        options: {
            tags,
            description: 'Release the lock of an import whose process died',
            notes: 'The database rolled the import back; the lock stays until an operator confirms (confirmWorkerStopped=true) that no process still runs it. The report then shows status interrupted.',
            auth: { access: { scope: ROLES } },
            validate: {
                query: Joi.object({ ...tenantQuery, confirmWorkerStopped: Joi.boolean().valid(true).required().description('Must be true: no process runs this import any more') }),
                params: Joi.object({ id: Joi.string().guid().required() })
            },
            response: { status: { 200: operationView } }
        },
        handler: answering(async (request) => service.acknowledgeInterruption(bundleContext(request), (request.params as { id: string }).id))
    },
    {
        method: 'GET',
        path: '/api/config-bundles/resources',
        options: {
            tags,
            description: 'Ownership, generation and import source of every resource of the tenant',
            auth: { access: { scope: ROLES } },
            validate: { query: Joi.object(tenantQuery) },
            response: { status: { 200: Joi.object({ items: Joi.array().items(resourceView).required() }).label('BundleResourceList') } }
        },
        handler: async (request) => ({ items: await service.resources(bundleContext(request)) })
    },
    {
        method: 'POST',
        path: '/api/config-bundles/resources/{kind}/{id}/detach',
        options: {
            tags,
            description: 'Make a file-managed resource unmanaged',
            notes: 'A later replace import no longer deletes it. Singletons take their kind name as id.',
            auth: { access: { scope: ROLES } },
            validate: { query: Joi.object(tenantQuery), params: Joi.object({ kind: Joi.string().max(64).required(), id: Joi.string().max(255).required() }) },
            response: { status: { 200: resourceView.fork(['source', 'updatedAt'], (k) => k.forbidden()).label('BundleDetached') } }
        },
        handler: answering(async (request) => {
            const { kind, id } = request.params as { kind: string; id: string };
            return service.detach(bundleContext(request), kind, id);
        })
    }
];
