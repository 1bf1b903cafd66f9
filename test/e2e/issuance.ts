import Crypto from 'node:crypto';
import Fs from 'node:fs';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as Jose from 'jose';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { startTestServer, type TestServer } from '../helpers/server';
import { newHolderKey, sameKey, verifyMdoc, verifySdJwtVc, Wallet, type HolderKey } from '../helpers/wallet';
import { freePort, startReceiver as startReceiverOn } from '../helpers/net';

/**
 * OpenID4VCI issuance end to end, over real HTTP, with a wallet built on @openid4vc/openid4vci: offers by reference
 * and by value, metadata, tokens with tx_code and DPoP, nonces, credentials in both formats, batches, notifications
 * and their webhooks; then the negative cases of the OIDF issuer test plan and the single-use values of spec 3.1, done
 * by hand so that each request is exactly what the case needs. Every credential is verified independently of the
 * service's code.
 */

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const PRE_AUTHORIZED = 'urn:ietf:params:oauth:grant-type:pre-authorized_code';
const DEMO = Path.join(__dirname, '..', '..', 'examples', 'config', 'demo');
// The built test runs from dist/test/e2e, the sources from test/e2e: find the examples from either.
const demoFile = (...parts: string[]): Record<string, unknown> => {
    for (const root of [DEMO, Path.join(__dirname, '..', '..', '..', 'examples', 'config', 'demo')]) {
        const file = Path.join(root, ...parts);
        if (Fs.existsSync(file)) {
            return (JSON.parse(Fs.readFileSync(file, 'utf8')) as { spec: Record<string, unknown> }).spec;
        }
    }
    throw new Error(`No demo file ${parts.join('/')}`);
};
const PID = demoFile('issuance', 'credentials', 'pid.json');
const MDL = demoFile('issuance', 'credentials', 'mdl.json');
const ISSUER_KEY_CHAIN = demoFile('key-chains', 'issuer.json');
const MDL_NS = 'org.iso.18013.5.1';
const MDL_DOCTYPE = 'org.iso.18013.5.1.mDL';

const pidClaims = { given_name: 'Erika', family_name: 'Mustermann', birthdate: '1964-08-12', address: { locality: 'Berlin', country: 'DE' }, nationalities: ['DE'] };
const mdlClaims = { [MDL_NS]: { family_name: 'Mustermann', given_name: 'Erika', birth_date: '1964-08-12', age_over_18: true } };
const claimsFor = (id: string) => ({ [id]: { type: 'inline', claims: id === 'pid' ? pidClaims : mdlClaims } });

/** A port nothing listens on (bound, read, closed). */
const startReceiver = () => startReceiverOn((path) => ({ status: path.startsWith('/fail') ? 503 : 200, body: {} }));

const b64urlSha256 = (value: string) => Crypto.createHash('sha256').update(value, 'ascii').digest('base64url');

const queryParam = (uri: string, name: string): string | null => new URL(uri.replace('openid-credential-offer://', 'https://wallet.invalid/')).searchParams.get(name);

