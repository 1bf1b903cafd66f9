import Crypto from 'node:crypto';
import { closedLoop, httpClient } from './load';
import { machine, measureFlow, printMachine, type FlowSpec } from './harness';
import { percentile, printTable } from './table';
import { cpuMs, DEMO_CONFIG, post, ROOT, startService, type BenchService } from './service';

const WALLETS = Number(process.env.HALLMARK_BENCH_WALLETS ?? 8);
const DURATION_MS = 10_000;
const { call, close } = httpClient();

const b64 = (v: object | Buffer) => Buffer.from(Buffer.isBuffer(v) ? v : JSON.stringify(v)).toString('base64url');

/** A proof JWT with a fresh holder key, built with node:crypto (the wallet's cost stays small next to the server's). */
const proofJwt = (audience: string, nonce: string) => {
    const { privateKey, publicKey } = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const { kty, crv, x, y } = publicKey.export({ format: 'jwk' });
    const input = `${b64({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: { kty, crv, x, y } })}.${b64({ aud: audience, nonce, iat: Math.floor(Date.now() / 1000) })}`;
    return `${input}.${b64(Crypto.sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' }))}`;
};

/** The demo tenant's issuance flow against a running service: an offer client, a status-managed copy of the PID. */
export const prepareIssuance = async (service: BenchService) => {
    const admin = await post(`${service.url}/api/oauth2/token`, { grant_type: 'client_credentials', client_id: ROOT.id, client_secret: ROOT.secret });
    const created = await post(`${service.url}/api/clients`, { clientId: 'bench-offers', roles: ['issuance:offer', 'issuance:config'], tenantId: 'demo' }, { authorization: `Bearer ${admin.body.access_token}` });
    const token = (await post(`${service.url}/api/oauth2/token`, { grant_type: 'client_credentials', client_id: 'bench-offers', client_secret: created.body.clientSecret })).body.access_token;
    const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const pid = (await call(`${service.url}/api/issuer/credentials/pid`, 'GET', undefined, auth)).json;
    const { createdAt: _c, updatedAt: _u, ...pidSpec } = pid;
    // Two bits: the PATCH loop suspends (1) and reinstates (0), which a revocation (final) would not allow.
    const copy = await call(`${service.url}/api/issuer/credentials`, 'POST', JSON.stringify({ ...pidSpec, id: 'pid-status', status: { enabled: true, bits: 2 } }), auth);
    if (copy.status !== 201) {
        throw new Error(`status-managed configuration not created: ${copy.status} ${JSON.stringify(copy.json)}`);
    }
    const issuer = `${service.url}/issuers/demo`;
    const statusEntries: Array<{ listId: string; idx: number }> = [];

    const flow = (configurationId: string) => async () => {
        const offerBody = JSON.stringify({ credentialConfigurationIds: [configurationId], credentialClaims: { [configurationId]: { type: 'inline', claims: { given_name: 'Erika', family_name: 'Mustermann', birthdate: '1964-08-12' } } } });
        const offer = await call(`${service.url}/api/issuer/offer`, 'POST', offerBody, auth);
        const offerUri = decodeURIComponent(offer.json.uri.split('credential_offer_uri=')[1]);
        const fetched = await call(offerUri, 'GET');
        await call(`${service.url}/.well-known/openid-credential-issuer/issuers/demo`, 'GET');
        const code = fetched.json.grants['urn:ietf:params:oauth:grant-type:pre-authorized_code']['pre-authorized_code'];
        const tokenRes = await call(`${issuer}/authorize/token`, 'POST', `grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Apre-authorized_code&pre-authorized_code=${code}`, { 'content-type': 'application/x-www-form-urlencoded' });
        const nonce = (await call(`${issuer}/vci/nonce`, 'POST')).json.c_nonce;
        const credential = await call(`${issuer}/vci/credential`, 'POST', JSON.stringify({ credential_configuration_id: configurationId, proof: { proof_type: 'jwt', jwt: proofJwt(issuer, nonce) } }), { authorization: `Bearer ${tokenRes.json.access_token}`, 'content-type': 'application/json' });
        if (credential.status !== 200) {
            throw new Error(`credential request failed: ${credential.status} ${JSON.stringify(credential.json)}`);
        }
        const status = JSON.parse(Buffer.from(credential.json.credentials[0].credential.split('.')[1], 'base64url').toString()).status?.status_list;
        if (status) {
            statusEntries.push({ listId: status.uri.split('/').pop(), idx: status.idx });
        }
    };
    // Per flow: 6 requests; the server signs once (the credential) and verifies once (the proof).
    const spec = (name: string, configurationId: string, title: string): FlowSpec => ({ name, title, run: flow(configurationId), requests: 6, signs: 1, verifies: 1, targetRatio: 3 });
    return { auth, issuer, statusEntries, spec };
};

/**
 * The full pre-authorized dc+sd-jwt flow, closed loop, 8 concurrent wallets against one server process on SQLite:
 * create offer → fetch offer → metadata → token → nonce → credential with a fresh proof key. Run twice: for the demo
 * PID, and for a copy with statusManagement (each credential gets a random status list index). Then the status
 * entries those credentials got are changed by PATCH (suspend, reinstate), closed loop.
 */
export const benchIssuance = async (): Promise<void> => {
    const service = await startService(3919, DEMO_CONFIG);
    try {
        const { auth, issuer, statusEntries, spec } = await prepareIssuance(service);
        const info = await machine();
        printMachine(info);
        await measureFlow(service, spec('issuance', 'pid', 'Issuance: pre-authorized dc+sd-jwt flow (offer, fetch, metadata, token, nonce, credential; one process, SQLite)'), info);
        if (process.env.HALLMARK_BENCH_MAIN_ONLY === '1') {
            // A/B comparisons of one change: the main flow only.
            return;
        }
        await measureFlow(service, spec('issuance-status', 'pid-status', 'Issuance with statusManagement (a status list index per credential)'), info);

        const measure = async (run: () => Promise<void>) => {
            const cpuBefore = cpuMs(service.pid);
            const result = await closedLoop(run, WALLETS, DURATION_MS);
            return { ...result, serverCpuMsPerOp: (cpuMs(service.pid) - cpuBefore) / result.latencies.length };
        };

        // PATCH of entries: each wallet takes the next issued entry and suspends or reinstates it.
        let next = 0;
        const patch = async () => {
            const n = next++;
            const entry = statusEntries[n % statusEntries.length]!;
            // Each pass over the entries flips them: suspended on odd passes, reinstated on even ones.
            const value = Math.floor(n / statusEntries.length) % 2 ? 0 : 1;
            const res = await call(`${issuer}/status-management/status-list/${entry.listId}/entry/${entry.idx}`, 'PATCH', JSON.stringify({ value }), auth);
            if (res.status !== 200) {
                throw new Error(`PATCH failed: ${res.status} ${JSON.stringify(res.json)}`);
            }
        };
        const patched = await measure(patch);
        printTable(`Status entries: PATCH …/entry/{index} (one process, SQLite, ${WALLETS} clients, 10 s, ${statusEntries.length} entries)`, [
            { measure: 'PATCH/s', value: Math.round(patched.rate), target: '>= 1000' },
            { measure: 'p99 ms', value: percentile(patched.latencies, 99), target: '' },
            { measure: 'server CPU ms/PATCH', value: patched.serverCpuMsPerOp.toFixed(2), target: '' }
        ]);
    }
    finally {
        close();
        await service.stop();
    }
};
