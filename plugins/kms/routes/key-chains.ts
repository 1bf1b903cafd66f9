import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { tenantContext } from '../../../lib/auth/context';
import { NotFoundError } from '../../../lib/errors';
import { pageOf, pageQuery, paginate, type Page } from '../../../lib/http/pagination';
import type { StoredResource } from '../../../lib/registry/kind';
import { keyChainKind, KEY_CHAIN_USAGES, keyChainSchema, type KeyChain } from '../../../resources/key-chain';
import type { KeyChainService } from '../services/key-chains';

const READ = ['key:manage', 'key:read', 'tenant:read'];
const WRITE = ['key:manage'];

const pem = Joi.string().pattern(/^-----BEGIN CERTIFICATE-----[\s\S]+-----END CERTIFICATE-----\s*$/, 'PEM certificate');

const keyChainView = (keyChainSchema as Joi.ObjectSchema).keys({
    keySource: Joi.forbidden(),
    kmsProvider: Joi.string().required(),
    publicJwk: Joi.object().unknown(true).required(),
    certificateChain: Joi.array().items(Joi.string()).required().description('PEM, leaf first; the root CA is not included'),
    rootCertificate: Joi.string().description('internalChain only: the tenant root CA'),
    previousPublicJwks: Joi.array().items(Joi.object().unknown(true)).description('Keys replaced by rotation, still valid for verification'),
    createdAt: Joi.string().isoDate(),
    updatedAt: Joi.string().isoDate(),
    rotatedAt: Joi.string().isoDate()
}).label('KeyChainView');

const importBody = Joi.object({
    id: keyChainSchema.extract('id').required(),
    usageType: Joi.string().valid(...KEY_CHAIN_USAGES).required(),
    kmsProvider: Joi.string(),
    privateJwk: Joi.object({ kty: Joi.string().valid('EC').required(), crv: Joi.string().valid('P-256').required(), x: Joi.string().required(), y: Joi.string().required(), d: Joi.string().required() }).unknown(true).required(),
    certificateChain: Joi.array().items(pem).min(1).required().description('PEM, leaf first; a trailing root CA is kept apart')
}).label('KeyChainImport');

const params = Joi.object({ id: keyChainSchema.extract('id').required() });

