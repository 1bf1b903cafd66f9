import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import jsQR from 'jsqr';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { PNG } from 'pngjs';
import { projectRoot } from '../../lib/package-info';
import { buildConsole, withConsoleOptions } from '../helpers/console';
import { DIALECTS } from '../helpers/databases';
import { freePort } from '../helpers/net';
import { ROOT_CLIENT, startTestServer, type TestServer } from '../helpers/server';
import { Holder } from '../helpers/holder';
import { Wallet } from '../helpers/wallet';

/**
 * The operator console in a real browser: Debian's Chromium (scripts/ensure-chromium.sh) driven by playwright-core,
 * against a listening service on each database. A few focused scenarios, since a browser is slow on a small machine:
 * sign in, tenant and client, a credential configuration through the generated form (an API field error shown at
 * its field first), an offer whose QR code is read back and whose session turns completed live when a wallet takes
 * the credential, a bundle exported and planned, a page hidden from a token without its role, the CSP header, and
 * not one request to a host other than the service. Screenshots of each page go to tmp/console-screenshots/.
 */

export const lab = Lab.script();
const { describe, it, before, after, afterEach } = lab;

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = Path.join(projectRoot, 'tmp', 'console-screenshots');

/** axe-core, evaluated in the page through the DevTools protocol (the page's CSP allows no injected script tag). */
const AXE = Fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

const ISSUER_KEY_CHAIN = JSON.parse(Fs.readFileSync(Path.join(projectRoot, 'examples', 'config', 'demo', 'key-chains', 'issuer.json'), 'utf8')).spec;

/** Reads the QR code drawn in an element: a screenshot of it, decoded by jsQR (independent of the encoder). */
const readQr = async (page: Page, selector: string): Promise<string | undefined> => {
    const png = PNG.sync.read(await page.locator(selector).screenshot());
    return jsQR(new Uint8ClampedArray(png.data.buffer, png.data.byteOffset, png.data.byteLength), png.width, png.height)?.data;
};

