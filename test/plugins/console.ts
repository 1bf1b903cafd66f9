import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { Writable } from 'node:stream';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import Pino from 'pino';
import { contentSecurityPolicy } from '../../plugins/console';
import { buildConsole, withConsoleOptions } from '../helpers/console';
import { DIALECTS } from '../helpers/databases';
import { freePort } from '../helpers/net';
import { startTestServer, type TestServer } from '../helpers/server';

/** The console's HTTP side: what /console serves, with which caching and security headers (the pages: test/console). */

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const strictCsp = (csp: string | undefined) => {
    expect(csp).to.exist();
    for (const directive of ['default-src \'none\'', 'script-src \'self\'', 'style-src \'self\'', 'connect-src \'self\'', 'frame-ancestors \'none\'', 'base-uri \'none\'', 'form-action \'none\'']) {
        expect(csp).to.contain(directive);
    }
    expect(csp).to.not.contain('unsafe-inline');
    expect(csp).to.not.contain('unsafe-eval');
    expect(csp).to.not.contain('data:');
    expect(csp).to.not.contain('*');
};

for (const dialect of DIALECTS) {
    describe(`console plugin (${dialect})`, () => {
        let t: TestServer;
        before(async () => {
            t = await startTestServer(dialect, { manifest: withConsoleOptions({ assets: buildConsole() }) });
        });
        after(() => t.stop());

        it('serves the page, revalidated on every load, with a strict CSP and no token', async () => {
            const res = await t.server.inject('/console');
            expect(res.statusCode).to.equal(200);
            expect(res.headers['content-type']).to.contain('text/html');
            expect(res.headers['cache-control']).to.equal('no-cache');
            expect(res.headers.etag).to.exist();
            strictCsp(res.headers['content-security-policy'] as string);
            expect(res.headers['x-content-type-options']).to.equal('nosniff');
            expect(res.headers['x-frame-options']).to.equal('DENY');
            expect(res.headers['referrer-policy']).to.equal('no-referrer');
            // Only this service's own assets, by absolute path; nothing inline.
            const refs = [...res.payload.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
            expect(refs.length).to.equal(2);
            refs.forEach((ref) => expect(ref).to.match(/^\/console\/assets\/[a-z]+-[A-Z0-9]+\.(js|css)$/));
            expect(res.payload).to.not.match(/<script>|<style>|style="/);
            expect((await t.server.inject('/console/')).statusCode).to.equal(200);
        });

        it('serves content-hashed assets as immutable for a year, and 404 with the same headers for anything else', async () => {
            const page = await t.server.inject('/console');
            for (const ref of [...page.payload.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!)) {
                const res = await t.server.inject(ref);
                expect(res.statusCode).to.equal(200);
                expect(res.headers['content-type']).to.match(ref.endsWith('.js') ? /javascript/ : /text\/css/);
                expect(res.headers['cache-control']).to.equal('public, max-age=31536000, immutable');
                strictCsp(res.headers['content-security-policy'] as string);
            }
            for (const url of ['/console/assets/missing.js', '/console/assets/../index.html', '/console/assets/%2e%2e/index.html', '/console/assets/']) {
                const res = await t.server.inject(url);
                expect(res.statusCode, url).to.be.within(400, 404);
                expect(res.headers['cache-control'], url).to.not.contain('immutable');
                strictCsp(res.headers['content-security-policy'] as string);
            }
        });

        it('answers its start-up settings: the sign-in mode and every configuration kind with its schema version', async () => {
            const res = await t.server.inject('/console/config.json');
            expect(res.statusCode).to.equal(200);
            const body = res.result as { auth: Record<string, string>; kinds: Array<{ kind: string; file: string; version: number }> };
            expect(body.auth).to.equal({ mode: 'integrated', tokenEndpoint: '/api/oauth2/token' });
            expect(body.kinds.map((k) => k.kind)).to.include(['CredentialConfig', 'PresentationConfig', 'TrustList', 'WebhookEndpoint', 'AttributeProvider', 'IssuanceConfig', 'StatusList', 'KeyChain']);
            for (const k of body.kinds) {
                expect((await t.server.inject(`/api/schemas/v${k.version}/${k.file}.schema.json`)).statusCode, k.file).to.equal(200);
            }
        });
    });
}

describe('console plugin without built assets', () => {
    it('warns at start and answers 503 naming the build step', async () => {
        const empty = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-console-empty-'));
        const lines: Array<{ msg: string; assets?: string }> = [];
        const sink = new Writable({
            write(chunk, _enc, done) {
                lines.push(JSON.parse(chunk.toString()));
                done();
            }
        });
        const t = await startTestServer('sqlite', { manifest: withConsoleOptions({ assets: empty }), listen: true, logger: Pino({ level: 'warn' }, sink) });
        try {
            const warnings = lines.filter((l) => l.msg.includes('console assets are not built: run npm run build'));
            expect(warnings).to.have.length(1);
            expect(warnings[0]!.assets).to.equal(empty);
            const res = await t.server.inject('/console');
            expect(res.statusCode).to.equal(503);
            expect(res.payload).to.contain('npm run build');
            strictCsp(res.headers['content-security-policy'] as string);
            expect((await t.server.inject('/console/assets/main.js')).statusCode).to.equal(404);
        }
        finally {
            await t.stop();
            Fs.rmSync(empty, { recursive: true, force: true });
        }
    });
});

describe('console plugin in external OIDC mode', () => {
    it('signs in at the provider: its issuer in the settings and its origin, only, added to connect-src', async () => {
        // The provider need not run: discovery is retried on the first token check, and the console only names it.
        const issuer = `http://127.0.0.1:${await freePort()}/realms/hallmark`;
        const t = await startTestServer('sqlite', { manifest: withConsoleOptions({ assets: buildConsole() }), env: { OIDC: issuer, OIDC_AUDIENCE: 'hallmark', AUTH_CLIENT_ID: '', AUTH_CLIENT_SECRET: '' } });
        try {
            const settings = await t.server.inject('/console/config.json');
            expect((settings.result as { auth: object }).auth).to.equal({ mode: 'external', issuer });
            const csp = (await t.server.inject('/console')).headers['content-security-policy'] as string;
            strictCsp(csp);
            expect(csp).to.contain(`connect-src 'self' ${new URL(issuer).origin};`);
        }
        finally {
            await t.stop();
        }
    });

    it('refuses to start without the provider\'s issuer (the console could not sign in)', async () => {
        const issuer = `http://127.0.0.1:${await freePort()}/realms/hallmark`;
        await expect(startTestServer('sqlite', { manifest: withConsoleOptions({ assets: buildConsole(), oidcIssuer: undefined }), env: { OIDC: issuer, OIDC_AUDIENCE: 'hallmark', AUTH_CLIENT_ID: '', AUTH_CLIENT_SECRET: '' } }))
            .to.reject(/external OIDC mode needs the oidcIssuer option/);
    });

    it('builds the policy with extra origins for connect-src only', () => {
        const csp = contentSecurityPolicy(['https://idp.example']);
        expect(csp).to.contain('connect-src \'self\' https://idp.example;');
        expect(csp).to.contain('script-src \'self\';');
    });
});
