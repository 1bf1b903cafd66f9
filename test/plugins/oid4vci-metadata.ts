import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { TypeMetadataFormatSchema } from '@sd-jwt/sd-jwt-vc';
import * as Jose from 'jose';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { freePort } from '../helpers/net';
import { pidConfig } from '../helpers/pid-config';
import { startTestServer, type TestServer } from '../helpers/server';
import { verifySdJwtVc, Wallet } from '../helpers/wallet';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const PNG_DATA_URI = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

const mdl = {
    id: 'mdl',
    config: {
        format: 'mso_mdoc',
        docType: 'org.iso.18013.5.1.mDL',
        scope: 'org.iso.18013.5.1.mDL',
        display: [{ locale: 'en', name: 'Driving licence', logo: { uri: 'https://issuer.example.com/mdl-logo.png' }, background_image: { uri: PNG_DATA_URI }, background_color: '#12107c', text_color: '#ffffff' }]
    },
    fields: [{ path: ['org.iso.18013.5.1', 'family_name'], type: 'string' }],
    keyChainId: 'issuer'
};

for (const dialect of DIALECTS) {
    describe(`OID4VCI issuer metadata of credential configurations (${dialect})`, () => {
        let t: TestServer;
        let admin: string;
        let publicUrl: string;

        const save = (payload: object) => t.server.inject({ method: 'POST', url: '/api/issuer/credentials', headers: bearer(admin), payload });
        const refused = async (payload: { id: string; [member: string]: unknown }, details: Array<{ path: string; message: string }>) => {
            const res = await save(payload);
            expect(res.statusCode, res.payload).to.equal(400);
            expect((res.result as any).details, res.payload).to.equal(details);
            // Nothing of a refused configuration is stored.
            expect((await t.server.inject({ url: `/api/issuer/credentials/${payload.id}`, headers: bearer(admin) })).statusCode).to.equal(404);
        };
        const offerUri = async (configurationId: string) => {
            const res = await t.server.inject({ method: 'POST', url: '/api/issuer/offer', headers: bearer(admin), payload: { credentialConfigurationIds: [configurationId], credentialClaims: { [configurationId]: { type: 'inline', claims: { given_name: 'Erika' } } } } });
            expect(res.statusCode, res.payload).to.equal(201);
            return (res.result as { uri: string }).uri;
        };

        before(async () => {
            const port = await freePort();
            publicUrl = `http://127.0.0.1:${port}`;
            t = await startTestServer(dialect, { listen: true, env: { PORT: String(port), PUBLIC_URL: publicUrl } });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            await createTenant(t.server, root, 'other');
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            expect((await t.server.inject({ method: 'POST', url: '/api/key-chain', headers: bearer(admin), payload: { id: 'issuer', usageType: 'attestation', subject: { commonName: 'Acme', country: 'DE' } } })).statusCode).to.equal(201);
        });
        after(() => t.stop());

        it('publishes scope and display with logo and background image as configured, which the wallet library validates', async () => {
            const display = [
                { locale: 'en', name: 'PID', description: 'Person identification data', logo: { uri: 'https://issuer.example.com/pid-logo.png' }, background_image: { uri: 'https://issuer.example.com/pid-card.png' }, background_color: '#ffffff', text_color: '#000000' },
                { locale: 'de', name: 'Personalausweis', logo: { uri: PNG_DATA_URI } }
            ];
            const pid = { ...pidConfig(), id: 'pid-display', config: { format: 'dc+sd-jwt', scope: 'eu.europa.ec.eudi.pid.1', display } };
            for (const config of [pid, mdl]) {
                const res = await save(config);
                expect(res.statusCode, res.payload).to.equal(201);
            }
            const issuerDisplay = [{ locale: 'en', name: 'Acme', logo: { uri: PNG_DATA_URI } }];
            const settings = await t.server.inject({ method: 'PUT', url: '/api/issuer/config', headers: bearer(admin), payload: { display: issuerDisplay } });
            expect(settings.statusCode, settings.payload).to.equal(200);
            const resolved = await new Wallet().client.resolveIssuerMetadata(`${publicUrl}/issuers/acme`);
            expect(resolved.credentialIssuer.display).to.equal(issuerDisplay);
            const supported = resolved.credentialIssuer.credential_configurations_supported as Record<string, any>;
            expect(supported['pid-display'].scope).to.equal('eu.europa.ec.eudi.pid.1');
            expect(supported['pid-display'].credential_metadata.display).to.equal(display);
            expect(supported.mdl.scope).to.equal('org.iso.18013.5.1.mDL');
            expect(supported.mdl.credential_metadata.display).to.equal(mdl.config.display);
            expect(resolved.authorizationServers[0]!.scopes_supported).to.include(['eu.europa.ec.eudi.pid.1', 'org.iso.18013.5.1.mDL']);
            // A configuration without scope publishes none.
            expect((await save({ ...pidConfig(), id: 'pid-no-scope', config: { format: 'dc+sd-jwt', display: [{ locale: 'en', name: 'PID' }] } })).statusCode).to.equal(201);
            const metadata = (await t.server.inject('/.well-known/openid-credential-issuer/issuers/acme')).result as any;
            expect(metadata.credential_configurations_supported['pid-no-scope']).to.not.include('scope');
        });

        it('refuses display images a wallet could not load (not https: or data:), naming the path', async () => {
            const issuerLogo = await t.server.inject({ method: 'PUT', url: '/api/issuer/config', headers: bearer(admin), payload: { display: [{ locale: 'en', name: 'Acme', logo: { uri: 'images/acme.png' } }] } });
            expect(issuerLogo.statusCode, issuerLogo.payload).to.equal(400);
            expect((issuerLogo.result as any).details).to.equal([{ path: 'display.0.logo.uri', message: '"display.0.logo.uri": image files of the tenant folder are not served by this service; give an https: or data: URI' }]);
            const withLogo = (id: string, uri: unknown) => ({ ...pidConfig(), id, config: { format: 'dc+sd-jwt', display: [{ locale: 'en', name: 'PID', logo: { uri } }] } });
            await refused(withLogo('logo-file', 'images/logo.png'), [{
                path: 'config.display.0.logo.uri',
                message: '"config.display.0.logo.uri": image files of the tenant folder are not served by this service; give an https: or data: URI'
            }]);
            for (const uri of ['http://issuer.example.com/logo.png', 'javascript:alert(1)', 'https://', 'data:image/png,no-encoding', 'file:///etc/passwd']) {
                await refused(withLogo('logo-bad', uri), [{ path: 'config.display.0.logo.uri', message: '"config.display[0].logo.uri" must be an https: URL or a data: URI' }]);
            }
            const background = { ...pidConfig(), id: 'background-file', config: { format: 'dc+sd-jwt', display: [{ locale: 'en', name: 'PID' }, { locale: 'de', name: 'PID', background_image: { uri: 'card.png' } }] } };
            await refused(background, [{
                path: 'config.display.1.background_image.uri',
                message: '"config.display.1.background_image.uri": image files of the tenant folder are not served by this service; give an https: or data: URI'
            }]);
            await refused(withLogo('logo-number', 42), [{ path: 'config.display.0.logo.uri', message: '"config.display[0].logo.uri" must be a string' }]);
        });

        it('publishes the type metadata of an object vct at {tenant}/vct/{id}; the credential carries vct#integrity of the bytes served', async () => {
            const vct = {
                vct: `${publicUrl}/issuers/acme/vct/pid-typed`,
                name: 'Acme PID',
                description: 'Person identification data of Acme',
                extends: 'urn:eudi:pid:1',
                'extends#integrity': 'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='
            };
            const res = await save({ ...pidConfig(), id: 'pid-typed', vct });
            expect(res.statusCode, res.payload).to.equal(201);

            const served = await fetch(`${publicUrl}/issuers/acme/vct/pid-typed`);
            expect(served.status).to.equal(200);
            expect(served.headers.get('content-type')).to.match(/^application\/json/);
            const bytes = Buffer.from(await served.arrayBuffer());
            expect(JSON.parse(bytes.toString('utf8'))).to.equal(vct);
            // The SD-JWT VC library's own schema of a type metadata document.
            expect(TypeMetadataFormatSchema.safeParse(JSON.parse(bytes.toString('utf8'))).success).to.be.true();
            const integrity = `sha256-${Crypto.createHash('sha256').update(bytes).digest('base64')}`;

            const metadata = (await t.server.inject('/.well-known/openid-credential-issuer/issuers/acme')).result as any;
            expect(metadata.credential_configurations_supported['pid-typed'].vct).to.equal(vct.vct);

            const wallet = new Wallet();
            const received = await wallet.receive(await offerUri('pid-typed'), { configurationId: 'pid-typed' });
            const { payload } = await verifySdJwtVc(received.credentials[0]!);
            expect(payload.vct).to.equal(vct.vct);
            expect(payload['vct#integrity']).to.equal(integrity);
            // The same bytes on every read.
            expect(Buffer.from(await (await fetch(`${publicUrl}/issuers/acme/vct/pid-typed`)).arrayBuffer()).equals(bytes)).to.be.true();
        });

        it('serves no type metadata for a plain vct string, an mdoc, another tenant or an unknown id; a plain vct credential has no vct#integrity', async () => {
            expect((await save({ ...pidConfig(), id: 'pid-plain' })).statusCode).to.equal(201);
            for (const url of ['/issuers/acme/vct/pid-plain', '/issuers/acme/vct/mdl', '/issuers/acme/vct/unknown', '/issuers/other/vct/pid-typed', '/issuers/nobody/vct/pid-typed']) {
                const res = await t.server.inject(url);
                expect(res.statusCode, url).to.equal(404);
            }
            // Bad input is a 400 or a 404, never a 500.
            for (const [url, status] of [[`/issuers/acme/vct/${'x'.repeat(256)}`, 400], ['/issuers/acme/vct/%00', 400], ['/issuers/ACME!/vct/pid-typed', 400], ['/issuers/acme/vct/pid-typed%2F..', 404]] as const) {
                const res = await t.server.inject(url);
                expect(res.statusCode, `${url}: ${res.payload}`).to.equal(status);
            }
            const received = await new Wallet().receive(await offerUri('pid-plain'), { configurationId: 'pid-plain' });
            const payload = Jose.decodeJwt(received.credentials[0]!.split('~')[0]!);
            expect(payload.vct).to.equal('urn:eudi:pid:1');
            expect(payload).to.not.include('vct#integrity');
        });

        it('refuses at save, with a 400 naming the path, the settings that have no effect yet', async () => {
            await refused({ ...pidConfig(), id: 'reuse', config: { ...pidConfig().config, credentialReusePolicy: { id: 'arf_annex_ii', options: [{ details: ['once_only'], batch_size: 10, reissue_trigger_unused: 2 }] } } }, [{
                path: 'config.credentialReusePolicy',
                message: '"config.credentialReusePolicy": credential reuse policies (and their batch_size) are not available yet: OpenID4VCI 1.0 defines no issuer metadata member to publish them in and the issuer does not act on them; batch issuance is the issuance config\'s batchSize'
            }]);
            await refused({ ...pidConfig(), id: 'schema', schemaMeta: { version: '1', attestationLoS: 'iso_18045_high', bindingType: 'key' } }, [{
                path: 'schemaMeta',
                message: '"schemaMeta": schema metadata is not available yet: neither the issuer metadata nor the credential carries it'
            }]);
            for (const policy of [{ policy: 'allowList', values: ['https://bank.example.com'] }, { policy: 'rootOfTrust', values: 'https://trust.example.eu' }, { policy: 'attestationBased', values: [{ credentials: [{ id: 'rp' }] }] }]) {
                await refused({ ...pidConfig(), id: 'edp', embeddedDisclosurePolicy: policy }, [{
                    path: 'embeddedDisclosurePolicy',
                    message: '"embeddedDisclosurePolicy": embedded disclosure policies are not available yet: only the policy none'
                }]);
            }
            await refused({ ...pidConfig(), id: 'federation', sdJwtTrustFormat: 'federation' }, [{
                path: 'sdJwtTrustFormat',
                message: '"sdJwtTrustFormat": OpenID Federation trust for SD-JWT VCs is not available yet: only x5c'
            }]);
            await refused({ ...pidConfig(), id: 'did', sdJwtTrustFormat: 'did' }, [{ path: 'sdJwtTrustFormat', message: '"sdJwtTrustFormat" must be one of [x5c, federation]' }]);
            await refused({ ...mdl, id: 'mdl-vct', vct: 'urn:eudi:pid:1' }, [{ path: 'vct', message: '"vct" applies to dc+sd-jwt only (mso_mdoc uses config.docType)' }]);
            // A wrong shape is still named as such, before any refusal.
            await refused({ ...pidConfig(), id: 'schema-bad', schemaMeta: { version: '1', attestationLoS: 'high', bindingType: 'key' } }, [{
                path: 'schemaMeta.attestationLoS',
                message: '"schemaMeta.attestationLoS" must be one of [iso_18045_high, iso_18045_moderate, iso_18045_enhanced-basic, iso_18045_basic]'
            }]);
        });

        it('accepts the values that ask for nothing: x5c, the policy none, nulls', async () => {
            const res = await save({ ...pidConfig(), id: 'defaults', sdJwtTrustFormat: 'x5c', embeddedDisclosurePolicy: { policy: 'none' }, schemaMeta: null });
            expect(res.statusCode, res.payload).to.equal(201);
            expect(res.result).to.include({ sdJwtTrustFormat: 'x5c', embeddedDisclosurePolicy: { policy: 'none' }, schemaMeta: null });
            const nulls = await save({ ...pidConfig(), id: 'nulls', sdJwtTrustFormat: null, embeddedDisclosurePolicy: null });
            expect(nulls.statusCode, nulls.payload).to.equal(201);
        });

        it('signs the issuer metadata when Accept asks for application/jwt (OpenID4VCI 12.2.3), with the access chain\'s x5c', async () => {
            const metadataUrl = `${publicUrl}/.well-known/openid-credential-issuer/issuers/acme`;
            const get = (accept?: string) => fetch(metadataUrl, { headers: accept ? { accept } : {} });
            // No access key chain yet: JSON where JSON is acceptable, 406 where only the JWT is.
            const fallback = await get('application/jwt, application/json;q=0.5');
            expect(fallback.headers.get('content-type')).to.contain('application/json');
            const refused = await get('application/jwt');
            expect(refused.status).to.equal(406);

            expect((await t.server.inject({ method: 'POST', url: '/api/key-chain', headers: bearer(admin), payload: { id: 'access', usageType: 'access', subject: { commonName: 'Acme access', country: 'DE' } } })).statusCode).to.equal(201);
            const json = await (await get()).json() as Record<string, unknown>;
            for (const accept of ['application/jwt', 'application/json;q=0.1, application/jwt']) {
                const res = await get(accept);
                expect(res.status).to.equal(200);
                expect(res.headers.get('content-type')).to.contain('application/jwt');
                expect(res.headers.get('vary')).to.contain('accept');
                const jwt = await res.text();
                // Verified as a wallet would: with the certificate the header carries, which chains to the tenant root.
                const { payload, protectedHeader } = await Jose.jwtVerify(jwt, async (header) => Jose.importX509(`-----BEGIN CERTIFICATE-----\n${header.x5c![0]}\n-----END CERTIFICATE-----`, 'ES256'), { typ: 'openidvci-issuer-metadata+jwt' });
                expect(protectedHeader.alg).to.equal('ES256');
                expect(protectedHeader.x5c!.length).to.be.at.least(1);
                expect(payload.sub).to.equal(`${publicUrl}/issuers/acme`);
                expect(payload.iat!).to.be.within(Math.floor(Date.now() / 1000) - 60, Math.floor(Date.now() / 1000) + 1);
                const { sub: _sub, iat: _iat, ...members } = payload;
                expect(members).to.equal(json);
            }
            // Equal preference, no Accept, and JSON preferred: the JSON document.
            for (const accept of ['application/json, application/jwt', undefined, 'application/json', '*/*']) {
                const res = await get(accept);
                expect(res.headers.get('content-type'), String(accept)).to.contain('application/json');
            }
            // The wallet library reads the JSON form it asks for by default.
            expect((await new Wallet().client.resolveIssuerMetadata(`${publicUrl}/issuers/acme`)).credentialIssuer.credential_issuer).to.equal(`${publicUrl}/issuers/acme`);
        });
    });
}
