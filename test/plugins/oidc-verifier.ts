import Http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as Lab from '@hapi/lab';
import { expect } from '@hapi/code';
import * as Jose from 'jose';
import Pino from 'pino';
import { OidcVerifier } from '../../plugins/oauth2/oidc/verifier';
import { InvalidTokenError } from '../../plugins/oauth2/verifier';
import { AUDIENCE, Idp, loadProvider, signingKey, type SigningKey } from '../fixtures/oidc-idp';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const log = Pino({ level: 'silent' });
const closedPort = async (): Promise<number> => {
    const server = Http.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    return port;
};

const rejection = async (verifier: OidcVerifier, token: string): Promise<string> => {
    const err = await expect(verifier.verify(token)).to.reject(InvalidTokenError);
    return err.message;
};

describe('OidcVerifier against oidc-provider', () => {
    let k1: SigningKey;
    let idp: Idp;
    const verifier = (options: Partial<ConstructorParameters<typeof OidcVerifier>[0]> = {}) =>
        new OidcVerifier({ issuer: idp.issuer, tenantClaim: 'tenant_id', log, ...options });

    /** A token of our own, signed with the provider's key: for claims the provider would not issue. */
    const selfSigned = (claims: Jose.JWTPayload, key: SigningKey = k1, exp: number | string = '5m') =>
        new Jose.SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid: key.kid, typ: 'at+jwt' })
            .setIssuer(idp.issuer).setAudience(AUDIENCE).setIssuedAt().setExpirationTime(exp).sign(key.privateKey);

    before(async () => {
        loadProvider();
        k1 = await signingKey('k1');
        idp = await Idp.start([k1]);
    });
    after(() => idp.stop());

    describe('claims', () => {
        it('maps client, tenant and roles of a provider token', async () => {
            const token = await idp.token('tenant-client');
            expect(Jose.decodeJwt(token)).to.include({ client_id: 'tenant-client', aud: AUDIENCE, iss: idp.issuer });
            const v = verifier();
            await v.init();
            expect(await v.verify(token)).to.equal({ clientId: 'tenant-client', tenantId: 'acme', roles: ['issuance:offer', 'key:read'] });
            expect(await v.verify(await idp.token('root-client'))).to.equal({ clientId: 'root-client', tenantId: undefined, roles: ['tenant:manage'] });
        });

        it('reads realm_access.roles and a custom tenant claim', async () => {
            const token = await idp.token('keycloak-style');
            expect(await verifier({ tenantClaim: 'org' }).verify(token))
                .to.equal({ clientId: 'keycloak-style', tenantId: 'globex', roles: ['presentation:request', 'offline_access'] });
            // Under the default claim name this client has no tenant.
            expect((await verifier().verify(token)).tenantId).to.be.undefined();
        });

        it('names the client by client_id, then azp, then sub', async () => {
            const v = verifier({ tenantClaim: 'org.id' });
            expect((await v.verify(await selfSigned({ client_id: 'a', azp: 'b', sub: 'c' }))).clientId).to.equal('a');
            // Keycloak's shape: sub is the service account user, azp the client.
            const keycloak = await v.verify(await selfSigned({ azp: 'b', sub: '0b7c5c1e-uuid', org: { id: 'nested' }, realm_access: { roles: ['key:read'] } }));
            expect(keycloak).to.equal({ clientId: 'b', tenantId: 'nested', roles: ['key:read'] });
            expect(await v.verify(await selfSigned({ sub: 'c', roles: 'not-a-list' }))).to.equal({ clientId: 'c', tenantId: undefined, roles: [] });
            expect(await rejection(v, await selfSigned({ roles: ['key:read'] }))).to.equal('The token names no client');
            expect((await v.verify(await selfSigned({ typ: 'Bearer', azp: 'b' }))).clientId).to.equal('b');
            expect(await rejection(v, await selfSigned({ typ: 'ID', azp: 'b' }))).to.equal('The token is not an access token');
        });
    });

    describe('rejections', () => {
        it('checks the audience when one is configured', async () => {
            const token = await idp.token('tenant-client');
            expect((await verifier({ audience: AUDIENCE }).verify(token)).clientId).to.equal('tenant-client');
            expect(await rejection(verifier({ audience: 'other-api' }), token)).to.equal('The token was not issued for this service');
        });

        it('refuses a token of another issuer, even one signed with the same key', async () => {
            const other = await Idp.start([k1]);
            try {
                const token = await other.token('tenant-client');
                expect(Jose.decodeProtectedHeader(token).kid).to.equal('k1');
                expect(await rejection(verifier(), token)).to.equal('The token was not issued for this service');
            }
            finally {
                await other.stop();
            }
        });

        it('refuses an expired token and one without expiry', async () => {
            const v = verifier();
            expect(await rejection(v, await selfSigned({ client_id: 'tenant-client' }, k1, Math.floor(Date.now() / 1000) - 60))).to.equal('The token has expired');
            const endless = await new Jose.SignJWT({ client_id: 'tenant-client' }).setProtectedHeader({ alg: 'ES256', kid: 'k1' })
                .setIssuer(idp.issuer).setAudience(AUDIENCE).sign(k1.privateKey);
            expect(await rejection(v, endless)).to.equal('The token is not valid');
        });

        it('refuses unsigned and symmetrically signed tokens', async () => {
            const v = verifier();
            const claims = { ...Jose.decodeJwt(await idp.token('root-client')) };
            const none = `${Jose.base64url.encode(JSON.stringify({ alg: 'none', typ: 'at+jwt' }))}.${Jose.base64url.encode(JSON.stringify(claims))}.`;
            expect(await rejection(v, none)).to.equal('The token is not valid');
            // Key confusion: the public JWK as an HMAC secret.
            const { d: _d, ...publicJwk } = k1.jwk;
            const hs = await new Jose.SignJWT(claims).setProtectedHeader({ alg: 'HS256', kid: 'k1' }).sign(new TextEncoder().encode(JSON.stringify(publicJwk)));
            expect(await rejection(v, hs)).to.equal('The token is not valid');
            expect(await rejection(v, 'not-a-jwt')).to.equal('The token is not valid');
        });

        it('refuses a token signed with a key the provider does not publish', async () => {
            const v = verifier();
            const impostor = await signingKey('k1');
            expect(await rejection(v, await selfSigned({ client_id: 'root-client', roles: ['tenant:manage'] }, impostor))).to.equal('The token was not signed by the provider');
            const unknown = await signingKey('unknown-kid');
            expect(await rejection(v, await selfSigned({ client_id: 'root-client', roles: ['tenant:manage'] }, unknown))).to.equal('The token was not signed by the provider');
        });

        it('does not refetch the keys for every unknown key id', async () => {
            const v = verifier({ jwksCooldownMs: 60_000 });
            await v.verify(await idp.token('root-client'));
            const fetched = idp.count('/jwks');
            for (let i = 0; i < 5; ++i) {
                const random = await signingKey(`random-${i}`);
                await rejection(v, await selfSigned({ client_id: 'root-client' }, random));
            }
            expect(idp.count('/jwks')).to.equal(fetched);
        });
    });

    describe('key rollover', () => {
        it('accepts tokens of a new provider key without restarting the verifier', async () => {
            const k2 = await signingKey('k2');
            const k3 = await signingKey('k3');
            const rolling = await Idp.start([k1]);
            try {
                const v = new OidcVerifier({ issuer: rolling.issuer, tenantClaim: 'tenant_id', log, jwksCooldownMs: 50 });
                const old = await rolling.token('tenant-client');
                expect((await v.verify(old)).clientId).to.equal('tenant-client');
                expect(rolling.count('/jwks')).to.equal(1);

                // The provider now signs with k2 and still publishes k1 for the tokens already out.
                rolling.rotate([k2, k1]);
                await new Promise((resolve) => setTimeout(resolve, 60));
                const fresh = await rolling.token('tenant-client');
                expect(Jose.decodeProtectedHeader(fresh).kid).to.equal('k2');
                expect(await v.verify(fresh)).to.equal({ clientId: 'tenant-client', tenantId: 'acme', roles: ['issuance:offer', 'key:read'] });
                expect(await v.verify(old)).to.include({ clientId: 'tenant-client' });
                expect(rolling.count('/jwks')).to.equal(2);
                // Cached: no further fetch for known keys.
                await v.verify(fresh);
                expect(rolling.count('/jwks')).to.equal(2);

                // k1 withdrawn: once the keys are refetched, its tokens stop verifying.
                rolling.rotate([k3, k2]);
                await new Promise((resolve) => setTimeout(resolve, 60));
                expect((await v.verify(await rolling.token('root-client'))).clientId).to.equal('root-client');
                expect(await rejection(v, old)).to.equal('The token was not signed by the provider');
                expect(rolling.count('/.well-known/openid-configuration')).to.equal(1);
            }
            finally {
                await rolling.stop();
            }
        });
    });

    describe('discovery', () => {
        it('fails with a message naming the URL when the provider is unreachable, and refuses tokens', async () => {
            const port = await closedPort();
            const v = new OidcVerifier({ issuer: `http://127.0.0.1:${port}`, tenantClaim: 'tenant_id', log, fetchTimeoutMs: 2000 });
            const err = await expect(v.init()).to.reject(Error);
            expect(err.message).to.contain(`http://127.0.0.1:${port}/.well-known/openid-configuration`);
            expect(err.message).to.contain('ECONNREFUSED');
            expect(await rejection(v, await idp.token('root-client'))).to.equal('The token could not be verified');
        });

        it('retries discovery on the next verify when the provider was not up yet', async () => {
            const port = await closedPort();
            const v = new OidcVerifier({ issuer: `http://127.0.0.1:${port}`, tenantClaim: 'tenant_id', log });
            expect(await rejection(v, 'eyJhbGciOiJFUzI1NiJ9.e30.sig')).to.equal('The token could not be verified');
            const late = await Idp.start([k1], { port });
            try {
                expect((await v.verify(await late.token('root-client'))).clientId).to.equal('root-client');
            }
            finally {
                await late.stop();
            }
        });

        it('runs one discovery for concurrent first requests', async () => {
            const before = idp.count('/.well-known/openid-configuration');
            const v = verifier();
            const token = await idp.token('root-client');
            await Promise.all([v.verify(token), v.verify(token), v.verify(token), v.init()]);
            expect(idp.count('/.well-known/openid-configuration')).to.equal(before + 1);
        });

        it('refuses a provider that names another issuer', async () => {
            const v = new OidcVerifier({ issuer: 'http://idp.hallmark.test', internalIssuer: idp.origin, tenantClaim: 'tenant_id', log });
            const err = await expect(v.init()).to.reject(Error);
            expect(err.message).to.contain(`${idp.origin}/.well-known/openid-configuration`);
            expect(err.message).to.contain(`names issuer "${idp.issuer}", expected "http://idp.hallmark.test"`);
        });

        it('reaches the provider at the internal issuer URL while checking the public issuer', async () => {
            const named = await Idp.start([k1], { publicName: 'hallmark-idp.test' });
            try {
                const metadata = await (await fetch(`${named.origin}/.well-known/openid-configuration`)).json() as { issuer: string; jwks_uri: string };
                expect(metadata.issuer).to.equal(named.issuer);
                expect(metadata.jwks_uri).to.equal(`${named.issuer}/jwks`);

                const token = await named.token('tenant-client');
                expect(Jose.decodeJwt(token).iss).to.equal(`http://hallmark-idp.test:${named.port}`);
                const v = new OidcVerifier({ issuer: named.issuer, internalIssuer: `${named.origin}/`, tenantClaim: 'tenant_id', audience: AUDIENCE, log });
                expect(await v.verify(token)).to.equal({ clientId: 'tenant-client', tenantId: 'acme', roles: ['issuance:offer', 'key:read'] });
                expect(named.count('/jwks')).to.equal(1);
                // A token of the same provider under its internal name is not one of the public issuer.
                expect(await rejection(v, await idp.token('tenant-client'))).to.equal('The token was not issued for this service');
            }
            finally {
                await named.stop();
            }
        });

        it('moves a jwks_uri outside the issuer path to the internal origin', async () => {
            const mounted = await Idp.start([k1], { publicName: 'hallmark-idp.test', basePath: '/realms/x' });
            try {
                const metadata = await (await fetch(`${mounted.origin}/realms/x/.well-known/openid-configuration`)).json() as { issuer: string; jwks_uri: string };
                expect(metadata.issuer).to.equal(`http://hallmark-idp.test:${mounted.port}/realms/x`);
                expect(metadata.jwks_uri).to.equal(`http://hallmark-idp.test:${mounted.port}/jwks`);

                const v = new OidcVerifier({ issuer: mounted.issuer, internalIssuer: `${mounted.origin}/realms/x`, tenantClaim: 'tenant_id', log });
                expect((await v.verify(await mounted.token('root-client'))).roles).to.equal(['tenant:manage']);
                expect(mounted.count('/jwks')).to.equal(1);
            }
            finally {
                await mounted.stop();
            }
        });
    });
});
