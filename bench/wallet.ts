import Crypto from 'node:crypto';
import * as Jose from 'jose';
import { newHolderKey, type HolderKey } from '../test/helpers/holder';
import { httpClient, type Answer } from './load';
import { DEMO_CONFIG, post, ROOT, startService, type BenchService } from './service';

/** The presentation benchmarks' side of the demo tenant: what a wallet and a relying party do before the measured loop. */

type Call = (url: string, method: string, body?: string, headers?: Record<string, string>) => Promise<Answer>;

export interface DemoService {
    service: BenchService;
    call: Call;
    /** Tokens of the demo tenant's clients that offer credentials (issuance:offer) and request presentations. */
    offerer: string;
    verifier: string;
    stop(): Promise<void>;
}

/** The service with the demo configuration (examples/config) on `port`, a keep-alive client, and the two clients. */
export const startDemoService = async (port: number): Promise<DemoService> => {
    const service = await startService(port, DEMO_CONFIG);
    const { call, close } = httpClient();
    const stop = async () => {
        close();
        await service.stop();
    };
    try {
        const admin = (await post(`${service.url}/api/oauth2/token`, { grant_type: 'client_credentials', client_id: ROOT.id, client_secret: ROOT.secret })).body.access_token;
        const client = async (clientId: string, roles: string[]) => {
            const created = await post(`${service.url}/api/clients`, { clientId, roles, tenantId: 'demo' }, { authorization: `Bearer ${admin}` });
            return (await post(`${service.url}/api/oauth2/token`, { grant_type: 'client_credentials', client_id: clientId, client_secret: created.body.clientSecret })).body.access_token as string;
        };
        const offerer = await client('bench-offers', ['issuance:offer']);
        const verifier = await client('bench-verifier', ['presentation:request']);
        return { service, call, offerer, verifier, stop };
    } catch (err) {
        await stop();
        throw err;
    }
};

/**
 * The wallet's issuance: one credential of `configurationId` with `claims`, offered by the demo tenant and fetched
 * through the pre-authorized code flow with a JWT proof of a fresh holder key.
 */
export const issueToNewHolder = async ({ service, call, offerer }: DemoService, configurationId: string, claims: object): Promise<{ credential: string; holderKey: HolderKey }> => {
    const offer = await post(`${service.url}/api/issuer/offer`, { credentialConfigurationIds: [configurationId], credentialClaims: { [configurationId]: { type: 'inline', claims } } }, { authorization: `Bearer ${offerer}` });
    if (offer.status !== 201) {
        throw new Error(`${configurationId} offer failed: ${offer.status} ${JSON.stringify(offer.body)}`);
    }
    const offerUri = decodeURIComponent(offer.body.uri.split('credential_offer_uri=')[1]);
    const code = JSON.parse((await call(offerUri, 'GET')).text).grants['urn:ietf:params:oauth:grant-type:pre-authorized_code']['pre-authorized_code'];
    const issuer = `${service.url}/issuers/demo`;
    const token = JSON.parse((await call(`${issuer}/authorize/token`, 'POST', `grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Apre-authorized_code&pre-authorized_code=${code}`, { 'content-type': 'application/x-www-form-urlencoded' })).text).access_token;
    const nonce = JSON.parse((await call(`${issuer}/vci/nonce`, 'POST')).text).c_nonce;
    const holderKey = await newHolderKey();
    const proof = await new Jose.SignJWT({ aud: issuer, nonce, iat: Math.floor(Date.now() / 1000) })
        .setProtectedHeader({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: holderKey.publicJwk }).sign(holderKey.privateKey);
    const issued = await call(`${issuer}/vci/credential`, 'POST', JSON.stringify({ credential_configuration_id: configurationId, proofs: { jwt: [proof] } }), { authorization: `Bearer ${token}`, 'content-type': 'application/json' });
    if (issued.status !== 200) {
        throw new Error(`${configurationId} issuance failed: ${issued.status} ${issued.text}`);
    }
    return { credential: issued.json.credentials[0].credential, holderKey };
};

const b64 = (v: object | Buffer | string) => Buffer.from(typeof v === 'object' && !Buffer.isBuffer(v) ? JSON.stringify(v) : v).toString('base64url');

/**
 * The wallet's SD-JWT VC presentation: every disclosure as issued, then a KB-JWT for the request's `nonce` and `aud`
 * signed with node:crypto (the loop's client cost stays small beside the service's).
 */
export const sdJwtPresenter = (credential: string, holderKey: HolderKey) => {
    const presentedPart = credential.endsWith('~') ? credential : `${credential}~`;
    const sdHash = Crypto.createHash('sha256').update(presentedPart).digest('base64url');
    const key = Crypto.createPrivateKey({ key: holderKey.privateJwk as Crypto.JsonWebKey, format: 'jwk' });
    return (nonce: string, aud: string): string => {
        const kbInput = `${b64({ alg: 'ES256', typ: 'kb+jwt' })}.${b64({ nonce, aud, iat: Math.floor(Date.now() / 1000), sd_hash: sdHash })}`;
        return `${presentedPart}${kbInput}.${b64(Crypto.sign('sha256', Buffer.from(kbInput), { key, dsaEncoding: 'ieee-p1363' }))}`;
    };
};
