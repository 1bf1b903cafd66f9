import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as Jose from 'jose';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { freePort } from '../helpers/net';
import { PRE_AUTHORIZED } from '../helpers/pid-config';
import { DAY, party, type Party } from '../helpers/pki';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';
import { sameKey, verifyMdoc, verifySdJwtVc, Wallet, type HolderKey } from '../helpers/wallet';

/**
 * Key attestations at the credential endpoint (OpenID4VCI 1.0 appendix D and F, HAIP 1.0 Annex D): a jwt proof
 * with a key_attestation header and the attestation proof type, made in the test under a wallet provider PKI that
 * the tenant's trust list names. Accepted requests go through the @openid4vc/openid4vci wallet library and their
 * credentials are checked with independent code (every attested key is a credential's cnf / device key);
 * rejections are made by hand.
 */

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const b64 = (p: Party) => Buffer.from(p.cert.rawData).toString('base64');
const pem = (p: Party) => p.cert.toString('pem');
const seconds = () => Math.floor(Date.now() / 1000);
const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** A JWS over any header and payload (also ones jose's JWT builder would refuse), signed with ES256. */
const signRaw = (header: Record<string, unknown>, payload: unknown, key: Crypto.KeyObject): string => {
    const input = `${b64url(header)}.${b64url(payload)}`;
    return `${input}.${Crypto.sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`;
};

const dropUndefined = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));

const HIGH = 'iso_18045_high';
const MODERATE = 'iso_18045_moderate';
const MDL = 'org.iso.18013.5.1.mDL';
const MDL_NS = 'org.iso.18013.5.1';

const sdJwt = (id: string, config: Record<string, unknown> = {}) => ({
    id,
    config: { format: 'dc+sd-jwt', display: [{ locale: 'en', name: id }], ...config },
    vct: `urn:test:${id}`,
    keyChainId: 'issuer',
    fields: [{ path: ['given_name'], type: 'string', mandatory: true }],
    lifeTime: 3600
});

const mdl = {
    id: 'mdl',
    config: { format: 'mso_mdoc', docType: MDL, display: [{ locale: 'en', name: 'mDL' }], keyAttestationsRequired: { key_storage: [HIGH] } },
    keyChainId: 'issuer',
    fields: [{ path: [MDL_NS, 'given_name'], type: 'string', mandatory: true }],
    lifeTime: 3600
};