for (const dialect of DIALECTS) {
    describe(`operator console in Chromium (${dialect})`, () => {
        let t: TestServer;
        let origin: string;
        let context: BrowserContext;
        let page: Page;
        let profile: string;
        const requested: string[] = [];
        const pageErrors: string[] = [];

        before(async () => {
            const assets = buildConsole();
            const port = await freePort();
            origin = `http://127.0.0.1:${port}`;
            t = await startTestServer(dialect, {
                listen: true,
                // The demo tenant (examples/config) has what a presentation needs: access key chain, trust list, DCQL.
                env: { PORT: String(port), PUBLIC_URL: origin, CONFIG_FOLDER: Path.join(projectRoot, 'examples', 'config') },
                manifest: withConsoleOptions({ assets })
            });
            profile = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-chromium-'));
            context = await chromium.launchPersistentContext(profile, {
                executablePath: CHROMIUM,
                headless: true,
                args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
                viewport: { width: 1366, height: 800 }
            });
            page = context.pages()[0] ?? await context.newPage();
            page.setDefaultTimeout(15_000);
            page.on('request', (request) => requested.push(request.url()));
            page.on('pageerror', (err) => pageErrors.push(err.message));
            // A CSP violation is reported on the page's console ("Refused to load …", "Refused to apply inline style …").
            page.on('console', (message) => {
                if (message.type() === 'error' && /Refused to|Content Security Policy/.test(message.text())) {
                    pageErrors.push(message.text());
                }
            });
            Fs.mkdirSync(SHOTS, { recursive: true });
        });

        after(async () => {
            await context?.close();
            await t?.stop();
            if (profile) {
                Fs.rmSync(profile, { recursive: true, force: true });
            }
        });

        let step = 0;
        afterEach(async () => {
            // The state after each step, so a failure can be seen.
            await page?.screenshot({ path: Path.join(SHOTS, `${dialect}-step-${++step}.png`), fullPage: true }).catch(() => undefined);
        });

        /** No serious or critical axe-core violation (WCAG 2.x A and AA rules: labels, contrast, names, landmarks). */
        const accessible = async (name: string) => {
            if (!await page.evaluate(() => 'axe' in globalThis)) {
                await page.evaluate(AXE);
            }
            const result = await page.evaluate(() => (globalThis as any).axe.run({ runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } })) as { violations: Array<{ id: string; impact: string; nodes: Array<{ target: string[] }> }> };
            const serious = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
            expect(serious.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`), `accessibility of ${name}`).to.equal([]);
        };

        /** A screenshot of the page (a test artifact) and its accessibility check. */
        const shot = async (name: string) => {
            await page.screenshot({ path: Path.join(SHOTS, `${dialect}-${name}.png`), fullPage: true });
            await accessible(name);
        };

        const signIn = async (clientId: string, secret: string) => {
            await page.goto(`${origin}/console`);
            await page.getByLabel('Client id').fill(clientId);
            await page.getByLabel('Client secret').fill(secret);
            await page.getByRole('button', { name: 'Sign in' }).click();
            await page.getByRole('button', { name: 'Sign out' }).waitFor();
        };

        let adminSecret: string;

        it('serves the console with a strict CSP and signs in the root client', async () => {
            const res = await page.goto(`${origin}/console`);
            const csp = res!.headers()['content-security-policy']!;
            expect(csp).to.contain('default-src \'none\'');
            expect(csp).to.contain('script-src \'self\'');
            expect(csp).to.contain('frame-ancestors \'none\'');
            await signIn(ROOT_CLIENT.id, ROOT_CLIENT.secret);
            await page.getByRole('heading', { name: 'Tenants and clients' }).waitFor();
            // The root client (tenant:manage, no tenant) sees no tenant configuration pages.
            expect(await page.getByRole('link', { name: 'Credential configurations' }).count()).to.equal(0);
            await shot('tenants');
        });

        it('creates a tenant and its admin client, shows the secret once and signs in with it', async () => {
            await page.getByLabel('Tenant id').fill('acme');
            await page.getByLabel('Name', { exact: true }).fill('Acme');
            await page.getByRole('button', { name: 'Create tenant' }).click();
            await page.getByRole('cell', { name: 'acme', exact: true }).waitFor();
            await page.getByLabel('Client id').fill('acme-admin');
            await page.getByLabel('Tenant', { exact: true }).fill('acme');
            await page.getByLabel('tenant:admin').check();
            await page.getByRole('button', { name: 'Create client' }).click();
            const secret = page.locator('.secret code');
            await secret.waitFor();
            adminSecret = (await secret.textContent())!;
            expect(adminSecret.length).to.be.above(20);
            await page.getByRole('button', { name: 'Sign in as acme-admin' }).click();
            await page.locator('header .who').filter({ hasText: 'tenant acme' }).waitFor();
        });

        it('creates a credential configuration through the generated form, showing the API\'s field error at the field', async () => {
            // The key chain the configuration names, through the API with the same client's token.
            const token = await (await fetch(`${origin}/api/oauth2/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ grant_type: 'client_credentials', client_id: 'acme-admin', client_secret: adminSecret }) })).json() as { access_token: string };
            const chain = await fetch(`${origin}/api/key-chain`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token.access_token}` }, body: JSON.stringify(ISSUER_KEY_CHAIN) });
            expect(chain.status).to.equal(201);

            await page.getByRole('link', { name: 'Credential configurations' }).click();
            await page.getByRole('link', { name: 'New credential configuration' }).click();
            const form = page.locator('form.editor');
            await form.locator('[data-path="id"] input').fill('not a valid id!');
            await form.locator('[data-path="config.format"] select').selectOption({ label: 'dc+sd-jwt' });
            await form.getByRole('button', { name: 'Add display' }).first().click();
            await form.locator('[data-path="config.display.0.locale"] input').fill('en');
            await form.locator('[data-path="config.display.0.name"] input').fill('Employee badge');
            await form.locator('[data-path="vct"] textarea').fill('"urn:example:badge"');
            await form.locator('[data-path="keyChainId"] input').fill('issuer');
            await form.locator('[data-path="statusManagement"] select').selectOption({ label: 'true' });
            await form.getByRole('button', { name: 'Add fields' }).click();
            await form.locator('[data-path="fields.0.path"] textarea').fill('["given_name"]');
            await form.locator('[data-path="fields.0.type"] select').selectOption({ label: 'string' });
            await form.getByRole('button', { name: 'Create' }).click();

            // The API names the id: the message is shown at that input, which is marked invalid.
            const idField = form.locator('[data-path="id"]');
            await idField.locator('.field-error:not([hidden])').waitFor();
            expect(await idField.locator('input').getAttribute('aria-invalid')).to.equal('true');
            await shot('credential-config-error');

            await idField.locator('input').fill('badge');
            await form.getByRole('button', { name: 'Create' }).click();
            await page.getByRole('heading', { name: 'Credential configurations: badge' }).waitFor();
            // The raw JSON editor holds the same document.
            await page.getByRole('tab', { name: 'JSON' }).click();
            const json = JSON.parse(await page.getByLabel('Document spec as JSON').inputValue());
            expect(json).to.include({ id: 'badge', vct: 'urn:example:badge', keyChainId: 'issuer' });
            expect(json.fields[0]).to.include({ type: 'string' });
            await shot('credential-config');
            // An edit (PATCH) from the form.
            await page.getByRole('tab', { name: 'Form' }).click();
            await form.locator('[data-path="description"] input').fill('Badges of Acme staff');
            await form.getByRole('button', { name: 'Save' }).click();
            await page.getByText('Saved.').waitFor();
            await page.getByRole('link', { name: 'Back to credential configurations' }).click();
            await page.getByRole('cell', { name: 'Badges of Acme staff' }).waitFor();
        });

        it('makes an offer whose QR code carries the link, and shows the session completing live', async () => {
            await page.getByRole('link', { name: 'Offers' }).click();
            await page.getByLabel('badge').check();
            await page.getByLabel('Claims (JSON, the same for each configuration)').fill('{"given_name": "Erika"}');
            await page.getByRole('button', { name: 'Create credential offer' }).click();
            await page.locator('svg.qr').waitFor();
            const link = await page.locator('#offer-link').inputValue();
            expect(link).to.startWith('openid-credential-offer://');
            expect(await readQr(page, 'svg.qr')).to.equal(link);
            const badge = page.locator('.offer-result .badge');
            expect(await badge.textContent()).to.equal('active');
            await shot('offer');

            const wallet = new Wallet();
            const received = await wallet.receive(link, { configurationId: 'badge' });
            await page.locator('.offer-result .badge', { hasText: 'fetched' }).waitFor();
            await wallet.notify(received, 'credential_accepted');
            await page.locator('.offer-result .badge', { hasText: 'completed' }).waitFor();

            // The credential's status list entry, revoked from the status page; a revoked entry stays revoked.
            const payload = JSON.parse(Buffer.from(received.credentials[0]!.split('~')[0]!.split('.')[1]!, 'base64url').toString('utf8'));
            const index = String(payload.status.status_list.idx);
            await page.getByRole('link', { name: 'Status entries' }).click();
            await page.getByLabel('Index').fill(index);
            await page.getByRole('button', { name: 'Revoke' }).click();
            await page.getByText(new RegExp(`^Entry ${index} of .+ is now 1\\.$`)).waitFor();
            await page.getByRole('button', { name: 'Reinstate' }).click();
            await page.locator('.notice.error').waitFor();
            await shot('status-entries');

            await page.getByRole('link', { name: 'Sessions', exact: true }).click();
            await page.locator('table .badge', { hasText: 'completed' }).waitFor();
            await shot('sessions');
            // The search box finds the session by its pasted offer link; a status filter that excludes it empties the list.
            await page.getByLabel('Search').fill(link);
            await page.getByRole('button', { name: 'Search' }).click();
            await page.getByRole('table', { name: 'Sessions (1)' }).waitFor();
            await page.getByText('More filters').click();
            await page.getByLabel('failed', { exact: true }).check();
            await page.getByRole('button', { name: 'Search' }).click();
            await page.getByRole('table', { name: 'Sessions (0)' }).waitFor();
            await page.getByLabel('failed', { exact: true }).uncheck();
            await page.getByLabel('Search').fill('');
            await page.getByRole('button', { name: 'Search' }).click();
            await page.getByRole('table', { name: 'Sessions (1)' }).waitFor();
        });

        it('exports a bundle, reviews the plan of importing it back and imports it', async () => {
            await page.getByRole('link', { name: 'Bundles' }).click();
            const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download JSON bundle' }).click()]);
            const file = Path.join(profile, 'bundle.json');
            await download.saveAs(file);
            expect(JSON.parse(Fs.readFileSync(file, 'utf8')).manifest).to.exist();
            await page.getByLabel('Bundle (ZIP or JSON)').setInputFiles(file);
            await page.getByRole('button', { name: 'Review plan' }).click();
            await page.getByRole('table', { name: /^Plan/ }).waitFor();
            expect(await page.getByRole('cell', { name: 'badge', exact: true }).count()).to.be.above(0);
            await shot('bundles');
            // The exported client has no secret: the plan is blocked until one is supplied (here: generated).
            await page.getByRole('cell', { name: 'CLIENT_SECRET_REQUIRED' }).waitFor();
            await page.getByLabel('Generate a new secret for Client/acme-admin (shown once)').check();
            await page.getByRole('button', { name: 'Plan again with these values' }).click();
            await page.getByRole('button', { name: 'Import this plan' }).click();
            await page.getByRole('table', { name: 'Imported' }).waitFor();
            await page.getByRole('link', { name: 'Audit log' }).click();
            await page.getByRole('table', { name: /^Audit log/ }).waitFor();
            await shot('audit');
        });

        // The pages do not depend on the database: walked once, on the first dialect of the run.
        it('shows every page of a tenant administrator accessibly', { skip: dialect !== DIALECTS[0] }, async () => {
            const nav = page.getByRole('navigation', { name: 'Pages' });
            const labels = await nav.getByRole('link').allTextContents();
            expect(labels.length).to.be.at.least(12);
            for (const label of labels) {
                await nav.getByRole('link', { name: label, exact: true }).click();
                await page.getByRole('heading', { level: 1 }).filter({ hasNotText: 'Loading' }).first().waitFor();
                await page.locator('main p', { hasText: 'Loading…' }).waitFor({ state: 'detached' });
                expect(await page.locator('main .notice.error').count(), label).to.equal(0);
                await shot(`page-${label.toLowerCase().replace(/[^a-z]+/g, '-')}`);
            }
            // The form generated for each kind's schema.
            for (const kind of ['CredentialConfig', 'PresentationConfig', 'TrustList', 'WebhookEndpoint', 'AttributeProvider', 'StatusList']) {
                await page.evaluate((hash) => {
                    (globalThis as any).location.hash = hash;
                }, `#/config/${kind}/`);
                await page.locator('form.editor').waitFor();
                expect(await page.locator('main .notice.error').count(), kind).to.equal(0);
                await shot(`new-${kind}`);
            }
            await page.getByRole('link', { name: 'Key chains' }).click();
            await page.getByRole('link', { name: 'issuer', exact: true }).click();
            await page.getByText('CN=Hallmark Demo Issuer (development only)').first().waitFor();
            await shot('key-chain');
            await page.getByRole('button', { name: 'Sign out' }).click();
            await page.getByRole('button', { name: 'Sign in' }).waitFor();
            await shot('sign-in');
            await signIn('acme-admin', adminSecret);
        });

        it('hides pages a token\'s roles do not allow', async () => {
            await page.getByRole('link', { name: 'Tenants and clients' }).click();
            await page.getByLabel('Client id').fill('acme-offers');
            await page.getByLabel('issuance:offer').check();
            await page.getByRole('button', { name: 'Create client' }).click();
            await page.getByRole('button', { name: 'Sign in as acme-offers' }).click();
            await page.locator('header .who').filter({ hasText: 'acme-offers' }).waitFor();
            const nav = page.getByRole('navigation', { name: 'Pages' });
            await nav.getByRole('link', { name: 'Offers' }).waitFor();
            for (const hidden of ['Credential configurations', 'Bundles', 'Key chains', 'Audit log', 'Tenants and clients']) {
                expect(await nav.getByRole('link', { name: hidden }).count(), hidden).to.equal(0);
            }
            // Going to a hidden page by its address lands on an allowed one.
            await page.evaluate(() => {
                (globalThis as any).location.hash = '#/bundles';
            });
            await page.waitForFunction(() => (globalThis as any).location.hash === '#/offers');
            await page.getByRole('heading', { name: 'Offers' }).waitFor();
        });

        it('shows a verified presentation of the demo tenant, from an offer made on the page to the presented claims', async () => {
            await signIn(ROOT_CLIENT.id, ROOT_CLIENT.secret);
            await page.getByLabel('Client id').fill('demo-admin');
            await page.getByLabel('Tenant', { exact: true }).fill('demo');
            await page.getByLabel('tenant:admin').check();
            await page.getByRole('button', { name: 'Create client' }).click();
            await page.getByRole('button', { name: 'Sign in as demo-admin' }).click();
            await page.locator('header .who').filter({ hasText: 'tenant demo' }).waitFor();

            await page.getByRole('link', { name: 'Offers' }).click();
            await page.getByLabel('pid', { exact: true }).check();
            await page.getByLabel('Claims (JSON, the same for each configuration)').fill('{"given_name": "Erika", "family_name": "Mustermann"}');
            await page.getByRole('button', { name: 'Create credential offer' }).click();
            const wallet = new Wallet();
            const received = await wallet.receive(await page.locator('#offer-link').inputValue(), { configurationId: 'pid' });

            await page.getByLabel('Presentation configuration').selectOption('identify');
            await page.getByRole('button', { name: 'Create presentation request' }).click();
            await page.locator('.offer-result h2', { hasText: 'Presentation request' }).waitFor();
            const link = await page.locator('#offer-link').inputValue();
            expect(link).to.startWith('openid4vp://');
            expect(await readQr(page, 'svg.qr')).to.equal(link);
            const holder = new Holder();
            const resolved = await holder.resolve(link);
            await page.locator('.offer-result .badge', { hasText: 'fetched' }).waitFor();
            const answer = await holder.respond(resolved, await holder.vpToken(resolved, { pid: { format: 'dc+sd-jwt', credential: received.credentials[0]!, key: received.holderKeys[0]! } }));
            expect(answer.status).to.equal(200);
            await page.locator('.offer-result .badge', { hasText: 'completed' }).waitFor();

            await page.locator('.offer-result a[href^="#/sessions/"]').click();
            const claims = page.getByRole('table', { name: 'Claims of pid' });
            await claims.waitFor();
            await claims.getByRole('row', { name: 'family_name Mustermann' }).waitFor();
            expect(await page.getByRole('table', { name: 'Credentials checked' }).getByRole('cell', { name: 'yes' }).count()).to.equal(1);
            await shot('presentation-session');
        });

        it('renews the token shortly before it expires, with the secret it kept in memory', async () => {
            // The page's clock is moved past the token's lifetime less the 30 s margin; the service's clock is not,
            // so the old token would still work: only the page's own renewal can make the token request.
            await page.clock.install();
            await signIn(ROOT_CLIENT.id, ROOT_CLIENT.secret);
            const tokenRequests = () => requested.filter((u) => new URL(u).pathname === '/api/oauth2/token').length;
            const before = tokenRequests();
            await page.getByRole('link', { name: 'Audit log' }).click();
            await page.getByRole('table', { name: /^Audit log/ }).waitFor();
            expect(tokenRequests()).to.equal(before);
            await page.clock.fastForward(3600_000 - 20_000);
            await page.getByRole('link', { name: 'Bundles' }).click();
            await page.getByRole('heading', { name: 'Configuration bundles' }).waitFor();
            expect(tokenRequests()).to.equal(before + 1);
            // Nothing of the token or the secret is kept in the page's storage.
            const stored = await page.evaluate(() => {
                const g = globalThis as any;
                return JSON.stringify([Object.entries(g.localStorage), Object.entries(g.sessionStorage), g.document.cookie]);
            });
            expect(stored).to.equal('[[],[],""]');
        });

        it('made no request to any host but the service, with no script error and no CSP violation', () => {
            const hosts = new Set(requested.map((u) => new URL(u).host));
            expect([...hosts]).to.equal([new URL(origin).host]);
            expect(pageErrors).to.equal([]);
        });
    });
}
