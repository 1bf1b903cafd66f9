import type Hapi from '@hapi/hapi';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { nameOf, resolvePlugin } from '../../lib/compose';
import { loadConfig } from '../../manifests/environment';
import { manifest as defaultManifest } from '../../manifests/default';
import { badgeKind, plugin as kindPlugin } from '../fixtures/kind-plugin';
import { DIALECTS } from '../helpers/databases';
import { manifestFor, ROOT_CLIENT, startTestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it } = lab;

/** Every plugin of the default manifest, by name (the manifest needs a configuration; the names do not depend on it). */
const pluginNames = defaultManifest(loadConfig({ NODE_ENV: 'test', PUBLIC_URL: 'http://hallmark.test', MASTER_SECRET: 'x'.repeat(32), AUTH_CLIENT_ID: ROOT_CLIENT.id, AUTH_CLIENT_SECRET: ROOT_CLIENT.secret }))
    .plugins.map((entry) => nameOf(resolvePlugin(entry)));

for (const dialect of DIALECTS) {
    describe(`each plugin on its own manifest (${dialect})`, () => {
        for (const name of pluginNames) {
            it(`starts ${name} with only the plugins it declares, transitively`, async () => {
                const t = await startTestServer(dialect, { manifest: manifestFor(name) });
                expect(Object.keys(t.server.registrations)).to.include(name);
                await t.stop();
            });
        }
    });
}

describe('a plugin that does not declare a plugin it uses', () => {
    /** The fixture's Badge kind depends on KeyChain, which the kms plugin registers; this copy forgets to say so. */
    const forgetful: Hapi.Plugin<Record<string, never>> = {
        name: 'forgetful-badges',
        dependencies: ['hallmark-core', 'hallmark-tenancy'],
        register(server) {
            server.registerResource(badgeKind);
        }
    };

    it('fails to start on its own manifest, naming what is missing', async () => {
        await expect(startTestServer('sqlite', { manifest: manifestFor('hallmark-core', { plugin: forgetful }) }))
            .to.reject('Resource kind Badge depends on KeyChain, which no plugin registers');
    });

    it('starts once it declares the plugin', async () => {
        const t = await startTestServer('sqlite', { manifest: manifestFor('hallmark-core', { plugin: kindPlugin }) });
        expect(Object.keys(t.server.registrations)).to.include(['acme-badges', 'hallmark-kms']);
        await t.stop();
    });
});