export const keyChainRoutes = (keyChains: KeyChainService): ServerRoute[] => {
    const view = async (tenantId: string, stored: StoredResource<KeyChain>) => {
        const m = await keyChains.material(tenantId, stored.spec.id);
        return {
            ...stored.spec,
            kmsProvider: m.kmsProvider,
            publicJwk: m.publicJwk,
            certificateChain: m.certificateChain,
            ...(m.rootCertificate ? { rootCertificate: m.rootCertificate } : {}),
            ...(m.previousKeys.length ? { previousPublicJwks: m.previousKeys.map((k) => k.publicJwk) } : {}),
            createdAt: stored.createdAt,
            updatedAt: stored.updatedAt,
            rotatedAt: m.rotatedAt
        };
    };

    return [
        {
            method: 'GET',
            path: '/api/key-chain',
            options: {
                tags: ['api', 'key-chains'],
                description: 'List key chains',
                auth: { access: { scope: READ } },
                validate: { query: Joi.object({ ...pageQuery, usageType: Joi.string().valid(...KEY_CHAIN_USAGES) }) },
                response: { status: { 200: pageOf(keyChainView, 'KeyChainPage') } }
            },
            handler: async (request) => {
                const ctx = tenantContext(request);
                const query = request.query as unknown as Page & { usageType?: string };
                const all = (await request.server.registry.list(ctx, keyChainKind))
                    .filter((k) => !query.usageType || k.spec.usageType === query.usageType);
                const page = paginate(all, query);
                return { ...page, items: await Promise.all(page.items.map((k) => view(ctx.tenantId, k))) };
            }
        },
        {
            method: 'POST',
            path: '/api/key-chain',
            options: {
                tags: ['api', 'key-chains'],
                description: 'Create a key chain: a new key in the KMS provider and its certificate',
                notes: 'internalChain (default): the tenant root CA, made on first use, signs the leaf; standalone: a self-signed leaf. keySource external-reference adopts a key that already exists in a provider, after it signs a challenge that the stated public key verifies.',
                auth: { access: { scope: WRITE } },
                validate: { payload: keyChainSchema },
                response: { status: { 201: keyChainView } }
            },
            handler: async (request, h) => {
                const ctx = tenantContext(request);
                const result = await request.server.registry.write(ctx, keyChainKind, request.payload, { mode: 'create' });
                return h.response(await view(ctx.tenantId, result.resource)).code(201);
            }
        },
        {
            method: 'POST',
            path: '/api/key-chain/import',
            options: {
                tags: ['api', 'key-chains'],
                description: 'Import a key chain from a private key and its certificate chain',
                notes: 'The provider must be able to import keys (the db provider can).',
                auth: { access: { scope: WRITE } },
                validate: { payload: importBody },
                response: { status: { 201: keyChainView } }
            },
            handler: async (request, h) => {
                const ctx = tenantContext(request);
                const { privateJwk, certificateChain, ...rest } = request.payload as { id: string; usageType: string; kmsProvider?: string; privateJwk: Record<string, unknown>; certificateChain: string[] };
                // Only the key itself: WebCrypto exports add members such as key_ops and ext.
                const { kty, crv, x, y, d } = privateJwk;
                const spec = { ...rest, type: 'standalone', keySource: { type: 'private-jwk', privateJwk: { kty, crv, x, y, d }, certificateChain } };
                const result = await request.server.registry.write(ctx, keyChainKind, spec, { mode: 'create' });
                return h.response(await view(ctx.tenantId, result.resource)).code(201);
            }
        },
        {
            method: 'GET',
            path: '/api/key-chain/{id}',
            options: {
                tags: ['api', 'key-chains'],
                description: 'Get a key chain (public parts only)',
                auth: { access: { scope: READ } },
                validate: { params },
                response: { status: { 200: keyChainView } }
            },
            handler: async (request) => {
                const ctx = tenantContext(request);
                const found = await request.server.registry.get(ctx, keyChainKind, request.params.id as string);
                if (!found) {
                    throw new NotFoundError('Key chain not found');
                }
                return view(ctx.tenantId, found);
            }
        },
        {
            method: 'PUT',
            path: '/api/key-chain/{id}',
            options: {
                tags: ['api', 'key-chains'],
                description: 'Update a key chain\'s settings (subject, SAN, validity, rotation policy); certificates follow at the next rotation',
                auth: { access: { scope: WRITE } },
                validate: { params, payload: (keyChainSchema as Joi.ObjectSchema).fork(['id'], (s) => s.optional()) },
                response: { status: { 200: keyChainView } }
            },
            handler: async (request) => {
                const ctx = tenantContext(request);
                const id = request.params.id as string;
                const body = request.payload as KeyChain;
                const result = await request.server.registry.write(ctx, keyChainKind, { ...body, id }, { mode: 'update' });
                return view(ctx.tenantId, result.resource);
            }
        },
        {
            method: 'DELETE',
            path: '/api/key-chain/{id}',
            options: {
                tags: ['api', 'key-chains'],
                description: 'Delete a key chain and the keys it generated (409 while a configuration references it)',
                auth: { access: { scope: WRITE } },
                validate: { params }
            },
            handler: async (request, h) => {
                await request.server.registry.remove(tenantContext(request), keyChainKind, request.params.id as string);
                return h.response().code(204);
            }
        },
        {
            method: 'POST',
            path: '/api/key-chain/{id}/rotate',
            options: {
                tags: ['api', 'key-chains'],
                description: 'Rotate: a new key and certificate; the previous public key stays available for verification',
                auth: { access: { scope: WRITE } },
                validate: { params },
                response: { status: { 200: keyChainView } }
            },
            handler: async (request) => {
                const ctx = tenantContext(request);
                const { registry } = request.server;
                const found = await registry.get(ctx, keyChainKind, request.params.id as string);
                if (!found) {
                    throw new NotFoundError('Key chain not found');
                }
                const result = await registry.write(ctx, keyChainKind, { ...found.spec, keySource: { type: 'regenerate' } }, { mode: 'update' });
                return view(ctx.tenantId, result.resource);
            }
        }
    ];
};
