import * as Jose from 'jose';
import { Holder, type HolderRequest } from '../test/helpers/holder';
import { machine, measureFlow, printMachine, type FlowSpec } from './harness';
import { issueToNewHolder, sdJwtPresenter, startDemoService } from './wallet';

/**
 * The full SD-JWT VC presentation flow, closed loop, 8 concurrent wallets against one server process on SQLite:
 * create request → fetch request object → post the encrypted response → verify (status completed).
 */
export const benchPresentation = async (): Promise<void> => {
    const demo = await startDemoService(3920);
    const { service, call, verifier } = demo;
    try {
        // One PID and one mDL, each for a holder key of its own, issued through the real flow.
        const pid = await issueToNewHolder(demo, 'pid', { given_name: 'Erika', family_name: 'Mustermann' });
        const presentPid = sdJwtPresenter(pid.credential, pid.holderKey);
        const mdl = await issueToNewHolder(demo, 'mdl', { 'org.iso.18013.5.1': { given_name: 'Erika', family_name: 'Mustermann' } });
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
        const sdJwtAnswer = async (request: Record<string, any>): Promise<Record<string, string[]>> => ({ pid: [presentPid(request.nonce, request.client_id)] });
        const mdocAnswer = async (request: Record<string, any>) => {
            const held = { payload: request, nonce: String(request.nonce), clientId: String(request.client_id), responseUri: String(request.response_uri), encryptionJwk: request.client_metadata.jwks.keys[0] } as unknown as HolderRequest;
            return { mdl: [await holder.mdoc(held, 'mdl', mdl.credential, mdl.holderKey)] };
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
        await demo.stop();
    }
};