for (const dialect of DIALECTS) {
    describe(`OID4VCI issuance end to end (${dialect})`, () => {
        let t: TestServer;
        let publicUrl: string;
        let receiver: Awaited<ReturnType<typeof startReceiver>>;
        let downUrl: string;
        const admins: Record<string, string> = {};
        let restricted: string;
        const issuerOf = (tenant: string) => `${publicUrl}/issuers/${tenant}`;

        const api = async (token: string, method: string, url: string, payload?: object) => {
            const res = await t.server.inject({ method, url, headers: bearer(token), ...(payload ? { payload } : {}) });
            return { status: res.statusCode, body: res.result as any, headers: res.headers, payload: res.payload };
        };

        before(async () => {
            const port = await freePort();
            publicUrl = `http://127.0.0.1:${port}`;
            receiver = await startReceiver();
            downUrl = `http://127.0.0.1:${await freePort()}/hook`;
            t = await startTestServer(dialect, {
                listen: true,
                env: { PORT: String(port), PUBLIC_URL: publicUrl, OUTBOUND_URL_ALLOW_HTTP: 'true', OUTBOUND_URL_ALLOW_PRIVATE_NETWORK: 'true' }
            });
            const root = await rootToken(t.server);
            for (const tenant of ['acme', 'batch', 'other']) {
                await createTenant(t.server, root, tenant);
                admins[tenant] = (await clientWithToken(t.server, root, { clientId: `${tenant}-admin`, roles: ['tenant:admin'], tenantId: tenant })).token;
                if (tenant === 'other') {
                    continue;
                }
                const chain = await api(admins[tenant]!, 'POST', '/api/key-chain', ISSUER_KEY_CHAIN);
                expect(chain.status, chain.payload).to.equal(201);
                for (const credential of [PID, MDL]) {
                    const res = await api(admins[tenant]!, 'POST', '/api/issuer/credentials', credential);
                    expect(res.status, res.payload).to.equal(201);
                }
            }
            const config = await api(admins.batch!, 'PUT', '/api/issuer/config', { batchSize: 3 });
            expect(config.status, config.payload).to.equal(200);
            restricted = (await clientWithToken(t.server, root, { clientId: 'acme-mdl-only', roles: ['issuance:offer'], tenantId: 'acme', allowedIssuanceConfigs: ['mdl'] })).token;
            for (const [id, url] of [['hook', `${receiver.url}/hook`], ['down', downUrl], ['failing', `${receiver.url}/fail`], ['moving', `${receiver.url}/before`]] as const) {
                const res = await api(admins.acme!, 'POST', '/api/issuer/webhook-endpoints', { id, name: id, url, auth: { type: 'apiKey', config: { headerName: 'x-hook-key', value: 'hook-secret-123' } } });
                expect(res.status, res.payload).to.equal(201);
            }
        });

        after(async () => {
            await t?.stop();
            await receiver?.close();
        });

        // --- helpers -------------------------------------------------------------------------------------------------

        const offer = async (body: Record<string, unknown>, tenant = 'acme', token = admins[tenant]!) => {
            const res = await api(token, 'POST', '/api/issuer/offer', body);
            expect(res.status, res.payload).to.equal(201);
            return res.body as { session: string; uri: string; tx_code?: string };
        };
        const offerFor = (id: string, extra: Record<string, unknown> = {}, tenant = 'acme') =>
            offer({ credentialConfigurationIds: [id], credentialClaims: claimsFor(id), ...extra }, tenant);
        const status = async (session: string, tenant = 'acme') => {
            const res = await api(admins[tenant]!, 'GET', `/api/session/${session}`);
            expect(res.status, res.payload).to.equal(200);
            return res.body.status as string;
        };
        const sessionOf = async (session: string, tenant = 'acme') => (await api(admins[tenant]!, 'GET', `/api/session/${session}`)).body;

        /** The offer object of a link: decoded when by value, fetched when by reference. */
        const offerObject = async (uri: string) => {
            const byValue = queryParam(uri, 'credential_offer');
            if (byValue) {
                return JSON.parse(byValue);
            }
            const res = await fetch(queryParam(uri, 'credential_offer_uri')!);
            expect(res.status).to.equal(200);
            return res.json() as Promise<any>;
        };
        const codeOf = async (uri: string): Promise<string> => (await offerObject(uri)).grants[PRE_AUTHORIZED]['pre-authorized_code'];

        const tokenRequest = (tenant: string, form: Record<string, string>, headers: Record<string, string> = {}) =>
            t.server.inject({
                method: 'POST',
                url: `/issuers/${tenant}/authorize/token`,
                payload: new URLSearchParams(form).toString(),
                headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }
            });
        const preAuthorized = (code: string, txCode?: string): Record<string, string> => ({ grant_type: PRE_AUTHORIZED, 'pre-authorized_code': code, ...(txCode ? { tx_code: txCode } : {}) });

        const nonce = async (tenant = 'acme'): Promise<string> => {
            const res = await t.server.inject({ method: 'POST', url: `/issuers/${tenant}/vci/nonce` });
            expect(res.statusCode).to.equal(200);
            return (res.result as { c_nonce: string }).c_nonce;
        };

        /** An openid4vci-proof+jwt carrying `key` as jwk, signed by `signWith` (default the same key). */
        const proofJwt = async (key: HolderKey, proofNonce: string | undefined, options: { signWith?: HolderKey; tenant?: string } = {}) =>
            new Jose.SignJWT({ aud: issuerOf(options.tenant ?? 'acme'), ...(proofNonce !== undefined ? { nonce: proofNonce } : {}) })
                .setProtectedHeader({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: key.publicJwk })
                .setIssuedAt()
                .sign((options.signWith ?? key).privateKey);

        const dpopProof = (key: HolderKey, method: string, url: string, accessToken?: string) =>
            new Jose.SignJWT({ htm: method, htu: url, jti: Crypto.randomUUID(), ...(accessToken ? { ath: b64urlSha256(accessToken) } : {}) })
                .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: key.publicJwk })
                .setIssuedAt()
                .sign(key.privateKey);

        const credentialRequest = (tenant: string, authorization: string | undefined, body: object, headers: Record<string, string> = {}, query = '') =>
            t.server.inject({
                method: 'POST',
                url: `/issuers/${tenant}/vci/credential${query}`,
                payload: body,
                headers: { ...(authorization ? { authorization } : {}), ...headers }
            });

        /** An offer (by value, without tx_code) redeemed by hand: a Bearer token, or a DPoP-bound one for `dpopKey`. */
        const redeemed = async (id = 'pid', options: { dpopKey?: HolderKey; extra?: Record<string, unknown>; tenant?: string } = {}) => {
            const tenant = options.tenant ?? 'acme';
            const created = await offer({ credentialConfigurationIds: [id], credentialClaims: claimsFor(id), byReference: false, ...options.extra }, tenant);
            const code = await codeOf(created.uri);
            const headers: Record<string, string> = options.dpopKey ? { dpop: await dpopProof(options.dpopKey, 'POST', `${issuerOf(tenant)}/authorize/token`) } : {};
            const res = await tokenRequest(tenant, preAuthorized(code), headers);
            expect(res.statusCode, res.payload).to.equal(200);
            const body = res.result as { access_token: string; token_type: string };
            return { ...created, code, accessToken: body.access_token, tokenType: body.token_type };
        };

        const expectOAuthError = (res: { statusCode: number; result: unknown; payload: string }, statusCode: number, error: string) => {
            expect(res.statusCode, res.payload).to.equal(statusCode);
            expect((res.result as { error: string }).error, res.payload).to.equal(error);
        };

        const certificateChain = async (tenant: string): Promise<string[]> => {
            const chain = await api(admins[tenant]!, 'GET', '/api/key-chain/issuer');
            expect(chain.status, chain.payload).to.equal(200);
            return (chain.body.certificateChain as string[]).map((pem) => pem.replace(/-----[^-]+-----|\s/g, ''));
        };

        const checkSdJwt = async (credential: string, holder: HolderKey, tenant = 'acme') => {
            const verified = await verifySdJwtVc(credential);
            const { payload } = verified;
            expect(payload.iss).to.equal(issuerOf(tenant));
            expect(payload.vct).to.equal(PID.vct);
            expect(sameKey((payload.cnf as { jwk: Jose.JWK }).jwk, holder.publicJwk)).to.be.true();
            // iat rounds down and exp up to a shared grid of at most an hour (unlinkable time claims).
            expect((payload.exp as number) - (payload.iat as number)).to.be.within(PID.lifeTime as number, (PID.lifeTime as number) + 2 * 3600);
            expect(payload).to.include({ given_name: 'Erika', family_name: 'Mustermann', birthdate: '1964-08-12', issuing_country: 'DE' });
            expect(payload.address).to.equal(pidClaims.address);
            expect(payload.nationalities).to.equal(pidClaims.nationalities);
            // The x5c chain is the key chain's certificateChain (DER, base64).
            expect(verified.x5c).to.equal(await certificateChain(tenant));
            return verified;
        };

        const checkMdoc = async (credential: string, holder: HolderKey) => {
            const verified = await verifyMdoc(credential, MDL_DOCTYPE);
            expect(sameKey(verified.deviceJwk, holder.publicJwk)).to.be.true();
            // The x5chain is the key chain's certificateChain (contract, "Further pinned details").
            expect(verified.x5chain.map((der) => Buffer.from(der).toString('base64'))).to.equal(await certificateChain('acme'));
            expect(verified.namespaces[MDL_NS]).to.equal({ ...mdlClaims[MDL_NS], issuing_country: 'DE' });
            const { signed, validUntil } = verified.validityInfo;
            // Whole seconds: signed rounds down, validUntil up.
            expect((validUntil.getTime() - signed.getTime()) / 1000).to.be.within(MDL.lifeTime as number, (MDL.lifeTime as number) + 1);
            return verified;
        };

        // --- metadata and happy flows with the wallet library --------------------------------------------------------

        it('publishes issuer and authorization server metadata the wallet library accepts', async () => {
            const wallet = new Wallet();
            const metadata = await wallet.client.resolveIssuerMetadata(issuerOf('acme'));
            const issuer = metadata.credentialIssuer;
            expect(issuer.credential_issuer).to.equal(issuerOf('acme'));
            expect(issuer.credential_endpoint).to.equal(`${issuerOf('acme')}/vci/credential`);
            expect(issuer.nonce_endpoint).to.equal(`${issuerOf('acme')}/vci/nonce`);
            expect(issuer.notification_endpoint).to.equal(`${issuerOf('acme')}/vci/notification`);
            expect(issuer.batch_credential_issuance).to.not.exist();
            expect(Object.keys(issuer.credential_configurations_supported).sort()).to.equal(['mdl', 'pid']);
            expect((issuer.credential_configurations_supported.pid as any).vct).to.equal(PID.vct);
            expect((issuer.credential_configurations_supported.mdl as any).doctype).to.equal(MDL_DOCTYPE);
            expect(metadata.authorizationServers).to.have.length(1);
            const as = metadata.authorizationServers[0]!;
            expect(as.issuer).to.equal(issuerOf('acme'));
            expect(as.token_endpoint).to.equal(`${issuerOf('acme')}/authorize/token`);
            expect(as.grant_types_supported).to.include(PRE_AUTHORIZED);
            expect(as.dpop_signing_alg_values_supported).to.include('ES256');
            const batch = await wallet.client.resolveIssuerMetadata(issuerOf('batch'));
            expect(batch.credentialIssuer.batch_credential_issuance).to.equal({ batch_size: 3 });
        });

        for (const [id, format] of [['pid', 'dc+sd-jwt'], ['mdl', 'mso_mdoc']] as const) {
            for (const dpop of [false, true]) {
                for (const byReference of [true, false]) {
                    it(`issues ${format} ${dpop ? 'with' : 'without'} DPoP, offer by ${byReference ? 'reference' : 'value'}, tx_code, notification accepted`, async () => {
                        const created = await offerFor(id, { tx_code: true, byReference });
                        expect(created.tx_code).to.match(/^\d{6}$/);
                        expect(queryParam(created.uri, byReference ? 'credential_offer_uri' : 'credential_offer')).to.exist();
                        const wallet = new Wallet();
                        const received = await wallet.receive(created.uri, { configurationId: id, txCode: created.tx_code!, dpop });
                        expect(received.offer.credential_issuer).to.equal(issuerOf('acme'));
                        expect(received.offer.credential_configuration_ids).to.equal([id]);
                        expect(received.tokenType).to.equal(dpop ? 'DPoP' : 'Bearer');
                        expect(received.credentials).to.have.length(1);
                        if (id === 'pid') {
                            await checkSdJwt(received.credentials[0]!, received.holderKeys[0]!);
                        }
                        else {
                            await checkMdoc(received.credentials[0]!, received.holderKeys[0]!);
                        }

                        // What went over the wire: the tx_code at the token endpoint, no-store on nonce and credential.
                        const token = wallet.exchange('/authorize/token')!;
                        expect(new URLSearchParams(token.requestBody).get('tx_code')).to.equal(created.tx_code!);
                        expect(wallet.exchange('/vci/nonce')!.responseHeaders['cache-control']).to.equal('no-store');
                        const credential = wallet.exchange('/vci/credential')!;
                        expect(credential.responseHeaders['cache-control']).to.equal('no-store');
                        expect(credential.requestHeaders.authorization).to.equal(`${dpop ? 'DPoP' : 'Bearer'} ${received.accessToken}`);
                        if (dpop) {
                            for (const [exchange, url, ath] of [[token, `${issuerOf('acme')}/authorize/token`, undefined], [credential, `${issuerOf('acme')}/vci/credential`, b64urlSha256(received.accessToken)]] as const) {
                                const proof = exchange.requestHeaders.dpop!;
                                expect(proof).to.exist();
                                const header = Jose.decodeProtectedHeader(proof);
                                expect(header.typ as string).to.equal('dpop+jwt');
                                expect(sameKey(header.jwk, received.dpop!.key.publicJwk)).to.be.true();
                                const claims = Jose.decodeJwt(proof);
                                expect(claims).to.include({ htm: 'POST', htu: url });
                                expect(claims.ath ?? null).to.equal(ath ?? null);
                            }

                            // The DPoP-bound token does not work as a plain bearer token.
                            const asBearer = await credentialRequest('acme', `Bearer ${received.accessToken}`, { credential_configuration_id: id, proof: { proof_type: 'jwt', jwt: await proofJwt(received.holderKeys[0]!, await nonce()) } });
                            expect(asBearer.statusCode, asBearer.payload).to.equal(401);
                        }
                        else {
                            expect(credential.requestHeaders.dpop).to.not.exist();
                        }

                        expect(await status(created.session)).to.equal('fetched');
                        await wallet.notify(received, 'credential_accepted');
                        expect(await status(created.session)).to.equal('completed');
                        const session = await sessionOf(created.session);
                        expect(session.notifications).to.have.length(1);
                        expect(session.notifications[0]).to.include({ notificationId: received.notificationId, event: 'credential_accepted' });
                    });
                }
            }
        }

        it('has verifiers that reject tampered credentials (self-check of the test helpers)', async () => {
            const sd = await redeemed('pid');
            const mdl = await redeemed('mdl');
            const key = await newHolderKey();
            const issue = async (accessToken: string, id: string) => {
                const res = await credentialRequest('acme', `Bearer ${accessToken}`, { credential_configuration_id: id, proof: { proof_type: 'jwt', jwt: await proofJwt(key, await nonce()) } });
                expect(res.statusCode, res.payload).to.equal(200);
                return (res.result as any).credentials[0].credential as string;
            };
            const sdJwt = await issue(sd.accessToken, 'pid');
            await checkSdJwt(sdJwt, key);
            const [jwt, ...disclosures] = sdJwt.split('~');
            const forged = Buffer.from(JSON.stringify([Crypto.randomBytes(16).toString('base64url'), 'given_name', 'Mallory'])).toString('base64url');
            await expect(verifySdJwtVc([jwt, forged, ...disclosures].join('~'))).to.reject();
            const [h, p, sig] = jwt!.split('.');
            const otherPayload = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(p!, 'base64url').toString()), iss: 'https://evil.example' })).toString('base64url');
            await expect(verifySdJwtVc([`${h}.${otherPayload}.${sig}`, ...disclosures].join('~'))).to.reject();

            const mdoc = await issue(mdl.accessToken, 'mdl');
            await checkMdoc(mdoc, key);
            const raw = Buffer.from(mdoc, 'base64url');
            const swap = (from: string, to: string) => {
                const at = raw.indexOf(Buffer.from(from));
                expect(at).to.be.above(-1);
                const copy = Buffer.from(raw);
                copy.write(to, at);
                return copy.toString('base64url');
            };
            await expect(verifyMdoc(swap('Mustermann', 'Musterfrau'), MDL_DOCTYPE)).to.reject(/digest/);
            // Another device key in the MSO: the issuer signature no longer verifies.
            const x = Buffer.from(key.publicJwk.x!, 'base64url');
            const at = raw.indexOf(x);
            expect(at).to.be.above(-1);
            const otherKey = Buffer.from(raw);
            otherKey[at] = otherKey[at]! ^ 0xff;
            await expect(verifyMdoc(otherKey.toString('base64url'), MDL_DOCTYPE)).to.reject(/signature/);
        });

        it('issues a batch of 3 SD-JWT VCs, each bound to its own proof key, with distinct salts and one dataset', async () => {
            const created = await offerFor('pid', { tx_code: true }, 'batch');
            const wallet = new Wallet();
            const received = await wallet.receive(created.uri, { configurationId: 'pid', txCode: created.tx_code!, batch: 3 });
            expect(received.credentials).to.have.length(3);
            const verified = await Promise.all(received.credentials.map((c) => verifySdJwtVc(c)));
            const bound = verified.map((v) => (v.payload.cnf as { jwk: Jose.JWK }).jwk);
            for (const key of received.holderKeys) {
                expect(bound.filter((jwk) => sameKey(jwk, key.publicJwk))).to.have.length(1);
            }
            for (let i = 0; i < 3; i++) {
                await checkSdJwt(received.credentials[i]!, received.holderKeys.find((k) => sameKey(k.publicJwk, bound[i]))!, 'batch');
            }
            const salts = verified.flatMap((v) => v.salts);
            expect(salts.length).to.be.above(3);
            expect(new Set(salts).size).to.equal(salts.length);
            const dataset = (p: Record<string, unknown>) => {
                const { cnf: _cnf, iat: _iat, exp: _exp, ...rest } = p;
                return rest;
            };
            expect(dataset(verified[1]!.payload)).to.equal(dataset(verified[0]!.payload));
            expect(dataset(verified[2]!.payload)).to.equal(dataset(verified[0]!.payload));
            await wallet.notify(received, 'credential_accepted');
            expect(await status(created.session, 'batch')).to.equal('completed');
        });

        it('issues a batch of 3 mdocs, each with its own device key, distinct item randoms and one dataset', async () => {
            const created = await offerFor('mdl', { tx_code: true }, 'batch');
            const wallet = new Wallet();
            const received = await wallet.receive(created.uri, { configurationId: 'mdl', txCode: created.tx_code!, batch: 3 });
            expect(received.credentials).to.have.length(3);
            const verified = await Promise.all(received.credentials.map((c) => verifyMdoc(c, MDL_DOCTYPE)));
            for (const key of received.holderKeys) {
                expect(verified.filter((v) => sameKey(v.deviceJwk, key.publicJwk))).to.have.length(1);
            }
            for (const v of verified) {
                expect(v.namespaces).to.equal(verified[0]!.namespaces);
            }
            const randoms = verified.flatMap((v) => v.randoms);
            expect(new Set(randoms).size).to.equal(randoms.length);
        });

        it('publishes a changed issuance config in the metadata at once', async () => {
            const wallet = new Wallet();
            expect((await wallet.client.resolveIssuerMetadata(issuerOf('batch'))).credentialIssuer.display).to.not.exist();
            const display = [{ locale: 'en', name: 'Batch Issuer' }];
            const res = await api(admins.batch!, 'PUT', '/api/issuer/config', { batchSize: 3, display });
            expect(res.status, res.payload).to.equal(200);
            const metadata = (await wallet.client.resolveIssuerMetadata(issuerOf('batch'))).credentialIssuer;
            expect(metadata.display).to.equal(display);
            expect(metadata.batch_credential_issuance).to.equal({ batch_size: 3 });
        });

        it('refuses more proofs than the batch size', async () => {
            const { accessToken } = await redeemed('pid', { tenant: 'batch' });
            const n = await nonce('batch');
            const jwts = await Promise.all(Array.from({ length: 4 }, async () => proofJwt(await newHolderKey(), n, { tenant: 'batch' })));
            const res = await credentialRequest('batch', `Bearer ${accessToken}`, { credential_configuration_id: 'pid', proofs: { jwt: jwts } });
            expectOAuthError(res, 400, 'invalid_credential_request');
        });

        // --- webhooks of the notification endpoint (spec 6.2, 6.3) --------------------------------------------------

        it('sends the notification webhook with the spec 6.2 body and the apiKey header, then completes the session', async () => {
            const created = await offerFor('pid', { tx_code: true, webhookEndpointId: 'hook' });
            const wallet = new Wallet();
            const received = await wallet.receive(created.uri, { configurationId: 'pid', txCode: created.tx_code! });
            const before = receiver.deliveries.length;
            await wallet.notify(received, 'credential_accepted');
            const deliveries = receiver.deliveries.slice(before);
            expect(deliveries).to.have.length(1);
            expect(deliveries[0]!.path).to.equal('/hook');
            expect(deliveries[0]!.headers['x-hook-key']).to.equal('hook-secret-123');
            expect(deliveries[0]!.headers['content-type'] ?? '').to.startWith('application/json');
            expect(deliveries[0]!.body).to.equal({ notification: { id: received.notificationId, event: 'credential_accepted', credentialConfigurationId: 'pid' }, session: created.session });
            expect(await status(created.session)).to.equal('completed');
        });

        it('reports credential_failure to the webhook and fails the session', async () => {
            const created = await offerFor('mdl', { tx_code: true, webhookEndpointId: 'hook' });
            const wallet = new Wallet();
            const received = await wallet.receive(created.uri, { configurationId: 'mdl', txCode: created.tx_code!, dpop: true });
            const before = receiver.deliveries.length;
            await wallet.notify(received, 'credential_failure');
            const deliveries = receiver.deliveries.slice(before);
            expect(deliveries).to.have.length(1);
            expect(deliveries[0]!.body).to.equal({ notification: { id: received.notificationId, event: 'credential_failure', credentialConfigurationId: 'mdl' }, session: created.session });
            expect(await status(created.session)).to.equal('failed');
        });

        it('answers 500 when the webhook receiver is down and keeps the session fetched', async () => {
            const created = await offerFor('pid', { webhookEndpointId: 'down' });
            const wallet = new Wallet();
            const received = await wallet.receive(created.uri, { configurationId: 'pid' });
            const res = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/notification', headers: { authorization: `Bearer ${received.accessToken}` }, payload: { notification_id: received.notificationId, event: 'credential_accepted' } });
            expect(res.statusCode, res.payload).to.equal(500);
            expect(await status(created.session)).to.equal('fetched');
            // The event was recorded before the webhook was tried.
            expect((await sessionOf(created.session)).notifications).to.have.length(1);
        });

        it('answers 500 when the webhook receiver answers 503 and keeps the session fetched', async () => {
            const created = await offerFor('pid', { webhookEndpointId: 'failing' });
            const wallet = new Wallet();
            const received = await wallet.receive(created.uri, { configurationId: 'pid' });
            const before = receiver.deliveries.length;
            const res = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/notification', headers: { authorization: `Bearer ${received.accessToken}` }, payload: { notification_id: received.notificationId, event: 'credential_accepted' } });
            expect(res.statusCode, res.payload).to.equal(500);
            expect(receiver.deliveries.slice(before).map((d) => d.path)).to.equal(['/fail']);
            expect(await status(created.session)).to.equal('fetched');
        });

        it('sends no webhook for a webhookEndpointId that does not exist, and still completes the session', async () => {
            const created = await offerFor('pid', { webhookEndpointId: 'no-such-endpoint' });
            const wallet = new Wallet();
            const received = await wallet.receive(created.uri, { configurationId: 'pid' });
            const before = receiver.deliveries.length;
            await wallet.notify(received, 'credential_accepted');
            expect(receiver.deliveries.length).to.equal(before);
            expect(await status(created.session)).to.equal('completed');
        });

        it('resolves the webhook target when the offer is created (spec 6.2)', async () => {
            const created = await offerFor('pid', { webhookEndpointId: 'moving' });
            const moved = await api(admins.acme!, 'PATCH', '/api/issuer/webhook-endpoints/moving', { url: `${receiver.url}/after`, auth: { type: 'apiKey', config: { headerName: 'x-hook-key', value: 'hook-secret-456' } } });
            expect(moved.status, moved.payload).to.equal(200);
            const wallet = new Wallet();
            const received = await wallet.receive(created.uri, { configurationId: 'pid' });
            const before = receiver.deliveries.length;
            await wallet.notify(received, 'credential_accepted');
            expect(receiver.deliveries.slice(before).map((d) => d.path)).to.equal(['/before']);
        });

        it('keeps every notification_id of concurrent credential requests of one session', async () => {
            // The 'down' webhook keeps the session fetched, so each notification_id can be tried: a known id answers
            // 500 (the webhook failed), an unknown one 400 invalid_notification_id.
            const { accessToken, session } = await redeemed('pid', { extra: { webhookEndpointId: 'down' } });
            const bodies = await Promise.all(Array.from({ length: 10 }, async () => JSON.stringify({ credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proofJwt(await newHolderKey(), await nonce()) } })));
            const ids = await Promise.all(bodies.map(async (body) => {
                const res = await fetch(`${issuerOf('acme')}/vci/credential`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${accessToken}` }, body });
                expect(res.status).to.equal(200);
                return ((await res.json()) as { notification_id: string }).notification_id;
            }));
            expect(new Set(ids).size).to.equal(10);
            const answers: string[] = [];
            for (const id of ids) {
                const res = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/notification', headers: { authorization: `Bearer ${accessToken}` }, payload: { notification_id: id, event: 'credential_accepted' } });
                answers.push(`${res.statusCode} ${(res.result as any)?.error ?? ''}`.trim());
            }
            expect(answers.filter((a) => a !== '500 server_error'), answers.join(', ')).to.equal([]);
            expect(await status(session)).to.equal('fetched');
        });

        // --- terminal sessions (spec 3.1: later wallet requests against a terminal session get HTTP 400) ---------------

        /** A session the wallet library took through issuance and a notification with `event`. */
        const finished = async (event: 'credential_accepted' | 'credential_failure') => {
            const created = await offerFor('pid');
            const wallet = new Wallet();
            const received = await wallet.receive(created.uri, { configurationId: 'pid' });
            await wallet.notify(received, event);
            expect(await status(created.session)).to.equal(event === 'credential_accepted' ? 'completed' : 'failed');
            return { created, received };
        };

        it('rejects a credential request against a completed session with 400', async () => {
            const { created, received } = await finished('credential_accepted');
            const again = await credentialRequest('acme', `Bearer ${received.accessToken}`, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proofJwt(received.holderKeys[0]!, await nonce()) } });
            expect(again.statusCode, again.payload).to.equal(400);
            expect((again.result as any).credentials).to.not.exist();
            expect(await status(created.session)).to.equal('completed');
        });

        it('rejects a credential request against a failed session with 400', async () => {
            const { created, received } = await finished('credential_failure');
            const again = await credentialRequest('acme', `Bearer ${received.accessToken}`, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proofJwt(received.holderKeys[0]!, await nonce()) } });
            expect(again.statusCode, again.payload).to.equal(400);
            expect((again.result as any).credentials).to.not.exist();
            expect(await status(created.session)).to.equal('failed');
        });

        it('rejects a notification against a completed session with 400, without a webhook', async () => {
            const created = await offerFor('pid', { webhookEndpointId: 'hook' });
            const wallet = new Wallet();
            const received = await wallet.receive(created.uri, { configurationId: 'pid' });
            await wallet.notify(received, 'credential_accepted');
            expect(await status(created.session)).to.equal('completed');
            const before = receiver.deliveries.length;
            const again = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/notification', headers: { authorization: `Bearer ${received.accessToken}` }, payload: { notification_id: received.notificationId, event: 'credential_deleted' } });
            expect(again.statusCode, again.payload).to.equal(400);
            expect(receiver.deliveries.length).to.equal(before);
            expect(await status(created.session)).to.equal('completed');
            expect((await sessionOf(created.session)).notifications).to.have.length(1);
        });

        it('rejects a notification_id of another session with invalid_notification_id', async () => {
            const one = await redeemed();
            const other = await redeemed();
            const issued = await credentialRequest('acme', `Bearer ${other.accessToken}`, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proofJwt(await newHolderKey(), await nonce()) } });
            expect(issued.statusCode).to.equal(200);
            const res = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/notification', headers: { authorization: `Bearer ${one.accessToken}` }, payload: { notification_id: (issued.result as any).notification_id, event: 'credential_accepted' } });
            expectOAuthError(res, 400, 'invalid_notification_id');
            expect(await status(other.session)).to.equal('fetched');
        });

        // --- negative cases of the issuer test plan ------------------------------------------------------------------

        it('rejects a made-up nonce with invalid_nonce', async () => {
            const { accessToken } = await redeemed();
            const key = await newHolderKey();
            const res = await credentialRequest('acme', `Bearer ${accessToken}`, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proofJwt(key, Crypto.randomBytes(24).toString('base64url')) } });
            expectOAuthError(res, 400, 'invalid_nonce');
            expect((res.result as any).credentials).to.not.exist();
        });

        it('rejects a reused c_nonce with invalid_nonce', async () => {
            const { accessToken } = await redeemed();
            const key = await newHolderKey();
            const n = await nonce();
            const first = await credentialRequest('acme', `Bearer ${accessToken}`, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proofJwt(key, n) } });
            expect(first.statusCode, first.payload).to.equal(200);
            const second = await credentialRequest('acme', `Bearer ${accessToken}`, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proofJwt(key, n) } });
            expectOAuthError(second, 400, 'invalid_nonce');
        });

        it('rejects a proof signed by another key than its jwk with invalid_proof', async () => {
            const { accessToken } = await redeemed();
            const res = await credentialRequest('acme', `Bearer ${accessToken}`, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proofJwt(await newHolderKey(), await nonce(), { signWith: await newHolderKey() }) } });
            expectOAuthError(res, 400, 'invalid_proof');
        });

        it('rejects a DPoP proof made with another key than the token is bound to (401)', async () => {
            const dpopKey = await newHolderKey();
            const { accessToken, tokenType } = await redeemed('pid', { dpopKey });
            expect(tokenType).to.equal('DPoP');
            const body = { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proofJwt(await newHolderKey(), await nonce()) } };
            const url = `${issuerOf('acme')}/vci/credential`;
            const res = await credentialRequest('acme', `DPoP ${accessToken}`, body, { dpop: await dpopProof(await newHolderKey(), 'POST', url, accessToken) });
            expect(res.statusCode, res.payload).to.equal(401);
            const bearerScheme = await credentialRequest('acme', `Bearer ${accessToken}`, body);
            expect(bearerScheme.statusCode, bearerScheme.payload).to.equal(401);
            const noProof = await credentialRequest('acme', `DPoP ${accessToken}`, body);
            expect(noProof.statusCode).to.be.within(400, 401);
            // The right key still works (the nonce was not consumed by the refused requests).
            const ok = await credentialRequest('acme', `DPoP ${accessToken}`, body, { dpop: await dpopProof(dpopKey, 'POST', url, accessToken) });
            expect(ok.statusCode, ok.payload).to.equal(200);
        });

        it('accepts each DPoP proof once at the credential endpoint', async () => {
            const dpopKey = await newHolderKey();
            const { accessToken } = await redeemed('pid', { dpopKey });
            const proof = await dpopProof(dpopKey, 'POST', `${issuerOf('acme')}/vci/credential`, accessToken);
            const first = await credentialRequest('acme', `DPoP ${accessToken}`, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proofJwt(await newHolderKey(), await nonce()) } }, { dpop: proof });
            expect(first.statusCode, first.payload).to.equal(200);
            const replay = await credentialRequest('acme', `DPoP ${accessToken}`, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proofJwt(await newHolderKey(), await nonce()) } }, { dpop: proof });
            expect(replay.statusCode, replay.payload).to.be.within(400, 401);
            expect(['invalid_dpop_proof', 'invalid_token']).to.include((replay.result as any).error);
        });

        it('consumes a c_nonce once under 10 concurrent credential requests', async () => {
            const { accessToken } = await redeemed();
            const n = await nonce();
            const bodies = await Promise.all(Array.from({ length: 10 }, async () => JSON.stringify({ credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proofJwt(await newHolderKey(), n) } })));
            const answers = await Promise.all(bodies.map(async (body) => {
                const res = await fetch(`${issuerOf('acme')}/vci/credential`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${accessToken}` }, body });
                return { status: res.status, body: await res.json() as Record<string, unknown> };
            }));
            expect(answers.filter((a) => a.status === 200), JSON.stringify(answers.filter((a) => a.status !== 200 && a.body.error !== 'invalid_nonce'))).to.have.length(1);
            expect(answers.filter((a) => a.status === 400 && a.body.error === 'invalid_nonce')).to.have.length(9);
        });

        it('rejects a proof for another audience, and a nonce of another tenant', async () => {
            const { accessToken } = await redeemed();
            const key = await newHolderKey();
            const otherAudience = await proofJwt(key, await nonce(), { tenant: 'batch' });
            expectOAuthError(await credentialRequest('acme', `Bearer ${accessToken}`, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: otherAudience } }), 400, 'invalid_proof');
            const foreignNonce = await proofJwt(key, await nonce('batch'));
            expectOAuthError(await credentialRequest('acme', `Bearer ${accessToken}`, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: foreignNonce } }), 400, 'invalid_nonce');
        });

        it('keeps access tokens and codes within their tenant', async () => {
            const { accessToken } = await redeemed();
            const res = await credentialRequest('batch', `Bearer ${accessToken}`, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proofJwt(await newHolderKey(), await nonce('batch'), { tenant: 'batch' }) } });
            expect(res.statusCode, res.payload).to.equal(401);
            const created = await offer({ credentialConfigurationIds: ['pid'], credentialClaims: claimsFor('pid'), byReference: false });
            expectOAuthError(await tokenRequest('batch', preAuthorized(await codeOf(created.uri))), 400, 'invalid_grant');
            expect((await tokenRequest('acme', preAuthorized(await codeOf(created.uri)))).statusCode).to.equal(200);
        });

        it('rejects a credential request without proof with invalid_proof', async () => {
            const { accessToken } = await redeemed();
            const res = await credentialRequest('acme', `Bearer ${accessToken}`, { credential_configuration_id: 'pid' });
            expectOAuthError(res, 400, 'invalid_proof');
        });

        it('rejects an unknown credential_configuration_id with unknown_credential_configuration', async () => {
            const { accessToken } = await redeemed();
            const proof = { proof_type: 'jwt', jwt: await proofJwt(await newHolderKey(), await nonce()) };
            expectOAuthError(await credentialRequest('acme', `Bearer ${accessToken}`, { credential_configuration_id: 'nope', proof }), 400, 'unknown_credential_configuration');
            // A configuration of the tenant that this offer did not include is just as unknown here.
            expectOAuthError(await credentialRequest('acme', `Bearer ${accessToken}`, { credential_configuration_id: 'mdl', proof }), 400, 'unknown_credential_configuration');
        });

        it('rejects a credential_identifier with unknown_credential_identifier', async () => {
            const { accessToken } = await redeemed();
            const res = await credentialRequest('acme', `Bearer ${accessToken}`, { credential_identifier: 'pid-1', proof: { proof_type: 'jwt', jwt: await proofJwt(await newHolderKey(), await nonce()) } });
            expectOAuthError(res, 400, 'unknown_credential_identifier');
        });

        it('rejects an access token in the query string with invalid_request', async () => {
            const { accessToken } = await redeemed();
            const body = { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proofJwt(await newHolderKey(), await nonce()) } };
            expectOAuthError(await credentialRequest('acme', undefined, body, {}, `?access_token=${accessToken}`), 400, 'invalid_request');
            expectOAuthError(await credentialRequest('acme', `Bearer ${accessToken}`, body, {}, `?access_token=${accessToken}`), 400, 'invalid_request');
        });

        it('rejects a replayed pre-authorized code with invalid_grant', async () => {
            const { code } = await redeemed();
            expectOAuthError(await tokenRequest('acme', preAuthorized(code)), 400, 'invalid_grant');
        });

        it('redeems a pre-authorized code exactly once under 20 concurrent token requests', async () => {
            const created = await offer({ credentialConfigurationIds: ['pid'], credentialClaims: claimsFor('pid'), byReference: false, tx_code: '482915' });
            const code = await codeOf(created.uri);
            const answers = await Promise.all(Array.from({ length: 20 }, async () => {
                const res = await fetch(`${issuerOf('acme')}/authorize/token`, {
                    method: 'POST',
                    headers: { 'content-type': 'application/x-www-form-urlencoded' },
                    body: new URLSearchParams(preAuthorized(code, '482915')).toString()
                });
                return { status: res.status, body: await res.json() as Record<string, string> };
            }));
            const ok = answers.filter((a) => a.status === 200);
            expect(ok, JSON.stringify(answers.filter((a) => a.status !== 200 && a.body.error !== 'invalid_grant'))).to.have.length(1);
            expect(answers.filter((a) => a.status === 400 && a.body.error === 'invalid_grant')).to.have.length(19);
            // The one token works.
            const res = await credentialRequest('acme', `Bearer ${ok[0]!.body.access_token}`, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proofJwt(await newHolderKey(), await nonce()) } });
            expect(res.statusCode, res.payload).to.equal(200);
        });

        it('expires an offer after offerLifetimeSeconds: the offer answers 404 and the code invalid_grant', async () => {
            const fetchedEarly = await offerFor('pid', { offerLifetimeSeconds: 1 });
            const code = await codeOf(fetchedEarly.uri);
            const neverFetched = await offerFor('pid', { offerLifetimeSeconds: 1 });
            const redeemedEarly = await redeemed('pid', { extra: { offerLifetimeSeconds: 1 } });
            await new Promise((resolve) => setTimeout(resolve, 1500));
            // A redeemed offer does not expire: the wallet may keep requesting credentials (spec 3.1).
            const late = await credentialRequest('acme', `Bearer ${redeemedEarly.accessToken}`, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proofJwt(await newHolderKey(), await nonce()) } });
            expect(late.statusCode, late.payload).to.equal(200);
            const res = await fetch(queryParam(neverFetched.uri, 'credential_offer_uri')!);
            expect(res.status).to.equal(404);
            expectOAuthError(await tokenRequest('acme', preAuthorized(code)), 400, 'invalid_grant');
        });

        it('locks the code after txCodeMaxAttempts wrong transaction codes', async () => {
            const created = await offerFor('pid', { tx_code: '13572468', byReference: false });
            const code = await codeOf(created.uri);
            const missing = await tokenRequest('acme', preAuthorized(code));
            expect(missing.statusCode, missing.payload).to.equal(400);
            for (let i = 0; i < 5; i++) {
                expectOAuthError(await tokenRequest('acme', preAuthorized(code, `0000000${i}`)), 400, 'invalid_grant');
            }
            expectOAuthError(await tokenRequest('acme', preAuthorized(code, '13572468')), 400, 'invalid_grant');
        });

        it('refuses the credential when a mandatory claim is missing, with credential_request_denied', async () => {
            const { family_name: familyName } = pidClaims;
            const { accessToken, session } = await redeemed('pid', { extra: { credentialClaims: { pid: { type: 'inline', claims: { family_name: familyName } } } } });
            const res = await credentialRequest('acme', `Bearer ${accessToken}`, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proofJwt(await newHolderKey(), await nonce()) } });
            expectOAuthError(res, 400, 'credential_request_denied');
            expect((res.result as any).credentials).to.not.exist();
            expect(await status(session)).to.equal('active');
        });

        it('ignores unknown body fields at the token and credential endpoints', async () => {
            const created = await offer({ credentialConfigurationIds: ['pid'], credentialClaims: claimsFor('pid'), byReference: false });
            const code = await codeOf(created.uri);
            const token = await tokenRequest('acme', { ...preAuthorized(code), some_future_parameter: 'x', client_id: 'wallet-x' });
            expect(token.statusCode, token.payload).to.equal(200);
            const accessToken = (token.result as { access_token: string }).access_token;
            const key = await newHolderKey();
            const res = await credentialRequest('acme', `Bearer ${accessToken}`, {
                credential_configuration_id: 'pid',
                proof: { proof_type: 'jwt', jwt: await proofJwt(key, await nonce()) },
                some_future_parameter: { nested: true },
                format: 'dc+sd-jwt'
            });
            expect(res.statusCode, res.payload).to.equal(200);
            await checkSdJwt((res.result as any).credentials[0].credential, key);
        });

        it('answers the nonce and credential endpoints with Cache-Control: no-store', async () => {
            const { accessToken } = await redeemed();
            const n = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/nonce' });
            expect(n.headers['cache-control']).to.equal('no-store');
            const res = await credentialRequest('acme', `Bearer ${accessToken}`, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proofJwt(await newHolderKey(), (n.result as any).c_nonce) } });
            expect(res.statusCode).to.equal(200);
            expect(res.headers['cache-control']).to.equal('no-store');
        });

        it('serves an offer by reference once (ISSUER_MULTI_CONSUMPTION off)', async () => {
            const created = await offerFor('pid');
            const url = queryParam(created.uri, 'credential_offer_uri')!;
            expect(url.startsWith(`${issuerOf('acme')}/vci/credential-offers/`)).to.be.true();
            const first = await fetch(url);
            expect(first.status).to.equal(200);
            const body = await first.json() as any;
            expect(body.credential_issuer).to.equal(issuerOf('acme'));
            expect((await fetch(url)).status).to.equal(404);
        });

        it('serves an offer by reference once under 10 concurrent fetches', async () => {
            const created = await offerFor('pid');
            const url = queryParam(created.uri, 'credential_offer_uri')!;
            const statuses = await Promise.all(Array.from({ length: 10 }, async () => (await fetch(url)).status));
            expect(statuses.filter((s) => s === 200)).to.have.length(1);
            expect(statuses.filter((s) => s === 404)).to.have.length(9);
        });

        it('puts the pre-authorized code and credential_issuer into a by-value offer', async () => {
            const created = await offerFor('mdl', { byReference: false, tx_code: '2468', tx_code_description: 'Sent by mail' });
            expect(queryParam(created.uri, 'credential_offer_uri')).to.not.exist();
            const body = JSON.parse(queryParam(created.uri, 'credential_offer')!);
            expect(body.credential_issuer).to.equal(issuerOf('acme'));
            expect(body.credential_configuration_ids).to.equal(['mdl']);
            const grant = body.grants[PRE_AUTHORIZED];
            expect(grant['pre-authorized_code']).to.match(/^[A-Za-z0-9_-]{20,}$/);
            expect(grant.tx_code).to.equal({ input_mode: 'numeric', length: 4, description: 'Sent by mail' });
            expect(created.tx_code).to.not.exist();
        });

        // --- management ----------------------------------------------------------------------------------------------

        it('creates offers: 201 {session, uri}, tx_code only when generated', async () => {
            const plain = await api(admins.acme!, 'POST', '/api/issuer/offer', { credentialConfigurationIds: ['pid'], credentialClaims: claimsFor('pid') });
            expect(plain.status, plain.payload).to.equal(201);
            expect(Object.keys(plain.body).sort()).to.equal(['session', 'uri']);
            expect(plain.body.uri as string).to.startWith('openid-credential-offer://?credential_offer_uri=');
            const given = await api(admins.acme!, 'POST', '/api/issuer/offer', { credentialConfigurationIds: ['pid'], tx_code: '1234' });
            expect(given.status, given.payload).to.equal(201);
            expect(given.body.tx_code).to.not.exist();
            const generated = await api(admins.acme!, 'POST', '/api/issuer/offer', { credentialConfigurationIds: ['pid'], tx_code: true });
            expect(generated.status, generated.payload).to.equal(201);
            expect(Object.keys(generated.body).sort()).to.equal(['session', 'tx_code', 'uri']);
            expect(await status(generated.body.session)).to.equal('active');
        });

        it('refuses an offer for a configuration the client may not use (403)', async () => {
            const res = await api(restricted, 'POST', '/api/issuer/offer', { credentialConfigurationIds: ['pid'] });
            expect(res.status, res.payload).to.equal(403);
            const allowed = await api(restricted, 'POST', '/api/issuer/offer', { credentialConfigurationIds: ['mdl'], credentialClaims: claimsFor('mdl') });
            expect(allowed.status, allowed.payload).to.equal(201);
        });

        it('refuses an offer for an unknown configuration (400) and unknown fields (400)', async () => {
            expect((await api(admins.acme!, 'POST', '/api/issuer/offer', { credentialConfigurationIds: ['nope'] })).status).to.equal(400);
            expect((await api(admins.acme!, 'POST', '/api/issuer/offer', { credentialConfigurationIds: ['pid'], surprise: true })).status).to.equal(400);
        });

        it('hides a session from another tenant (404)', async () => {
            const created = await offerFor('pid');
            expect((await api(admins.other!, 'GET', `/api/session/${created.session}`)).status).to.equal(404);
            expect((await api(admins.acme!, 'GET', `/api/session/${created.session}`)).status).to.equal(200);
        });
    });
}