for (const dialect of DIALECTS) {
    describe(`OID4VCI key attestations at the credential endpoint (${dialect})`, () => {
        let t: TestServer;
        let base: string;
        let issuer: string;
        let admin: string;
        let globexAdmin: string;
        let walletRoot: Party;
        let walletIntermediate: Party;
        let walletSigner: Party;
        let expiredSigner: Party;
        let pidRoot: Party;
        let pidSigner: Party;
        let otherRoot: Party;
        let otherSigner: Party;
        let selfSigned: Party;
        const wallet = new Wallet();

        /** A key attestation as a wallet provider makes it; `claims` and `header` override or (undefined) drop members. */
        const keyAttestation = (keys: HolderKey[], options: { claims?: Record<string, unknown>; header?: Record<string, unknown>; signer?: Party; x5c?: Party[]; signingKey?: Crypto.KeyObject } = {}) => {
            const signer = options.signer ?? walletSigner;
            const header = { alg: 'ES256', typ: 'key-attestation+jwt', x5c: (options.x5c ?? [signer, walletIntermediate]).map(b64), ...options.header };
            const claims = {
                iss: 'https://wallet-provider.example', iat: seconds() - 10, exp: seconds() + 3600,
                attested_keys: keys.map((k) => k.publicJwk), key_storage: [HIGH], user_authentication: [MODERATE], ...options.claims
            };
            return signRaw(dropUndefined(header), dropUndefined(claims), options.signingKey ?? signer.privateKey);
        };

        /** A jwt proof signed by `key`, carrying it as jwk unless the header says otherwise. */
        const proofJwt = (key: HolderKey, nonce: string, header: Record<string, unknown> = {}) =>
            new Jose.SignJWT({ nonce, aud: issuer }).setProtectedHeader(dropUndefined({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: key.publicJwk, ...header }) as Jose.JWTHeaderParameters).setIssuedAt().sign(key.privateKey);

        const nonce = async (tenant = 'acme'): Promise<string> => ((await t.server.inject({ method: 'POST', url: `/issuers/${tenant}/vci/nonce` })).result as { c_nonce: string }).c_nonce;

        const offer = async (id: string, token = admin): Promise<{ uri: string; session: string }> => {
            const claims = id === 'mdl' ? { [MDL_NS]: { given_name: 'Erika' } } : { given_name: 'Erika' };
            const res = await t.server.inject({ method: 'POST', url: '/api/issuer/offer', headers: bearer(token), payload: { credentialConfigurationIds: [id], credentialClaims: { [id]: { type: 'inline', claims } } } });
            expect(res.statusCode, res.payload).to.equal(201);
            return res.result as { uri: string; session: string };
        };

        /** An access token of a fresh session that offers `id`, by hand. */
        const accessToken = async (id: string, tenant = 'acme', tenantAdmin = admin): Promise<string> => {
            const offerUri = decodeURIComponent(new URL((await offer(id, tenantAdmin)).uri.replace('openid-credential-offer://', 'https://x/')).searchParams.get('credential_offer_uri')!);
            const offered = (await t.server.inject(offerUri.replace(base, ''))).result as any;
            const token = await t.server.inject({ method: 'POST', url: `/issuers/${tenant}/authorize/token`, payload: new URLSearchParams({ grant_type: PRE_AUTHORIZED, 'pre-authorized_code': offered.grants[PRE_AUTHORIZED]['pre-authorized_code'] }).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
            expect(token.statusCode, token.payload).to.equal(200);
            return (token.result as { access_token: string }).access_token;
        };

        const credentialRequest = (token: string, payload: object, tenant = 'acme') =>
            t.server.inject({ method: 'POST', url: `/issuers/${tenant}/vci/credential`, headers: bearer(token), payload });

        /** A request that must fail with `error` (and a description matching `description`), issuing nothing. */
        const refused = async (token: string, payload: object, error: string, description: RegExp, tenant = 'acme') => {
            const res = await credentialRequest(token, payload, tenant);
            expect(res.statusCode, res.payload).to.equal(400);
            expect((res.result as any).error, res.payload).to.equal(error);
            expect((res.result as any).error_description, res.payload).to.match(description);
            expect((res.result as any).credentials).to.not.exist();
        };

        const keys = (n: number) => Promise.all(Array.from({ length: n }, () => wallet.key()));

        /** The wallet library's flow up to the token: the offer, the metadata and an access token. */
        const walletSession = async (id: string) => {
            const credentialOffer = await wallet.client.resolveCredentialOffer((await offer(id)).uri);
            const issuerMetadata = await wallet.client.resolveIssuerMetadata(credentialOffer.credential_issuer);
            const token = await wallet.client.retrievePreAuthorizedCodeAccessTokenFromOffer({ credentialOffer, issuerMetadata });
            return { issuerMetadata, accessToken: token.accessTokenResponse.access_token };
        };

        const credentialsOf = (response: { credentials?: unknown[] }): string[] =>
            (response.credentials ?? []).map((c) => (c as { credential: string }).credential);

        before(async () => {
            const port = await freePort();
            base = `http://127.0.0.1:${port}`;
            issuer = `${base}/issuers/acme`;
            t = await startTestServer(dialect, { listen: true, manifest: manifestFor('hallmark-oid4vci', 'hallmark-oid4vp', 'hallmark-kms-db', 'hallmark-tenancy'), env: { PORT: String(port), PUBLIC_URL: base } });
            walletRoot = await party('Wallet Provider Root', null, { ca: true });
            walletIntermediate = await party('Wallet Provider Intermediate', walletRoot, { ca: true });
            walletSigner = await party('Key Attestation Signer', walletIntermediate);
            expiredSigner = await party('Expired Key Attestation Signer', walletIntermediate, { from: -10 * DAY, to: -DAY });
            pidRoot = await party('PID Issuer Root', null, { ca: true });
            pidSigner = await party('PID Issuer Signer', pidRoot);
            otherRoot = await party('Unlisted Wallet Provider Root', null, { ca: true });
            otherSigner = await party('Unlisted Key Attestation Signer', otherRoot);
            selfSigned = await party('Self-signed Wallet Provider', null);

            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            const setup: Array<[string, string, object]> = [
                ['POST', '/api/key-chain', { id: 'issuer', usageType: 'attestation', subject: { commonName: 'Acme', country: 'DE' } }],
                ['PUT', '/api/issuer/config', { batchSize: 3, display: [{ locale: 'en', name: 'Acme' }] }],
                ['POST', '/api/trust-lists', {
                    id: 'wallets', entities: [
                        { name: 'Wallet provider', serviceType: 'wallet-provider', certificates: [pem(walletRoot)] },
                        // Listed as a wallet provider, a self-signed leaf still may not sign key attestations (HAIP).
                        { name: 'Self-signed wallet provider', serviceType: 'wallet-provider', certificates: [pem(selfSigned)] },
                        { name: 'PID issuer', serviceType: 'pid-issuance', certificates: [pem(pidRoot)] }
                    ]
                }],
                ['POST', '/api/issuer/credentials', sdJwt('pid')],
                ['POST', '/api/issuer/credentials', sdJwt('pid-required', { keyAttestationsRequired: { key_storage: [HIGH], user_authentication: [HIGH, MODERATE] } })],
                ['POST', '/api/issuer/credentials', sdJwt('pid-any-attestation', { keyAttestationsRequired: {} })],
                ['POST', '/api/issuer/credentials', sdJwt('pid-jwt-only', { proofTypesSupported: ['jwt'] })],
                ['POST', '/api/issuer/credentials', sdJwt('pid-attestation-only', { proofTypesSupported: ['attestation'] })],
                ['POST', '/api/issuer/credentials', mdl]
            ];
            for (const [method, url, payload] of setup) {
                const res = await t.server.inject({ method, url, headers: bearer(admin), payload });
                expect(res.statusCode, `${url}: ${res.payload}`).to.be.within(200, 201);
            }
            // Another tenant, whose only wallet provider is one acme does not list.
            await createTenant(t.server, root, 'globex');
            globexAdmin = (await clientWithToken(t.server, root, { clientId: 'globex-admin', roles: ['tenant:admin'], tenantId: 'globex' })).token;
            for (const [method, url, payload] of [
                ['POST', '/api/key-chain', { id: 'issuer', usageType: 'attestation', subject: { commonName: 'Globex', country: 'DE' } }],
                ['POST', '/api/trust-lists', { id: 'wallets', entities: [{ name: 'Globex wallet provider', serviceType: 'wallet-provider', certificates: [pem(otherRoot)] }] }],
                ['POST', '/api/issuer/credentials', sdJwt('pid')]
            ] as const) {
                const res = await t.server.inject({ method, url, headers: bearer(globexAdmin), payload });
                expect(res.statusCode, `${url}: ${res.payload}`).to.equal(201);
            }
        });
        after(() => t.stop());

        it('publishes proof_types_supported per configuration, with key_attestations_required where set', async () => {
            const res = await t.server.inject('/.well-known/openid-credential-issuer/issuers/acme');
            const supported = (res.result as any).credential_configurations_supported;
            const es256 = { proof_signing_alg_values_supported: ['ES256'] };
            const required = { key_storage: [HIGH], user_authentication: [HIGH, MODERATE] };
            expect(supported.pid.proof_types_supported).to.equal({ jwt: es256, attestation: es256 });
            expect(supported['pid-required'].proof_types_supported).to.equal({ jwt: { ...es256, key_attestations_required: required }, attestation: { ...es256, key_attestations_required: required } });
            expect(supported['pid-any-attestation'].proof_types_supported.jwt).to.equal({ ...es256, key_attestations_required: {} });
            expect(supported['pid-jwt-only'].proof_types_supported).to.equal({ jwt: es256 });
            expect(supported['pid-attestation-only'].proof_types_supported).to.equal({ attestation: es256 });
            expect(supported.mdl.proof_types_supported.attestation).to.equal({ ...es256, key_attestations_required: { key_storage: [HIGH] } });
            // The wallet library reads it as OpenID4VCI 1.0 metadata.
            const metadata = await wallet.client.resolveIssuerMetadata(issuer);
            expect(metadata.credentialIssuer.credential_configurations_supported['pid-required']!.proof_types_supported!.jwt!.key_attestations_required).to.equal(required);
        });

        it('issues one credential per attested key for a jwt proof with key_attestation (wallet library), each bound to its key', async () => {
            const { issuerMetadata, accessToken } = await walletSession('pid-required');
            const { c_nonce: cNonce } = await wallet.client.requestNonce({ issuerMetadata });
            const attested = await keys(3);
            const keyAttestationJwt = keyAttestation(attested, { claims: { nonce: cNonce } });
            const { jwt } = await wallet.client.createCredentialRequestJwtProof({ issuerMetadata, credentialConfigurationId: 'pid-required', nonce: cNonce, signer: wallet.jwkSigner(attested[1]!), keyAttestationJwt });
            const { credentialResponse } = await wallet.client.retrieveCredentials({ issuerMetadata, credentialConfigurationId: 'pid-required', accessToken, proofs: { jwt: [jwt] } });
            const credentials = credentialsOf(credentialResponse);
            expect(credentials).to.have.length(3);
            const bound = await Promise.all(credentials.map(async (c) => ((await verifySdJwtVc(c)).payload.cnf as { jwk: Jose.JWK }).jwk));
            for (const key of attested) {
                expect(bound.filter((jwk) => sameKey(jwk, key.publicJwk)), 'each attested key has its credential').to.have.length(1);
            }
        });

        it('issues one credential per attested key, up to the batch size, for the attestation proof type (wallet library)', async () => {
            const { issuerMetadata, accessToken } = await walletSession('pid');
            const { c_nonce: cNonce } = await wallet.client.requestNonce({ issuerMetadata });
            const attested = await keys(4);
            const { credentialResponse } = await wallet.client.retrieveCredentials({ issuerMetadata, credentialConfigurationId: 'pid', accessToken, proofs: { attestation: [keyAttestation(attested, { claims: { nonce: cNonce } })] } });
            const credentials = credentialsOf(credentialResponse);
            // batchSize 3: the first three attested keys.
            expect(credentials).to.have.length(3);
            const bound = await Promise.all(credentials.map(async (c) => ((await verifySdJwtVc(c)).payload.cnf as { jwk: Jose.JWK }).jwk));
            expect(bound.map((jwk) => attested.findIndex((k) => sameKey(k.publicJwk, jwk))).sort()).to.equal([0, 1, 2]);
        });

        it('binds an mdoc to the attested key (attestation proof type, key_storage required)', async () => {
            const { issuerMetadata, accessToken } = await walletSession('mdl');
            const { c_nonce: cNonce } = await wallet.client.requestNonce({ issuerMetadata });
            const [device] = await keys(1);
            const { credentialResponse } = await wallet.client.retrieveCredentials({ issuerMetadata, credentialConfigurationId: 'mdl', accessToken, proofs: { attestation: [keyAttestation([device!], { claims: { nonce: cNonce } })] } });
            const [credential] = credentialsOf(credentialResponse);
            const verified = await verifyMdoc(credential!, MDL);
            expect(sameKey(verified.deviceJwk, device!.publicJwk)).to.be.true();
            expect(verified.namespaces[MDL_NS]).to.equal({ given_name: 'Erika' });
        });

        it('accepts a jwt proof that names its attested key by kid (index or the key\'s kid), and any level under an empty requirement', async () => {
            const token = await accessToken('pid-any-attestation');
            const attested = await keys(2);
            const withKid = { ...attested[1]!, publicJwk: { ...attested[1]!.publicJwk, kid: 'device-2' } };
            for (const kid of ['0', 'device-2']) {
                const n = await nonce();
                const attestationJwt = keyAttestation([attested[0]!, withKid], { claims: { nonce: n, key_storage: undefined, user_authentication: undefined } });
                const signer = kid === '0' ? attested[0]! : attested[1]!;
                const res = await credentialRequest(token, { credential_configuration_id: 'pid-any-attestation', proofs: { jwt: [await proofJwt(signer, n, { jwk: undefined, kid, key_attestation: attestationJwt })] } });
                expect(res.statusCode, res.payload).to.equal(200);
                expect((res.result as any).credentials).to.have.length(2);
            }
            // A key attestation without nonce is accepted in a jwt proof: the proof carries the c_nonce.
            const n = await nonce();
            const res = await credentialRequest(token, { credential_configuration_id: 'pid-any-attestation', proofs: { jwt: [await proofJwt(attested[0]!, n, { key_attestation: keyAttestation(attested) })] } });
            expect(res.statusCode, res.payload).to.equal(200);
        });

        it('refuses key attestations whose signature or x5c chain is not acceptable', async () => {
            const token = await accessToken('pid');
            const [key] = await keys(1);
            const cases: Array<[string, (n: string) => string, RegExp]> = [
                ['bad signature', (n) => keyAttestation([key!], { claims: { nonce: n }, signingKey: otherSigner.privateKey }), /key attestation signature does not verify/],
                ['untrusted root', (n) => keyAttestation([key!], { claims: { nonce: n }, signer: otherSigner, x5c: [otherSigner] }), /does not chain to a wallet provider this issuer trusts/],
                ['pid-issuance root only', (n) => keyAttestation([key!], { claims: { nonce: n }, signer: pidSigner, x5c: [pidSigner] }), /chains to a trust list entry that is not a wallet provider/],
                ['self-signed', (n) => keyAttestation([key!], { claims: { nonce: n }, signer: selfSigned, x5c: [selfSigned] }), /self-signed/],
                ['anchor included', (n) => keyAttestation([key!], { claims: { nonce: n }, x5c: [walletSigner, walletIntermediate, walletRoot] }), /includes its trust anchor/],
                ['no x5c', (n) => keyAttestation([key!], { claims: { nonce: n }, header: { x5c: undefined } }), /has no x5c/],
                ['expired certificate', (n) => keyAttestation([key!], { claims: { nonce: n }, signer: expiredSigner }), /expired or not yet valid/],
                ['expired attestation', (n) => keyAttestation([key!], { claims: { nonce: n, exp: seconds() - 120 } }), /has expired/],
                ['no exp', (n) => keyAttestation([key!], { claims: { nonce: n, exp: undefined } }), /has no exp/],
                ['iat in the future', (n) => keyAttestation([key!], { claims: { nonce: n, iat: seconds() + 600 } }), /iat is missing or in the future/],
                ['typ', (n) => keyAttestation([key!], { claims: { nonce: n }, header: { typ: 'keyattestation+jwt' } }), /typ must be key-attestation\+jwt/],
                ['alg', (n) => keyAttestation([key!], { claims: { nonce: n }, header: { alg: 'ES384' } }), /alg must be one of ES256/],
                ['no attested keys', (n) => keyAttestation([], { claims: { nonce: n } }), /has no attested_keys/],
                ['private attested key', (n) => keyAttestation([key!], { claims: { nonce: n, attested_keys: [key!.privateJwk] } }), /must be a public EC P-256 key/],
                ['key_storage not an array', (n) => keyAttestation([key!], { claims: { nonce: n, key_storage: HIGH } }), /key_storage must be a non-empty array of strings/]
            ];
            for (const [name, make, description] of cases) {
                // Both forms: the attestation proof type and a jwt proof carrying the attestation.
                const n = await nonce();
                await refused(token, { credential_configuration_id: 'pid', proofs: { attestation: [make(n)] } }, 'invalid_proof', description).catch((err) => {
                    throw new Error(`${name} (attestation): ${(err as Error).message}`);
                });
                const m = await nonce();
                await refused(token, { credential_configuration_id: 'pid', proofs: { jwt: [await proofJwt(key!, m, { key_attestation: make(m) })] } }, 'invalid_proof', description).catch((err) => {
                    throw new Error(`${name} (jwt): ${(err as Error).message}`);
                });
            }
        });

        it('refuses a jwt proof not signed by an attested key, or whose attestation has another nonce', async () => {
            const token = await accessToken('pid');
            const [attested, other] = await keys(2);
            let n = await nonce();
            await refused(token, { credential_configuration_id: 'pid', proofs: { jwt: [await proofJwt(other!, n, { key_attestation: keyAttestation([attested!], { claims: { nonce: n } }) })] } }, 'invalid_proof', /not one of the keys of its key attestation/);
            // Naming the attested key while signing with another.
            n = await nonce();
            await refused(token, { credential_configuration_id: 'pid', proofs: { jwt: [await proofJwt(other!, n, { jwk: attested!.publicJwk, key_attestation: keyAttestation([attested!], { claims: { nonce: n } }) })] } }, 'invalid_proof', /does not verify with the attested key/);
            n = await nonce();
            await refused(token, { credential_configuration_id: 'pid', proofs: { jwt: [await proofJwt(attested!, n, { jwk: undefined, kid: '1', key_attestation: keyAttestation([attested!], { claims: { nonce: n } }) })] } }, 'invalid_proof', /kid names no key/);
            n = await nonce();
            await refused(token, { credential_configuration_id: 'pid', proofs: { jwt: [await proofJwt(attested!, n, { jwk: undefined, key_attestation: keyAttestation([attested!], { claims: { nonce: n } }) })] } }, 'invalid_proof', /as jwk or kid/);
            n = await nonce();
            await refused(token, { credential_configuration_id: 'pid', proofs: { jwt: [await proofJwt(attested!, n, { key_attestation: keyAttestation([attested!], { claims: { nonce: await nonce() } }) })] } }, 'invalid_proof', /nonce is not the c_nonce of its proof/);
            n = await nonce();
            await refused(token, { credential_configuration_id: 'pid', proofs: { jwt: [await proofJwt(attested!, n, { key_attestation: 42 })] } }, 'invalid_proof', /must be a compact JWT/);
        });

        it('enforces keyAttestationsRequired: a key attestation with an accepted key_storage and user_authentication level', async () => {
            const token = await accessToken('pid-required');
            const [key] = await keys(1);
            const attestationProof = async (claims: Record<string, unknown>) => ({ credential_configuration_id: 'pid-required', proofs: { attestation: [keyAttestation([key!], { claims: { nonce: await nonce(), ...claims } })] } });
            await refused(token, await attestationProof({ key_storage: [MODERATE] }), 'invalid_proof', /key_storage does not meet this credential's requirement \(one of: iso_18045_high\)/);
            await refused(token, await attestationProof({ key_storage: undefined }), 'invalid_proof', /key_storage does not meet/);
            await refused(token, await attestationProof({ user_authentication: ['iso_18045_basic'] }), 'invalid_proof', /user_authentication does not meet/);
            await refused(token, await attestationProof({ user_authentication: undefined }), 'invalid_proof', /user_authentication does not meet/);
            // Without a key attestation at all.
            const n = await nonce();
            await refused(token, { credential_configuration_id: 'pid-required', proofs: { jwt: [await proofJwt(key!, n)] } }, 'invalid_proof', /requires a key attestation/);
            // One value in common is enough.
            const ok = await credentialRequest(token, await attestationProof({ key_storage: ['iso_18045_basic', HIGH], user_authentication: [HIGH] }));
            expect(ok.statusCode, ok.payload).to.equal(200);
        });

        it('accepts only the configured proof types', async () => {
            const [key] = await keys(1);
            const jwtOnly = await accessToken('pid-jwt-only');
            const n = await nonce();
            await refused(jwtOnly, { credential_configuration_id: 'pid-jwt-only', proofs: { attestation: [keyAttestation([key!], { claims: { nonce: n } })] } }, 'invalid_proof', /does not accept the attestation proof type/);
            await refused(jwtOnly, { credential_configuration_id: 'pid-jwt-only', proof: { proof_type: 'attestation', attestation: keyAttestation([key!], { claims: { nonce: n } }) } }, 'invalid_proof', /does not accept the attestation proof type/);
            expect((await credentialRequest(jwtOnly, { credential_configuration_id: 'pid-jwt-only', proofs: { jwt: [await proofJwt(key!, n)] } })).statusCode).to.equal(200);
            const attestationOnly = await accessToken('pid-attestation-only');
            await refused(attestationOnly, { credential_configuration_id: 'pid-attestation-only', proofs: { jwt: [await proofJwt(key!, await nonce())] } }, 'invalid_proof', /does not accept the jwt proof type/);
            const single = await credentialRequest(attestationOnly, { credential_configuration_id: 'pid-attestation-only', proof: { proof_type: 'attestation', attestation: keyAttestation([key!], { claims: { nonce: await nonce() } }) } });
            expect(single.statusCode, single.payload).to.equal(200);
            await refused(attestationOnly, { credential_configuration_id: 'pid-attestation-only', proofs: { di_vp: [{}] } }, 'invalid_proof', /di_vp proof type is not supported/);
        });

        it('refuses malformed attestation proofs: two attestations, two proof types, no nonce, a nonce never issued', async () => {
            const token = await accessToken('pid');
            const [key] = await keys(1);
            const n = await nonce();
            await refused(token, { credential_configuration_id: 'pid', proofs: { attestation: [keyAttestation([key!], { claims: { nonce: n } }), keyAttestation([key!], { claims: { nonce: n } })] } }, 'invalid_credential_request', /exactly one key attestation/);
            await refused(token, { credential_configuration_id: 'pid', proofs: { attestation: [keyAttestation([key!], { claims: { nonce: n } })], jwt: [await proofJwt(key!, n)] } }, 'invalid_credential_request', /exactly one proof type/);
            await refused(token, { credential_configuration_id: 'pid', proofs: { attestation: 'x' } }, 'invalid_credential_request', /proofs.attestation must be an array/);
            await refused(token, { credential_configuration_id: 'pid', proofs: { attestation: [42] } }, 'invalid_proof', /must be a JWT string/);
            await refused(token, { credential_configuration_id: 'pid', proofs: { attestation: ['a'.repeat(70_000)] } }, 'invalid_proof', /must be a JWT string/);
            await refused(token, { credential_configuration_id: 'pid', proofs: { attestation: ['not.a.jwt!'] } }, 'invalid_proof', /must be a compact JWT/);
            await refused(token, { credential_configuration_id: 'pid', proofs: { attestation: [keyAttestation([key!])] } }, 'invalid_nonce', /must carry the c_nonce/);
            await refused(token, { credential_configuration_id: 'pid', proofs: { attestation: [keyAttestation([key!], { claims: { nonce: 'never-issued' } })] } }, 'invalid_nonce', /unknown, expired or already used/);
            // The nonce of the refused requests is still unused.
            const ok = await credentialRequest(token, { credential_configuration_id: 'pid', proofs: { attestation: [keyAttestation([key!], { claims: { nonce: n } })] } });
            expect(ok.statusCode, ok.payload).to.equal(200);
        });

        it('refuses malformed proofs and proof members, never with a 500', async () => {
            const token = await accessToken('pid');
            const [key, other] = await keys(2);
            const signingKey = Crypto.createPrivateKey({ key: key!.privateJwk as Crypto.JsonWebKey, format: 'jwk' });
            /** A proof JWT made by hand (jose would refuse some of these headers), signed by `key`. */
            const rawProof = (n: string, header: Record<string, unknown> = {}, claims: Record<string, unknown> = {}) =>
                signRaw(dropUndefined({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: key!.publicJwk, ...header }), dropUndefined({ aud: issuer, iat: seconds(), nonce: n, ...claims }), signingKey);
            const attestationOf = (n: string, claims: Record<string, unknown> = {}) => keyAttestation([key!], { claims: { nonce: n, ...claims } });
            const jwtCases: Array<[string, (n: string) => string, string, RegExp]> = [
                ['not a JWT', () => 'x', 'invalid_proof', /not a JWT/],
                ['typ', (n) => rawProof(n, { typ: 'JWT' }), 'invalid_proof', /typ must be openid4vci-proof\+jwt/],
                ['alg', (n) => rawProof(n, { alg: 'ES384' }), 'invalid_proof', /signed with ES256/],
                ['x5c', (n) => rawProof(n, { x5c: [b64(walletSigner)] }), 'invalid_proof', /x5c is not supported/],
                ['kid without attestation', (n) => rawProof(n, { kid: '0' }), 'invalid_proof', /as jwk \(kid and x5c/],
                ['jwk not a point', (n) => rawProof(n, { jwk: { ...key!.publicJwk, x: Buffer.alloc(32, 1).toString('base64url') } }), 'invalid_proof', /not a point of P-256/],
                ['jwk of another key', (n) => rawProof(n, { jwk: other!.publicJwk }), 'invalid_proof', /signature is not valid/],
                ['aud', (n) => rawProof(n, {}, { aud: 'https://elsewhere.example' }), 'invalid_proof', /audience/],
                ['old iat', (n) => rawProof(n, {}, { iat: seconds() - 3600 }), 'invalid_proof', /iat is missing or outside/],
                ['no nonce', () => rawProof('', {}, { nonce: undefined }), 'invalid_nonce', /must carry the c_nonce/],
                ['jwk and kid with attestation', (n) => rawProof(n, { kid: '0', key_attestation: attestationOf(n) }), 'invalid_proof', /by jwk or by kid, not both/],
                ['jwk not an object with attestation', (n) => rawProof(n, { jwk: 'key', key_attestation: attestationOf(n) }), 'invalid_proof', /by jwk or by kid, not both/],
                ['attested key not an object', (n) => rawProof(n, { key_attestation: attestationOf(n, { attested_keys: [42] }) }), 'invalid_proof', /attested_keys\[0\] of the key attestation is not a JWK/],
                ['too many attested keys', (n) => rawProof(n, { key_attestation: attestationOf(n, { attested_keys: Array.from({ length: 101 }, () => key!.publicJwk) }) }), 'invalid_proof', /more than 100 keys/],
                ['attestation nbf', (n) => rawProof(n, { key_attestation: attestationOf(n, { nbf: seconds() + 600 }) }), 'invalid_proof', /not valid yet/],
                ['attestation nonce not a string', (n) => rawProof(n, { key_attestation: attestationOf(n, { nonce: 42 }) }), 'invalid_proof', /nonce must be a string/],
                ['attestation header', (n) => rawProof(n, { key_attestation: `e30x.${attestationOf(n).split('.').slice(1).join('.')}` }), 'invalid_proof', /header is not a JSON object/]
            ];
            for (const [name, make, error, description] of jwtCases) {
                await refused(token, { credential_configuration_id: 'pid', proofs: { jwt: [make(await nonce())] } }, error, description).catch((err) => {
                    throw new Error(`${name}: ${(err as Error).message}`);
                });
            }
            const n = await nonce();
            const shapeCases: Array<[object, string, RegExp]> = [
                [{}, 'invalid_proof', /proof of possession of the holder key is required/],
                [{ proofs: {} }, 'invalid_proof', /is required/],
                [{ proofs: { jwt: null } }, 'invalid_proof', /is required/],
                [{ proofs: [] }, 'invalid_credential_request', /proofs must be an object/],
                [{ proof: 'x' }, 'invalid_credential_request', /proof must be an object with a proof_type/],
                [{ proof: { proof_type: 'jwt' } }, 'invalid_proof', /is required/],
                [{ proof: { proof_type: 'jwt', jwt: rawProof(n) }, proofs: { jwt: [rawProof(n)] } }, 'invalid_credential_request', /either proof or proofs/],
                [{ proofs: { jwt: Array.from({ length: 4 }, () => rawProof(n)) } }, 'invalid_credential_request', /At most 3 proofs/]
            ];
            for (const [members, error, description] of shapeCases) {
                await refused(token, { credential_configuration_id: 'pid', ...members }, error, description);
            }
            // Two jwt proofs with the same key attestation: its keys once.
            const ok = await credentialRequest(token, { credential_configuration_id: 'pid', proofs: { jwt: [rawProof(n, { key_attestation: attestationOf(n) }), rawProof(n, { key_attestation: attestationOf(n) })] } });
            expect(ok.statusCode, ok.payload).to.equal(200);
            expect((ok.result as any).credentials).to.have.length(1);
        });

        it('trusts the wallet providers of the tenant\'s own trust lists only', async () => {
            const [key] = await keys(1);
            const attestationFrom = (n: string) => keyAttestation([key!], { claims: { nonce: n }, signer: otherSigner, x5c: [otherSigner] });
            const globex = await accessToken('pid', 'globex', globexAdmin);
            const accepted = await credentialRequest(globex, { credential_configuration_id: 'pid', proofs: { attestation: [attestationFrom(await nonce('globex'))] } }, 'globex');
            expect(accepted.statusCode, accepted.payload).to.equal(200);
            expect(sameKey(((await verifySdJwtVc((accepted.result as any).credentials[0].credential)).payload.cnf as { jwk: Jose.JWK }).jwk, key!.publicJwk)).to.be.true();
            // acme does not list that provider, and globex does not list acme's.
            await refused(await accessToken('pid'), { credential_configuration_id: 'pid', proofs: { attestation: [attestationFrom(await nonce())] } }, 'invalid_proof', /does not chain to a wallet provider this issuer trusts/);
            await refused(globex, { credential_configuration_id: 'pid', proofs: { attestation: [keyAttestation([key!], { claims: { nonce: await nonce('globex') } })] } }, 'invalid_proof', /does not chain to a wallet provider this issuer trusts/, 'globex');
            // A c_nonce of acme is no nonce of globex.
            await refused(globex, { credential_configuration_id: 'pid', proofs: { attestation: [attestationFrom(await nonce())] } }, 'invalid_nonce', /unknown, expired or already used/, 'globex');
        });

        it('lets one of two concurrent requests with the same nonce through', async () => {
            const token = await accessToken('pid');
            const [key] = await keys(1);
            const n = await nonce();
            const request = { credential_configuration_id: 'pid', proofs: { attestation: [keyAttestation([key!], { claims: { nonce: n } })] } };
            const answers = await Promise.all([credentialRequest(token, request), credentialRequest(token, request)]);
            expect(answers.map((a) => a.statusCode).sort()).to.equal([200, 400]);
            expect((answers.find((a) => a.statusCode === 400)!.result as any).error).to.equal('invalid_nonce');
        });

        it('refuses a replayed nonce, in both forms', async () => {
            const token = await accessToken('pid');
            const [key] = await keys(1);
            const n = await nonce();
            const attestationRequest = { credential_configuration_id: 'pid', proofs: { attestation: [keyAttestation([key!], { claims: { nonce: n } })] } };
            expect((await credentialRequest(token, attestationRequest)).statusCode).to.equal(200);
            await refused(token, attestationRequest, 'invalid_nonce', /already used/);
            const m = await nonce();
            const jwtRequest = { credential_configuration_id: 'pid', proofs: { jwt: [await proofJwt(key!, m, { key_attestation: keyAttestation([key!], { claims: { nonce: m } }) })] } };
            expect((await credentialRequest(token, jwtRequest)).statusCode).to.equal(200);
            await refused(token, jwtRequest, 'invalid_nonce', /already used/);
        });

        it('accepts proofTypesSupported and keyAttestationsRequired at save, and refuses bad values', async () => {
            const save = (config: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
                t.server.inject({ method: 'POST', url: '/api/issuer/credentials', headers: bearer(admin), payload: { ...sdJwt('pid-saved', config), ...extra } });
            const created = await save({ proofTypesSupported: ['attestation', 'jwt'], keyAttestationsRequired: { key_storage: [HIGH, 'https://levels.example/custom'] } });
            expect(created.statusCode, created.payload).to.equal(201);
            const stored = (await t.server.inject({ url: '/api/issuer/credentials/pid-saved', headers: bearer(admin) })).result as any;
            expect(stored.config.proofTypesSupported).to.equal(['attestation', 'jwt']);
            expect(stored.config.keyAttestationsRequired).to.equal({ key_storage: [HIGH, 'https://levels.example/custom'] });
            expect((await t.server.inject({ method: 'DELETE', url: '/api/issuer/credentials/pid-saved', headers: bearer(admin) })).statusCode).to.equal(204);

            const bad: Array<[Record<string, unknown>, Record<string, unknown>, string]> = [
                [{ proofTypesSupported: ['cwt'] }, {}, 'config.proofTypesSupported.0'],
                [{ proofTypesSupported: [] }, {}, 'config.proofTypesSupported'],
                [{ proofTypesSupported: ['jwt', 'jwt'] }, {}, 'config.proofTypesSupported.1'],
                [{ proofTypesSupported: 'jwt' }, {}, 'config.proofTypesSupported'],
                [{ keyAttestationsRequired: { key_storage: [] } }, {}, 'config.keyAttestationsRequired.key_storage'],
                [{ keyAttestationsRequired: { user_authentication: HIGH } }, {}, 'config.keyAttestationsRequired.user_authentication'],
                [{ keyAttestationsRequired: { key_storage: [42] } }, {}, 'config.keyAttestationsRequired.key_storage.0'],
                [{ keyAttestationsRequired: { key_storage: [''] } }, {}, 'config.keyAttestationsRequired.key_storage.0'],
                [{ keyAttestationsRequired: { key_storage: [HIGH, HIGH] } }, {}, 'config.keyAttestationsRequired.key_storage.1'],
                [{ keyAttestationsRequired: { key_storage: ['x'.repeat(256)] } }, {}, 'config.keyAttestationsRequired.key_storage.0'],
                [{ keyAttestationsRequired: { level: [HIGH] } }, {}, 'config.keyAttestationsRequired.level'],
                [{ keyAttestationsRequired: [HIGH] }, {}, 'config.keyAttestationsRequired'],
                [{ keyAttestationsRequired: {} }, { keyBinding: false }, 'keyBinding']
            ];
            for (const [config, extra, path] of bad) {
                const res = await save(config, extra);
                expect(res.statusCode, res.payload).to.equal(400);
                expect((res.result as any).details.map((d: { path: string }) => d.path), JSON.stringify(config)).to.equal([path]);
            }
            expect((await t.server.inject({ url: '/api/issuer/credentials/pid-saved', headers: bearer(admin) })).statusCode).to.equal(404);
        });
    });
}
