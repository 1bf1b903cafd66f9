import Crypto from 'node:crypto';
import Path from 'node:path';
import * as Jose from 'jose';
import { closedLoop, cryptoSpeed, httpClient } from './load';
import { percentile, printTable } from './table';
import { post, ROOT, startService } from './service';

const WALLETS = 8;
const DURATION_MS = 10_000;
const { call, close } = httpClient();

const b64 = (v: object | Buffer | string) => Buffer.from(typeof v === 'object' && !Buffer.isBuffer(v) ? JSON.stringify(v) : v).toString('base64url');

/**
 * The full SD-JWT VC presentation flow, closed loop, 8 concurrent wallets against one server process on SQLite:
 * create request → fetch request object → post the encrypted response → verify (status completed).
 */
export const benchPresentation = async (): Promise<void> => {
    const service = await startService(3920, { CONFIG_FOLDER: Path.join(__dirname, '../../examples/config') });
    try {
        const admin = (await post(`${service.url}/api/oauth2/token`, { grant_type: 'client_credentials', client_id: ROOT.id, client_secret: ROOT.secret })).body.access_token;
        const client = async (clientId: string, roles: string[]) => {
            const created = await post(`${service.url}/api/clients`, { clientId, roles, tenantId: 'demo' }, { authorization: `Bearer ${admin}` });
            return (await post(`${service.url}/api/oauth2/token`, { grant_type: 'client_credentials', client_id: clientId, client_secret: created.body.clientSecret })).body.access_token as string;
        };
        const offerer = await client('bench-offers', ['issuance:offer']);
        const verifier = await client('bench-verifier', ['presentation:request']);

        // One PID for the holder, issued through the real flow.
        const holder = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
        const { kty, crv, x, y } = holder.publicKey.export({ format: 'jwk' });
        const offer = await post(`${service.url}/api/issuer/offer`, { credentialConfigurationIds: ['pid'], credentialClaims: { pid: { type: 'inline', claims: { given_name: 'Erika', family_name: 'Mustermann' } } } }, { authorization: `Bearer ${offerer}` });
        const offerUri = decodeURIComponent(offer.body.uri.split('credential_offer_uri=')[1]);
        const code = JSON.parse((await call(offerUri, 'GET')).text).grants['urn:ietf:params:oauth:grant-type:pre-authorized_code']['pre-authorized_code'];
        const issuer = `${service.url}/issuers/demo`;
        const token = JSON.parse((await call(`${issuer}/authorize/token`, 'POST', `grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Apre-authorized_code&pre-authorized_code=${code}`, { 'content-type': 'application/x-www-form-urlencoded' })).text).access_token;
        const nonce = JSON.parse((await call(`${issuer}/vci/nonce`, 'POST')).text).c_nonce;
        const proofInput = `${b64({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: { kty, crv, x, y } })}.${b64({ aud: issuer, nonce, iat: Math.floor(Date.now() / 1000) })}`;
        const proof = `${proofInput}.${b64(Crypto.sign('sha256', Buffer.from(proofInput), { key: holder.privateKey, dsaEncoding: 'ieee-p1363' }))}`;
        const issued = JSON.parse((await call(`${issuer}/vci/credential`, 'POST', JSON.stringify({ credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: proof } }), { authorization: `Bearer ${token}`, 'content-type': 'application/json' })).text);
        const credential: string = issued.credentials[0].credential;
        // Disclose everything the demo query asks for: the SD-JWT as issued, then a KB-JWT per presentation.
        const presentedPart = credential.endsWith('~') ? credential : `${credential}~`;
        const sdHash = Crypto.createHash('sha256').update(presentedPart).digest('base64url');

        const flow = async () => {
            const created = await call(`${service.url}/api/verifier/offer`, 'POST', JSON.stringify({ requestId: 'identify' }), { authorization: `Bearer ${verifier}`, 'content-type': 'application/json' });
            const link = new URL(JSON.parse(created.text).uri);
            const jar = (await call(link.searchParams.get('request_uri')!, 'GET')).text;
            const request = Jose.decodeJwt(jar) as Record<string, any>;
            const kbInput = `${b64({ alg: 'ES256', typ: 'kb+jwt' })}.${b64({ nonce: request.nonce, aud: request.client_id, iat: Math.floor(Date.now() / 1000), sd_hash: sdHash })}`;
            const kb = `${kbInput}.${b64(Crypto.sign('sha256', Buffer.from(kbInput), { key: holder.privateKey, dsaEncoding: 'ieee-p1363' }))}`;
            const encKey = request.client_metadata.jwks.keys[0];
            const jwe = await new Jose.CompactEncrypt(Buffer.from(JSON.stringify({ vp_token: { pid: [`${presentedPart}${kb}`] }, state: request.state })))
                .setProtectedHeader({ alg: 'ECDH-ES', enc: 'A128GCM', kid: encKey.kid }).encrypt(await Jose.importJWK(encKey, 'ECDH-ES'));
            const answer = await call(request.response_uri, 'POST', `response=${jwe}`, { 'content-type': 'application/x-www-form-urlencoded' });
            if (answer.status !== 200) {
                throw new Error(`presentation failed: ${answer.status} ${answer.text}`);
            }
        };

        const { latencies, rate, clientShare } = await closedLoop(flow, WALLETS, DURATION_MS);
        const speed = cryptoSpeed();
        // Server per flow: sign the request object; ECDH to decrypt; verify the issuer signature, the KB-JWT and the
        // certificate chain's one link.
        const ceiling = 1 / (1 / speed.sign + 3 / speed.verify + 1 / speed.ecdh);
        printTable('Presentation: full SD-JWT VC flow (one process, SQLite, 8 wallets, 10 s)', [
            { measure: 'flows/s', value: Math.round(rate), target: '>= 300' },
            { measure: 'p50 ms', value: percentile(latencies, 50), target: '' },
            { measure: 'p99 ms', value: percentile(latencies, 99), target: '' },
            { measure: 'node ES256 sign/s | verify/s | P-256 ECDH/s', value: `${speed.sign} | ${speed.verify} | ${speed.ecdh}`, target: '' },
            { measure: 'crypto ceiling flows/s (1 sign, 3 verify, 1 ECDH)', value: Math.round(ceiling), target: '' },
            { measure: 'share of the ceiling', value: `${Math.round((rate / ceiling) * 100)}%`, target: '' },
            { measure: 'CPU of the wallets (this process)', value: `${Math.round(clientShare * 100)}% of a core`, target: '' }
        ]);
    }
    finally {
        close();
        await service.stop();
    }
};
