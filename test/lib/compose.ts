import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import Pino from 'pino';
import { createServer, type Manifest } from '../../lib/compose';
import * as core from '../../plugins/core';
import * as oauth2 from '../../plugins/oauth2';
import * as tenancy from '../../plugins/tenancy';
import { createTestDatabase, type TestDatabase } from '../helpers/databases';
import { defaultManifestOnly, startTestServer } from '../helpers/server';
import { keyChainKind } from '../../resources/key-chain';
import { tenantKind } from '../../resources/tenant';

export const lab = Lab.script();
const { describe, it } = lab;

describe('composition from a manifest', () => {
    it('starts a server from a subset of plugins; the left-out plugin contributes no routes', async () => {
        const t = await startTestServer('sqlite', { manifest: defaultManifestOnly('no-docs', 'hallmark-core', 'hallmark-oauth2', 'hallmark-tenancy') });
        try {
            expect((await t.server.inject('/health')).statusCode).to.equal(200);
            expect((await t.server.inject('/api/docs')).statusCode).to.equal(404);
            expect((await t.server.inject('/api/docs-json')).statusCode).to.equal(404);
            expect(t.server.table().some((r) => r.path.startsWith('/api/docs'))).to.be.false();
            expect(t.server.registry.has(tenantKind)).to.be.true();
        }
        finally {
            await t.stop();
        }
    });

    it('compresses responses of 16 KiB and more only: gzip cost ~0.2 ms of CPU per protocol message of a few KB', async () => {
        const t = await startTestServer('sqlite', { manifest: defaultManifestOnly('no-docs', 'hallmark-core', 'hallmark-oauth2', 'hallmark-tenancy') });
        try {
            const size = (bytes: number) => ({ text: 'x'.repeat(bytes) });
            t.server.route({ method: 'GET', path: '/test/sized/{bytes}', options: { auth: false }, handler: (request) => size(Number(request.params.bytes)) });
            const get = (bytes: number) => t.server.inject({ url: `/test/sized/${bytes}`, headers: { 'accept-encoding': 'gzip, deflate, br' } });
            const small = await get(8000);
            expect(small.statusCode).to.equal(200);
            expect(small.headers['content-encoding']).to.not.exist();
            expect(JSON.parse(small.payload).text.length).to.equal(8000);
            const large = await get(20000);
            expect(large.headers['content-encoding']).to.equal('gzip');
            expect(large.rawPayload.length).to.be.below(1000);
        }
        finally {
            await t.stop();
        }
    });

    it('loads a plugin named by module path, as a JSON manifest would', async () => {
        const t = await startTestServer('sqlite', {
            manifest: (config) => {
                const base = defaultManifestOnly('by-name', 'hallmark-core')(config);
                return { ...base, plugins: [...base.plugins, { plugin: Path.join(__dirname, '../fixtures/probe-plugin') }] };
            }
        });
        try {
            expect((await t.server.inject('/api/probe/conflict')).statusCode).to.equal(409);
            // Only what the manifest names: core (which owns the Tenant kind) and the probe, no tenancy routes.
            expect(Object.keys(t.server.registrations)).to.equal(['hallmark-core', 'test-probe']);
            expect(t.server.registry.has(tenantKind)).to.be.true();
        }
        finally {
            await t.stop();
        }
    });

    it('fails to start when a plugin misses the plugin it depends on', async () => {
        await expect(startTestServer('sqlite', { manifest: defaultManifestOnly('broken', 'hallmark-tenancy') })).to.reject(/hallmark-core/);
    });

    it('names the plugin and every dependency the manifest does not list', async () => {
        await expect(startTestServer('sqlite', {
            manifest: (config) => {
                // The verifier first, so its missing dependencies are the ones named.
                const base = defaultManifestOnly('verifier', 'hallmark-core', 'hallmark-oauth2', 'hallmark-tenancy', 'hallmark-oid4vci', 'hallmark-oid4vp')(config);
                return { ...base, plugins: [...base.plugins].reverse() };
            }
        }))
            .to.reject('Manifest verifier: plugin hallmark-oid4vp needs hallmark-kms, hallmark-sessions, which the manifest does not list');
    });

    it('registers a plugin after the plugins it depends on, whatever the order of the manifest', async () => {
        const t = await startTestServer('sqlite', {
            manifest: (config) => {
                const base = defaultManifestOnly('reversed', 'hallmark-core', 'hallmark-oauth2', 'hallmark-tenancy', 'hallmark-kms', 'hallmark-kms-db')(config);
                return { ...base, plugins: [...base.plugins].reverse() };
            }
        });
        try {
            expect(t.server.registry.has(keyChainKind)).to.be.true();
            expect(Object.keys(t.server.registrations)).to.include(['hallmark-core', 'hallmark-kms-db']);
        }
        finally {
            await t.stop();
        }
    });
});

describe('plugin options from a host\'s own manifest (no environment)', () => {
    const ROOT = { clientId: 'host-root', clientSecret: 'host-root-secret-0123456789' };

    const hostManifest = (database: TestDatabase, tenancyOptions: unknown = {}): Manifest => ({
        name: 'host',
        server: { port: 0, host: '127.0.0.1' },
        plugins: [
            { plugin: core.plugin, options: { database: database.config, secrets: { masterSecret: 'host-master-secret-0123456789-abcdefghij' }, worker: false } },
            { plugin: oauth2.plugin, options: { publicUrl: 'https://host.example', tokenTtl: 600, ...ROOT } },
            { plugin: tenancy.plugin, options: tenancyOptions }
        ]
    });

    it('configures each plugin from the options its manifest line gives it', async () => {
        const database = await createTestDatabase('sqlite');
        const server = await createServer(hostManifest(database), { logger: Pino({ level: 'silent' }) });
        try {
            await server.initialize();
            const res = await server.inject({ method: 'POST', url: '/api/oauth2/token', payload: { grant_type: 'client_credentials', client_id: ROOT.clientId, client_secret: ROOT.clientSecret } });
            expect(res.statusCode, res.payload).to.equal(200);
            expect((res.result as { expires_in: number }).expires_in).to.equal(600);
        }
        finally {
            await server.stop();
            await database.drop();
        }
    });

    it('refuses a bad option at registration, naming the plugin and the option', async () => {
        const database = await createTestDatabase('sqlite');
        try {
            await expect(createServer(hostManifest(database, { audit: { retentionDays: -1 } }), { logger: Pino({ level: 'silent' }) }))
                .to.reject('Plugin hallmark-tenancy: invalid options: "audit.retentionDays" must be greater than or equal to 0');
            await expect(createServer(hostManifest(database, { retention: 3 }), { logger: Pino({ level: 'silent' }) }))
                .to.reject('Plugin hallmark-tenancy: invalid options: "retention" is not allowed');
        }
        finally {
            await database.drop();
        }
    });
});
