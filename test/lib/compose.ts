import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as core from '../../plugins/core';
import * as oauth2 from '../../plugins/oauth2';
import * as tenancy from '../../plugins/tenancy';
import { startTestServer } from '../helpers/server';
import { tenantKind } from '../../resources/tenant';

export const lab = Lab.script();
const { describe, it } = lab;

describe('composition from a manifest', () => {
    it('starts a server from a subset of plugins; the left-out plugin contributes no routes', async () => {
        const t = await startTestServer('sqlite', { manifest: { name: 'no-docs', plugins: [{ plugin: core.plugin }, { plugin: oauth2.plugin }, { plugin: tenancy.plugin }] } });
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

    it('loads a plugin named by module path, as a JSON manifest would', async () => {
        const t = await startTestServer('sqlite', {
            manifest: { name: 'by-name', plugins: [{ plugin: core.plugin }, { plugin: Path.join(__dirname, '../fixtures/probe-plugin') }] }
        });
        try {
            expect((await t.server.inject('/api/probe/conflict')).statusCode).to.equal(409);
            expect(t.server.registry.has(tenantKind)).to.be.false();
        }
        finally {
            await t.stop();
        }
    });

    it('fails to start when a plugin misses the plugin it depends on', async () => {
        await expect(startTestServer('sqlite', { manifest: { name: 'broken', plugins: [{ plugin: tenancy.plugin }] } })).to.reject(/hallmark-core/);
    });
});
