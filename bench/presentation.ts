import Crypto from 'node:crypto';
import Path from 'node:path';
import * as Jose from 'jose';
import { Holder, newHolderKey, type HolderRequest } from '../test/helpers/holder';
import { machine, measureFlow, printMachine, type FlowSpec } from './harness';
import { httpClient } from './load';
import { post, ROOT, startService } from './service';

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
        const holder_ = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
        const { kty, crv, x, y } = holder_.publicKey.export({ format: 'jwk' });
        const offer = await post(`${service.url}/api/issuer/offer`, { credentialConfigurationIds: ['pid'], credentialClaims: { pid: { type: 'inline', claims: { given_name: 'Erika', family_name: 'Mustermann' } } } }, { authorization: `Bearer ${offerer}` });
        const offerUri = decodeURIComponent(offer.body.uri.split('credential_offer_uri=')[1]);
        const code = JSON.parse((await call(offerUri, 'GET')).text).grants['urn:ietf:params:oauth:grant-type:pre-authorized_code']['pre-authorized_code'];
        const issuer = `${service.url}/issuers/demo`;
        const token = JSON.parse((await call(`${issuer}/authorize/token`, 'POST', `grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Apre-authorized_code&pre-authorized_code=${code}`, { 'content-type': 'application/x-www-form-urlencoded' })).text).access_token;
        const nonce = JSON.parse((await call(`${issuer}/vci/nonce`, 'POST')).text).c_nonce;
        const proofInput = `${b64({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: { kty, crv, x, y } })}.${b64({ aud: issuer, nonce, iat: Math.floor(Date.now() / 1000) })}`;
        const proof = `${proofInput}.${b64(Crypto.sign('sha256', Buffer.from(proofInput), { key: holder_.privateKey, dsaEncoding: 'ieee-p1363' }))}`;
        const issued = JSON.parse((await call(`${issuer}/vci/credential`, 'POST', JSON.stringify({ credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: proof } }), { authorization: `Bearer ${token}`, 'content-type': 'application/json' })).text);
        const credential: string = issued.credentials[0].credential;
        // Disclose everything the demo query asks for: the SD-JWT as issued, then a KB-JWT per presentation.
        const presentedPart = credential.endsWith('~') ? credential : `${credential}~`;
        const sdHash = Crypto.createHash('sha256').update(presentedPart).digest('base64url');

        // One mDL for the device key, through the same flow.
        const deviceKey = await newHolderKey();
        const mdlOffer = await post(`${service.url}/api/issuer/offer`, { credentialConfigurationIds: ['mdl'], credentialClaims: { mdl: { type: 'inline', claims: { 'org.iso.18013.5.1': { given_name: 'Erika', family_name: 'Mustermann' } } } } }, { authorization: `Bearer ${offerer}` });
        if (mdlOffer.status !== 201) {
            throw new Error(`mDL offer failed: ${mdlOffer.status} ${JSON.stringify(mdlOffer.body)}`);
        }
        const mdlCode = JSON.parse((await call(decodeURIComponent(mdlOffer.body.uri.split('credential_offer_uri=')[1]), 'GET')).text).grants['urn:ietf:params:oauth:grant-type:pre-authorized_code']['pre-authorized_code'];
        const mdlToken = JSON.parse((await call(`${issuer}/authorize/token`, 'POST', `grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Apre-authorized_code&pre-authorized_code=${mdlCode}`, { 'content-type': 'application/x-www-form-urlencoded' })).text).access_token;
        const mdlNonce = JSON.parse((await call(`${issuer}/vci/nonce`, 'POST')).text).c_nonce;
        const mdlProof = await new Jose.SignJWT({ aud: issuer, nonce: mdlNonce, iat: Math.floor(Date.now() / 1000) })
            .setProtectedHeader({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: deviceKey.publicJwk }).sign(deviceKey.privateKey);
        const mdlIssued = await call(`${issuer}/vci/credential`, 'POST', JSON.stringify({ credential_configuration_id: 'mdl', proofs: { jwt: [mdlProof] } }), { authorization: `Bearer ${mdlToken}`, 'content-type': 'application/json' });
        if (mdlIssued.status !== 200) {
            throw new Error(`mDL issuance failed: ${mdlIssued.status} ${mdlIssued.text}`);
        }
        const mdl: string = mdlIssued.json.credentials[0].credential;
        const holder = new Holder();

        /** request → request object → encrypted response (vp_token from `answer`) → result (the verifier reads the session). */
        const flow = (answer: (request: Record<string, any>) => Promise<Record<string, string[]>>) => async () => {
            const created = await call(`${service.url}/api/verifier/offer`, 'POST', JSON.stringify({ requestId: 'identify' }), { authorization: `Bearer ${verifier}`, 'content-type': 'application/json' });
            const { uri, session } = JSON.parse(created.text);
            const jar = (await call(new URL(uri).searchParams.get('request_uri')!, 'GET')).text;
            const request = Jose.decodeJwt(jar) as Record<string, any>;
            const encKey = request.client_metadata.jwks.keys[0];
            const jwe = await new Jose.CompactEncrypt(Buffer.from(JSON.stringify({ vp_token: await answer(request), state: request.state })))
                .setProtectedHeader({ alg: 'ECDH-ES', enc: 'A128GCM', kid: encKey.kid }).encrypt(await Jose.importJWK(encKey, 'ECDH-ES'));
            const posted = await call(request.response_uri, 'POST', `response=${jwe}`, { 'content-type': 'application/x-www-form-urlencoded' });
            if (posted.status !== 200) {
                throw new Error(`presentation failed: ${posted.status} ${posted.text}`);
            }
            const result = await call(`${service.url}/api/session/${session}`, 'GET', undefined, { authorization: `Bearer ${verifier}` });
            if (result.status !== 200 || result.json.status !== 'completed') {
                throw new Error(`presentation not completed: ${result.status} ${result.text}`);
            }
        };
        const sdJwtAnswer = async (request: Record<string, any>): Promise<Record<string, string[]>> => {
            const kbInput = `${b64({ alg: 'ES256', typ: 'kb+jwt' })}.${b64({ nonce: request.nonce, aud: request.client_id, iat: Math.floor(Date.now() / 1000), sd_hash: sdHash })}`;
            const kb = `${kbInput}.${b64(Crypto.sign('sha256', Buffer.from(kbInput), { key: holder_.privateKey, dsaEncoding: 'ieee-p1363' }))}`;
            return { pid: [`${presentedPart}${kb}`] };
        };
        const mdocAnswer = async (request: Record<string, any>) => {
            const held = { payload: request, nonce: String(request.nonce), clientId: String(request.client_id), responseUri: String(request.response_uri), encryptionJwk: request.client_metadata.jwks.keys[0] } as unknown as HolderRequest;
            return { mdl: [await holder.mdoc(held, 'mdl', mdl, deviceKey)] };
        };

        const info = await machine();
        printMachine(info);
        // Per flow: 4 requests; the server signs the request object, decrypts the response (one ECDH) and verifies the
        // issuer signature, the holder's (KB-JWT or mdoc device signature) and the certificate chain's one link.
        const spec = (name: string, title: string, answer: (request: Record<string, any>) => Promise<Record<string, string[]>>): FlowSpec => ({ name, title, run: flow(answer), requests: 4, signs: 1, verifies: 3, ecdh: 1, targetRatio: 4 });
        await measureFlow(service, spec('presentation-sd-jwt', 'Presentation: SD-JWT VC with KB-JWT (request, request object, encrypted response, result; one process, SQLite)', sdJwtAnswer), info);
        await measureFlow(service, spec('presentation-mdoc', 'Presentation: mdoc (mDL) DeviceResponse (request, request object, encrypted response, result; one process, SQLite)', mdocAnswer), info);
    }
    finally {
        close();
        await service.stop();
    }
};
