import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { Openid4vciRetrieveCredentialsError } from '@openid4vc/openid4vci';
import * as Jose from 'jose';
import { decryptEcdhEs } from '../../lib/crypto/ecdh-es';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { freePort } from '../helpers/net';
import { PRE_AUTHORIZED, pidConfig } from '../helpers/pid-config';
import { startTestServer, type TestServer } from '../helpers/server';
import { verifySdJwtVc, Wallet } from '../helpers/wallet';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const METADATA = { alg_values_supported: ['ECDH-ES'], enc_values_supported: ['A128GCM', 'A256GCM'], encryption_required: false };

/** A wallet's response encryption key pair (P-256, for ECDH-ES). */
const encryptionKey = async () => {
    const { privateKey, publicKey } = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    return { privateKey, jwk: publicKey.export({ format: 'jwk' }) as Jose.JWK };
};

for (const dialect of DIALECTS) {
    describe(`credential response encryption (${dialect})`, () => {
        let t: TestServer;
        let admin: string;
        let publicUrl: string;
        const holder = Jose.generateKeyPair('ES256', { extractable: true });

        const proof = async (nonce: string) => {
            const { privateKey, publicKey } = await holder;
            return new Jose.SignJWT({ nonce, aud: `${publicUrl}/issuers/acme` }).setProtectedHeader({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: await Jose.exportJWK(publicKey) }).setIssuedAt().sign(privateKey);
        };

        const offer = async (byReference: boolean) => {
            const res = await t.server.inject({ method: 'POST', url: '/api/issuer/offer', headers: bearer(admin), payload: { credentialConfigurationIds: ['pid'], credentialClaims: { pid: { type: 'inline', claims: { given_name: 'Erika' } } }, byReference } });
            expect(res.statusCode, res.payload).to.equal(201);
            return res.result as { uri: string; session: string };
        };

        /** A token of a fresh offer and a fresh nonce, by hand. */
        const tokenAndNonce = async () => {
            const { uri, session } = await offer(false);
            const offered = JSON.parse(new URL(uri.replace('openid-credential-offer://', 'https://x/')).searchParams.get('credential_offer')!);
            const token = await t.server.inject({ method: 'POST', url: '/issuers/acme/authorize/token', payload: new URLSearchParams({ grant_type: PRE_AUTHORIZED, 'pre-authorized_code': offered.grants[PRE_AUTHORIZED]['pre-authorized_code'] }).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
            expect(token.statusCode, token.payload).to.equal(200);
            const nonce = ((await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/nonce' })).result as any).c_nonce as string;
            return { accessToken: (token.result as any).access_token as string, nonce, session };
        };

        const credentialRequest = (accessToken: string, payload: object) =>
            t.server.inject({ method: 'POST', url: '/issuers/acme/vci/credential', headers: { authorization: `Bearer ${accessToken}` }, payload });

        before(async () => {
            const port = await freePort();
            publicUrl = `http://127.0.0.1:${port}`;
            t = await startTestServer(dialect, { listen: true, env: { PORT: String(port), PUBLIC_URL: publicUrl } });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            await createTenant(t.server, root, 'other');
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            expect((await t.server.inject({ method: 'POST', url: '/api/key-chain', headers: bearer(admin), payload: { id: 'issuer', usageType: 'attestation', subject: { commonName: 'Acme', country: 'DE' } } })).statusCode).to.equal(201);
            const res = await t.server.inject({ method: 'POST', url: '/api/issuer/credentials', headers: bearer(admin), payload: pidConfig() });
            expect(res.statusCode, res.payload).to.equal(201);
        });
        after(() => t.stop());

        it('publishes credential_response_encryption, which the wallet library reads', async () => {
            const metadata = (await t.server.inject('/.well-known/openid-credential-issuer/issuers/acme')).result as any;
            expect(metadata.credential_response_encryption).to.equal(METADATA);
            const wallet = new Wallet();
            const resolved = await wallet.client.resolveIssuerMetadata(`${publicUrl}/issuers/acme`);
            expect(resolved.credentialIssuer.credential_response_encryption).to.equal(METADATA);
        });

        it('answers the wallet library\'s request with a JWE to its key (A256GCM, kid), which jose and node:crypto decrypt', async () => {
            const wallet = new Wallet();
            const { uri } = await offer(true);
            const credentialOffer = await wallet.client.resolveCredentialOffer(uri);
            const issuerMetadata = await wallet.client.resolveIssuerMetadata(credentialOffer.credential_issuer);
            const token = await wallet.client.retrievePreAuthorizedCodeAccessTokenFromOffer({ credentialOffer, issuerMetadata });
            const { c_nonce: nonce } = await wallet.client.requestNonce({ issuerMetadata });
            const key = await wallet.key();
            const [jwt] = await wallet.proofs(issuerMetadata, 'pid', nonce, [key]);
            const { privateKey, jwk } = await encryptionKey();
            // The library (0.4.6) sends the draft shape, alg beside the JWK; 1.0's alg in the JWK goes along too.
            // The library (0.4.6) reads JSON responses only: it throws with the HTTP response of an encrypted one.
            const error = await expect(wallet.client.retrieveCredentials({
                issuerMetadata, credentialConfigurationId: 'pid', accessToken: token.accessTokenResponse.access_token, proofs: { jwt: [jwt!] },
                additionalRequestPayload: { credential_response_encryption: { jwk: { ...jwk, alg: 'ECDH-ES', kid: 'wallet-enc-1', use: 'enc' }, alg: 'ECDH-ES', enc: 'A256GCM' } }
            })).to.reject(Openid4vciRetrieveCredentialsError);
            const result = (error as Openid4vciRetrieveCredentialsError).response;
            expect(result.response.status).to.equal(200);
            expect(result.response.headers.get('content-type')).to.equal('application/jwt');
            expect(result.response.headers.get('cache-control')).to.equal('no-store');
            const jwe = await result.response.text();
            expect(jwe.split('.')).to.have.length(5);

            const decrypted = await Jose.compactDecrypt(jwe, privateKey);
            expect(decrypted.protectedHeader).to.include({ alg: 'ECDH-ES', enc: 'A256GCM', kid: 'wallet-enc-1' });
            expect((decrypted.protectedHeader.epk as Jose.JWK).crv).to.equal('P-256');
            const body = JSON.parse(new TextDecoder().decode(decrypted.plaintext));
            expect(body.credentials).to.have.length(1);
            expect(body.notification_id).to.be.a.string();
            const verified = await verifySdJwtVc(body.credentials[0].credential);
            expect(verified.payload.given_name).to.equal('Erika');
            expect((verified.payload.cnf as any).jwk.x).to.equal(key.publicJwk.x);

            // Independently of jose: the same plaintext through node:crypto's ECDH and AES-GCM.
            const byNode = decryptEcdhEs(jwe, privateKey);
            expect(JSON.parse(byNode.plaintext.toString('utf8'))).to.equal(body);
            // A key other than the wallet's does not open it.
            await expect(Jose.compactDecrypt(jwe, (await encryptionKey()).privateKey)).to.reject();
        });

        it('encrypts with A128GCM to a 1.0 request (alg in the JWK, no kid), and answers JSON without encryption parameters', async () => {
            const { accessToken, nonce } = await tokenAndNonce();
            const { privateKey, jwk } = await encryptionKey();
            const res = await credentialRequest(accessToken, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proof(nonce) }, credential_response_encryption: { jwk: { ...jwk, alg: 'ECDH-ES' }, enc: 'A128GCM' } });
            expect(res.statusCode, res.payload).to.equal(200);
            expect(res.headers['content-type']).to.equal('application/jwt');
            const decrypted = await Jose.compactDecrypt(res.payload, privateKey);
            expect(decrypted.protectedHeader.enc).to.equal('A128GCM');
            expect(decrypted.protectedHeader.kid).to.not.exist();
            expect(JSON.parse(new TextDecoder().decode(decrypted.plaintext)).credentials).to.have.length(1);

            const plain = await tokenAndNonce();
            const json = await credentialRequest(plain.accessToken, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proof(plain.nonce) } });
            expect(json.statusCode, json.payload).to.equal(200);
            expect(json.headers['content-type']).to.equal('application/json; charset=utf-8');
            expect((json.result as any).credentials).to.have.length(1);
        });

        it('refuses unsupported or malformed parameters with invalid_encryption_parameters, before anything is issued or consumed', async () => {
            const { jwk } = await encryptionKey();
            const { jwk: p384 } = { jwk: Crypto.generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey.export({ format: 'jwk' }) };
            const rsa = Crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ format: 'jwk' });
            const { privateKey: ecPrivate } = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
            const withAlg = { ...jwk, alg: 'ECDH-ES' };
            const offCurve = { ...withAlg, y: Buffer.alloc(32, 1).toString('base64url') };
            const cases: Array<[string, unknown]> = [
                ['enc A192GCM', { jwk: withAlg, enc: 'A192GCM' }],
                ['enc A128CBC-HS256', { jwk: withAlg, enc: 'A128CBC-HS256' }],
                ['enc missing', { jwk: withAlg }],
                ['alg RSA-OAEP-256 in the JWK', { jwk: { ...jwk, alg: 'RSA-OAEP-256' }, enc: 'A256GCM' }],
                ['alg ECDH-ES+A256KW beside the JWK', { jwk, alg: 'ECDH-ES+A256KW', enc: 'A256GCM' }],
                ['alg missing', { jwk, enc: 'A256GCM' }],
                ['alg disagreeing', { jwk: withAlg, alg: 'ECDH-ES+A128KW', enc: 'A256GCM' }],
                ['zip', { jwk: withAlg, enc: 'A256GCM', zip: 'DEF' }],
                ['RSA key', { jwk: { ...rsa, alg: 'ECDH-ES' }, enc: 'A256GCM' }],
                ['P-384 key', { jwk: { ...p384, alg: 'ECDH-ES' }, enc: 'A256GCM' }],
                ['point off the curve', { jwk: offCurve, enc: 'A256GCM' }],
                ['private key', { jwk: { ...ecPrivate.export({ format: 'jwk' }), alg: 'ECDH-ES' }, enc: 'A256GCM' }],
                ['signing key', { jwk: { ...withAlg, use: 'sig' }, enc: 'A256GCM' }],
                ['kid not a string', { jwk: { ...withAlg, kid: 7 }, enc: 'A256GCM' }],
                ['x not a string', { jwk: { ...withAlg, x: 5 }, enc: 'A256GCM' }],
                ['jwk a string', { jwk: 'key', enc: 'A256GCM' }],
                ['jwk missing', { enc: 'A256GCM' }],
                ['parameters a string', 'ECDH-ES'],
                ['parameters null', null],
                ['parameters an array', [withAlg]]
            ];
            const { accessToken, nonce, session } = await tokenAndNonce();
            const jwt = await proof(nonce);
            for (const [label, parameters] of cases) {
                const res = await credentialRequest(accessToken, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt }, credential_response_encryption: parameters });
                expect(res.statusCode, `${label}: ${res.payload}`).to.equal(400);
                expect(res.headers['content-type'], label).to.equal('application/json; charset=utf-8');
                expect((res.result as any).error, `${label}: ${res.payload}`).to.equal('invalid_encryption_parameters');
            }
            // Nothing was consumed or issued: the same proof and nonce still get the credential.
            expect(((await t.server.inject({ url: `/api/session/${session}`, headers: bearer(admin) })).result as any).status).to.equal('active');
            const ok = await credentialRequest(accessToken, { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt }, credential_response_encryption: { jwk: withAlg, enc: 'A256GCM' } });
            expect(ok.statusCode, ok.payload).to.equal(200);
            expect(ok.headers['content-type']).to.equal('application/jwt');
        });

        it('publishes a credential_request_encryption key per tenant, public and stable', async () => {
            const metadata = (await t.server.inject('/.well-known/openid-credential-issuer/issuers/acme')).result as any;
            const { jwks, ...rest } = metadata.credential_request_encryption;
            expect(rest).to.equal({ enc_values_supported: ['A128GCM', 'A256GCM'], encryption_required: false });
            expect(jwks.keys).to.have.length(1);
            const [key] = jwks.keys;
            expect(Object.keys(key).sort()).to.equal(['alg', 'crv', 'kid', 'kty', 'use', 'x', 'y']);
            expect(key).to.include({ kty: 'EC', crv: 'P-256', use: 'enc', alg: 'ECDH-ES' });
            expect(key.kid).to.equal(await Jose.calculateJwkThumbprint(key));
            const again = (await t.server.inject('/.well-known/openid-credential-issuer/issuers/acme')).result as any;
            expect(again.credential_request_encryption.jwks.keys[0]).to.equal(key);
            const other = (await t.server.inject('/.well-known/openid-credential-issuer/issuers/other')).result as any;
            expect(other.credential_request_encryption.jwks.keys[0].kid).to.not.equal(key.kid);
            const resolved = await new Wallet().client.resolveIssuerMetadata(`${publicUrl}/issuers/acme`);
            expect((resolved.credentialIssuer as any).credential_request_encryption.jwks.keys[0]).to.equal(key);
        });

        const requestKey = async (tenant = 'acme') => {
            const metadata = (await t.server.inject(`/.well-known/openid-credential-issuer/issuers/${tenant}`)).result as any;
            return metadata.credential_request_encryption.jwks.keys[0] as Jose.JWK;
        };
        const encryptRequest = async (request: unknown, key: Jose.JWK, header: Jose.CompactJWEHeaderParameters) =>
            new Jose.CompactEncrypt(new TextEncoder().encode(typeof request === 'string' ? request : JSON.stringify(request))).setProtectedHeader(header).encrypt(await Jose.importJWK(key, header.alg));
        const sendJwt = (accessToken: string, jwe: string) =>
            t.server.inject({ method: 'POST', url: '/issuers/acme/vci/credential', headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/jwt' }, payload: jwe });

        it('takes a credential request encrypted to that key (A128GCM and A256GCM), with and without response encryption', async () => {
            const key = await requestKey();
            for (const enc of ['A128GCM', 'A256GCM']) {
                const { accessToken, nonce } = await tokenAndNonce();
                const jwe = await encryptRequest({ credential_configuration_id: 'pid', proofs: { jwt: [await proof(nonce)] } }, key, { alg: 'ECDH-ES', enc, kid: key.kid });
                const res = await sendJwt(accessToken, jwe);
                expect(res.statusCode, `${enc}: ${res.payload}`).to.equal(200);
                expect(res.headers['content-type']).to.equal('application/json; charset=utf-8');
                expect(await verifySdJwtVc((res.result as any).credentials[0].credential)).to.exist();
            }
            const { accessToken, nonce } = await tokenAndNonce();
            const wallet = await encryptionKey();
            const jwe = await encryptRequest({ credential_configuration_id: 'pid', proofs: { jwt: [await proof(nonce)] }, credential_response_encryption: { jwk: { ...wallet.jwk, alg: 'ECDH-ES' }, enc: 'A128GCM' } }, key, { alg: 'ECDH-ES', enc: 'A256GCM', kid: key.kid });
            const res = await sendJwt(accessToken, jwe);
            expect(res.statusCode, res.payload).to.equal(200);
            expect(res.headers['content-type']).to.equal('application/jwt');
            const body = JSON.parse(new TextDecoder().decode((await Jose.compactDecrypt(res.payload, wallet.privateKey)).plaintext));
            expect(body.credentials).to.have.length(1);
        });

        it('refuses encrypted requests it cannot read, and malformed plain ones, never 500', async () => {
            const key = await requestKey();
            const otherKey = await requestKey('other');
            const stranger = await encryptionKey();
            const { accessToken, nonce, session } = await tokenAndNonce();
            const request = { credential_configuration_id: 'pid', proofs: { jwt: [await proof(nonce)] } };
            const good = await encryptRequest(request, key, { alg: 'ECDH-ES', enc: 'A256GCM', kid: key.kid });
            const [h, k, iv, c, tag] = good.split('.');
            const flipped = `${c!.slice(0, -2)}${c!.endsWith('A') ? 'B' : 'A'}${c!.slice(-1)}`;
            const cases: Array<[string, Promise<string> | string, string]> = [
                ['ECDH-ES+A128KW', encryptRequest(request, key, { alg: 'ECDH-ES+A128KW', enc: 'A256GCM', kid: key.kid }), 'invalid_encryption_parameters'],
                ['A192GCM', encryptRequest(request, key, { alg: 'ECDH-ES', enc: 'A192GCM', kid: key.kid }), 'invalid_encryption_parameters'],
                ['another tenant\'s key', encryptRequest(request, otherKey, { alg: 'ECDH-ES', enc: 'A256GCM', kid: otherKey.kid }), 'invalid_encryption_parameters'],
                ['a stranger\'s key under our kid', encryptRequest(request, { ...stranger.jwk, alg: 'ECDH-ES' }, { alg: 'ECDH-ES', enc: 'A256GCM', kid: key.kid }), 'invalid_credential_request'],
                ['tampered ciphertext', `${h}.${k}.${iv}.${flipped}.${tag}`, 'invalid_credential_request'],
                ['a JWS, not a JWE', await proof(nonce), 'invalid_credential_request'],
                ['not a JWT', 'hello', 'invalid_credential_request'],
                ['plaintext not JSON', encryptRequest('credential please', key, { alg: 'ECDH-ES', enc: 'A256GCM' }), 'invalid_credential_request'],
                ['plaintext a JSON array', encryptRequest([request], key, { alg: 'ECDH-ES', enc: 'A256GCM' }), 'invalid_credential_request']
            ];
            for (const [label, jwe, error] of cases) {
                const res = await sendJwt(accessToken, await jwe);
                expect(res.statusCode, `${label}: ${res.payload}`).to.equal(400);
                expect((res.result as any).error, `${label}: ${res.payload}`).to.equal(error);
            }
            for (const [label, payload] of [['broken JSON', '{"credential_configuration_id":'], ['JSON null', 'null'], ['JSON string', '"pid"'], ['empty', ''], ['__proto__ member', '{"credential_configuration_id":"pid","__proto__":{"polluted":true}}'], ['nested __proto__', '{"proofs":{"__proto__":{"jwt":["x"]}}}']]) {
                const res = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/credential', headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' }, payload });
                expect(res.statusCode, `${label}: ${res.payload}`).to.equal(400);
                expect((res.result as any).error, label).to.equal('invalid_credential_request');
            }
            // The core's NUL guard sees the decrypted request too.
            const withNul = await sendJwt(accessToken, await encryptRequest({ ...request, credential_configuration_id: 'p\u0000id' }, key, { alg: 'ECDH-ES', enc: 'A256GCM' }));
            expect(withNul.statusCode, withNul.payload).to.equal(400);
            expect(withNul.result).to.equal({ error: 'invalid_request', error_description: 'Invalid request: payload field "credential_configuration_id" must not contain a NUL character' });
            const text = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/credential', headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'text/plain' }, payload: good });
            expect(text.statusCode).to.equal(415);
            // None of it consumed the nonce or issued anything.
            expect(((await t.server.inject({ url: `/api/session/${session}`, headers: bearer(admin) })).result as any).status).to.equal('active');
            expect((await sendJwt(accessToken, good)).statusCode).to.equal(200);
        });

        it('keeps errors of an encrypted request in JSON', async () => {
            const { accessToken } = await tokenAndNonce();
            const { jwk } = await encryptionKey();
            const res = await credentialRequest(accessToken, { credential_configuration_id: 'no-such', proof: { proof_type: 'jwt', jwt: 'x' }, credential_response_encryption: { jwk: { ...jwk, alg: 'ECDH-ES' }, enc: 'A256GCM' } });
            expect(res.statusCode).to.equal(400);
            expect((res.result as any).error).to.equal('unknown_credential_configuration');
        });
    });
}
