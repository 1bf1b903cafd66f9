import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { bearer, clientWithToken, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { Holder } from '../helpers/holder';
import { startTestServer, type TestServer } from '../helpers/server';
import { Wallet } from '../helpers/wallet';
import { freePort } from '../helpers/net';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

/** The demo tenant of examples/config: its credentials issue, and its presentation configuration accepts them. */
for (const dialect of DIALECTS) {
    describe(`demo configuration round trip (${dialect})`, () => {
        let t: TestServer;
        let offerer: string;
        let verifier: string;
        before(async () => {
            const port = await freePort();
            t = await startTestServer(dialect, { listen: true, env: { PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}`, CONFIG_FOLDER: Path.join(__dirname, '../../examples/config') } });
            const root = await rootToken(t.server);
            offerer = (await clientWithToken(t.server, root, { clientId: 'demo-offers', roles: ['issuance:offer'], tenantId: 'demo' })).token;
            verifier = (await clientWithToken(t.server, root, { clientId: 'demo-verifier', roles: ['presentation:request'], tenantId: 'demo' })).token;
        });
        after(() => t.stop());

        const offer = async (configurationId: string, claims: object) => {
            const res = await t.server.inject({ method: 'POST', url: '/api/issuer/offer', headers: bearer(offerer), payload: { credentialConfigurationIds: [configurationId], credentialClaims: { [configurationId]: { type: 'inline', claims } } } });
            expect(res.statusCode, res.payload).to.equal(201);
            return (res.result as { uri: string }).uri;
        };
        const request = async () => {
            const res = await t.server.inject({ method: 'POST', url: '/api/verifier/offer', headers: bearer(verifier), payload: { requestId: 'identify' } });
            expect(res.statusCode, res.payload).to.equal(201);
            return res.result as { uri: string; session: string };
        };

        it('issues the demo PID and presents it to the demo verifier', async () => {
            const wallet = new Wallet();
            const received = await wallet.receive(await offer('pid', { given_name: 'Erika', family_name: 'Mustermann', birthdate: '1964-08-12' }), { configurationId: 'pid' });
            const { uri, session } = await request();
            const holder = new Holder();
            const resolved = await holder.resolve(uri);
            const vpToken = await holder.vpToken(resolved, { pid: { format: 'dc+sd-jwt', credential: received.credentials[0]!, key: received.holderKeys[0]! } });
            const answer = await holder.respond(resolved, vpToken);
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            const result = (await t.server.inject({ url: `/api/session/${session}`, headers: bearer(verifier) })).result as any;
            expect(result.status).to.equal('completed');
            expect(result.credentials[0].values[0]).to.include({ given_name: 'Erika', family_name: 'Mustermann' });
        });

        it('issues the demo mDL and presents it to the demo verifier', async () => {
            const wallet = new Wallet();
            const received = await wallet.receive(await offer('mdl', { 'org.iso.18013.5.1': { family_name: 'Mustermann', given_name: 'Erika', age_over_18: true } }), { configurationId: 'mdl' });
            const { uri, session } = await request();
            const holder = new Holder();
            const resolved = await holder.resolve(uri);
            const vpToken = await holder.vpToken(resolved, { mdl: { format: 'mso_mdoc', issuerSigned: received.credentials[0]!, key: received.holderKeys[0]! } });
            const answer = await holder.respond(resolved, vpToken);
            expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
            const result = (await t.server.inject({ url: `/api/session/${session}`, headers: bearer(verifier) })).result as any;
            expect(result.status).to.equal('completed');
            expect(result.credentials[0].values[0]['org.iso.18013.5.1']).to.include({ given_name: 'Erika', family_name: 'Mustermann' });
        });
    });
}
