import Crypto from 'node:crypto';
import type Hapi from '@hapi/hapi';
import { expect } from '@hapi/code';
import * as Jose from 'jose';
import { bearer } from './auth';
import { ISSUER, PRE_AUTHORIZED, pidConfig } from './pid-config';
import { verifySdJwtVc } from './wallet';

/**
 * Issues an SD-JWT VC of tenant `acme` end to end (credential configuration, offer, pre-authorized token, nonce, proof,
 * credential) signed by the key chain `keyChainId`, and verifies it independently: the signature with the x5c leaf,
 * which must be the key chain's own certificate. `token` needs tenant:admin (or the issuance roles).
 */
export const issueSdJwtWithKeyChain = async (server: Hapi.Server, token: string, keyChainId: string): Promise<Record<string, unknown>> => {
    const configurationId = `pid-${keyChainId}`;
    const config = await server.inject({ method: 'POST', url: '/api/issuer/credentials', headers: bearer(token), payload: { ...pidConfig(), id: configurationId, keyChainId } });
    expect(config.statusCode, config.payload).to.equal(201);
    const offer = await server.inject({ method: 'POST', url: '/api/issuer/offer', headers: bearer(token), payload: { credentialConfigurationIds: [configurationId], credentialClaims: { [configurationId]: { type: 'inline', claims: { given_name: 'Erika', family_name: 'Mustermann' } } }, byReference: false } });
    expect(offer.statusCode, offer.payload).to.equal(201);
    const offered = JSON.parse(new URL((offer.result as { uri: string }).uri.replace('openid-credential-offer://', 'https://x/')).searchParams.get('credential_offer')!);
    const tokenRes = await server.inject({ method: 'POST', url: '/issuers/acme/authorize/token', headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ grant_type: PRE_AUTHORIZED, 'pre-authorized_code': offered.grants[PRE_AUTHORIZED]['pre-authorized_code'] }).toString() });
    expect(tokenRes.statusCode, tokenRes.payload).to.equal(200);
    const nonce = ((await server.inject({ method: 'POST', url: '/issuers/acme/vci/nonce' })).result as { c_nonce: string }).c_nonce;
    const holder = await Jose.generateKeyPair('ES256', { extractable: true });
    const proof = await new Jose.SignJWT({ nonce, aud: ISSUER }).setProtectedHeader({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: await Jose.exportJWK(holder.publicKey) }).setIssuedAt().sign(holder.privateKey);
    const credential = await server.inject({ method: 'POST', url: '/issuers/acme/vci/credential', headers: { authorization: `Bearer ${(tokenRes.result as { access_token: string }).access_token}` },
        payload: { credential_configuration_id: configurationId, proof: { proof_type: 'jwt', jwt: proof } } });
    expect(credential.statusCode, credential.payload).to.equal(200);
    const issued = (credential.result as { credentials: Array<{ credential: string }> }).credentials[0]!.credential;
    const verified = await verifySdJwtVc(issued);
    expect(verified.payload.given_name).to.equal('Erika');
    const chain = (await server.inject({ url: `/api/key-chain/${keyChainId}`, headers: bearer(token) })).result as { certificateChain: string[]; publicJwk: Jose.JWK };
    const leaf = new Crypto.X509Certificate(chain.certificateChain[0]!);
    expect(verified.x5c[0]).to.equal(leaf.raw.toString('base64'));
    const { x, y } = leaf.publicKey.export({ format: 'jwk' });
    expect({ x, y }).to.equal({ x: chain.publicJwk.x, y: chain.publicJwk.y });
    return verified.payload;
};
