import Crypto from 'node:crypto';
import { party, type Party } from '../test/helpers/pki';
import { httpClient } from './load';
import { machine, measureFlow, printMachine } from './harness';
import { DEMO_CONFIG, post, ROOT, startService } from './service';

const WALLETS = Number(process.env.HALLMARK_BENCH_WALLETS ?? 8);
const REDIRECT_URI = 'https://wallet.example/callback';
const { call, close } = httpClient();

const b64 = (v: object | Buffer) => Buffer.from(Buffer.isBuffer(v) ? v : JSON.stringify(v)).toString('base64url');
const publicJwk = (key: Crypto.KeyObject) => {
    const { kty, crv, x, y } = key.export({ format: 'jwk' });
    return { kty, crv, x, y };
};
/** An ES256 JWS with node:crypto: the wallets' cost stays small beside the server's. */
const jws = (header: object, payload: object, key: Crypto.KeyObject) => {
    const input = `${b64({ alg: 'ES256', ...header })}.${b64(payload)}`;
    return `${input}.${b64(Crypto.sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' }))}`;
};
const seconds = () => Math.floor(Date.now() / 1000);
const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();

/** One wallet instance: its attestation (signed by the wallet provider) and the keys it proves possession of. */
const walletInstance = (provider: Party, clientId: string) => {
    const instance = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const attestation = jws(
        { typ: 'oauth-client-attestation+jwt', x5c: [Buffer.from(provider.cert.rawData).toString('base64')] },
        { iss: 'https://wallet-provider.example', sub: clientId, iat: seconds(), exp: seconds() + 3600, cnf: { jwk: publicJwk(instance.publicKey) } },
        provider.privateKey
    );
    const dpop = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    return {
        clientId,
        /** The attestation headers for a request to `issuer` (a fresh PoP each time). */
        attested: (issuer: string) => ({
            'oauth-client-attestation': attestation,
            'oauth-client-attestation-pop': jws({ typ: 'oauth-client-attestation-pop+jwt' }, { iss: clientId, aud: issuer, iat: seconds(), jti: Crypto.randomUUID() }, instance.privateKey)
        }),
        dpopProof: (method: string, url: string, nonce: string, accessToken?: string) => jws(
            { typ: 'dpop+jwt', jwk: publicJwk(dpop.publicKey) },
            { htm: method, htu: url, iat: seconds(), jti: Crypto.randomUUID(), nonce, ...(accessToken ? { ath: Crypto.createHash('sha256').update(accessToken).digest('base64url') } : {}) },
            dpop.privateKey
        )
    };
};

/**
 * The full HAIP authorization code flow, closed loop, 8 concurrent wallets against one server process on SQLite:
 * offer (issuer backend) → PAR with wallet attestation and DPoP → authorize (302 with the code) → token with wallet
 * attestation, PKCE and DPoP → nonce → credential (dc+sd-jwt) with DPoP and a proof. DPoP nonces are taken from the
 * answers' DPoP-Nonce headers as a wallet does, so no request is retried.
 */
export const benchAuthorizationCode = async (): Promise<void> => {
    const service = await startService(3921, DEMO_CONFIG);
    try {
        const admin = await post(`${service.url}/api/oauth2/token`, { grant_type: 'client_credentials', client_id: ROOT.id, client_secret: ROOT.secret });
        const created = await post(`${service.url}/api/clients`, { clientId: 'bench-issuer', roles: ['issuance:offer', 'issuance:config', 'presentation:config'], tenantId: 'demo' }, { authorization: `Bearer ${admin.body.access_token}` });
        const token = (await post(`${service.url}/api/oauth2/token`, { grant_type: 'client_credentials', client_id: 'bench-issuer', client_secret: created.body.clientSecret })).body.access_token;
        const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
        const providerRoot = await party('Bench Wallet Provider Root', null, { ca: true });
        const provider = await party('Bench Wallet Attestation Signer', providerRoot);
        const trust = await call(`${service.url}/api/trust-lists`, 'POST', JSON.stringify({ id: 'bench-wallets', entities: [{ name: 'Bench wallet provider', serviceType: 'wallet-provider', certificates: [providerRoot.cert.toString('pem')] }] }), auth);
        const config = await call(`${service.url}/api/issuer/config`, 'PUT', JSON.stringify({ walletAttestationRequired: true }), auth);
        if (trust.status !== 201 || config.status !== 200) {
            throw new Error(`set-up failed: trust list ${trust.status} ${trust.text}, issuer config ${config.status} ${config.text}`);
        }
        const issuer = `${service.url}/issuers/demo`;
        const offerBody = JSON.stringify({ flow: 'authorization_code', credentialConfigurationIds: ['pid'], credentialClaims: { pid: { type: 'inline', claims: { given_name: 'Erika', family_name: 'Mustermann', birthdate: '1964-08-12' } } }, byReference: false });
        const wallets = Array.from({ length: WALLETS + 1 }, (_, i) => walletInstance(provider, `bench-wallet-${i}`));
        let turn = 0;

        const flow = async () => {
            const wallet = wallets[turn++ % wallets.length]!;
            const offer = await call(`${service.url}/api/issuer/offer`, 'POST', offerBody, auth);
            const credentialOffer = JSON.parse(new URL(offer.json.uri.replace('openid-credential-offer://', 'https://wallet.invalid/')).searchParams.get('credential_offer')!);
            const issuerState = credentialOffer.grants.authorization_code.issuer_state as string;
            let nonce = (await call(`${issuer}/vci/nonce`, 'POST')).headers['dpop-nonce'] as string;
            const verifier = Crypto.randomBytes(32).toString('base64url');
            const par = await call(`${issuer}/authorize/par`, 'POST', form({
                response_type: 'code', client_id: wallet.clientId, redirect_uri: REDIRECT_URI, scope: 'pid', issuer_state: issuerState, state: 's',
                code_challenge: Crypto.createHash('sha256').update(verifier).digest('base64url'), code_challenge_method: 'S256'
            }), { 'content-type': 'application/x-www-form-urlencoded', dpop: wallet.dpopProof('POST', `${issuer}/authorize/par`, nonce), ...wallet.attested(issuer) });
            if (par.status !== 201) {
                throw new Error(`PAR failed: ${par.status} ${par.text}`);
            }
            const authorized = await call(`${issuer}/authorize?${form({ client_id: wallet.clientId, request_uri: par.json.request_uri })}`, 'GET');
            const code = new URL(authorized.headers.location as string).searchParams.get('code')!;
            nonce = (par.headers['dpop-nonce'] as string | undefined) ?? nonce;
            const tokens = await call(`${issuer}/authorize/token`, 'POST', form({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: REDIRECT_URI }),
                { 'content-type': 'application/x-www-form-urlencoded', dpop: wallet.dpopProof('POST', `${issuer}/authorize/token`, nonce), ...wallet.attested(issuer) });
            if (tokens.status !== 200) {
                throw new Error(`token failed: ${tokens.status} ${tokens.text}`);
            }
            nonce = (tokens.headers['dpop-nonce'] as string | undefined) ?? nonce;
            const accessToken = tokens.json.access_token as string;
            const cNonce = (await call(`${issuer}/vci/nonce`, 'POST')).json.c_nonce;
            const holder = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
            const proof = jws({ typ: 'openid4vci-proof+jwt', jwk: publicJwk(holder.publicKey) }, { aud: issuer, nonce: cNonce, iat: seconds() }, holder.privateKey);
            const credential = await call(`${issuer}/vci/credential`, 'POST', JSON.stringify({ credential_configuration_id: 'pid', proofs: { jwt: [proof] } }),
                { authorization: `DPoP ${accessToken}`, dpop: wallet.dpopProof('POST', `${issuer}/vci/credential`, nonce, accessToken), 'content-type': 'application/json' });
            if (credential.status !== 200) {
                throw new Error(`credential failed: ${credential.status} ${credential.text}`);
            }
        };

        const info = await machine();
        printMachine(info);
        // 7 requests. The server signs once (the credential) and verifies eight signatures per flow: the attestation
        // and its PoP at PAR and at token, three DPoP proofs and the key proof (the attestation's x5c chain check is
        // cached).
        await measureFlow(service, {
            name: 'authcode',
            title: 'Authorization code flow with wallet attestation and DPoP (offer, nonce, PAR, authorize, token, nonce, credential; one process, SQLite)',
            run: flow,
            requests: 7,
            signs: 1,
            verifies: 8,
            extra: (r) => [{ measure: 'issue #13 target', value: '>= 300 flows/s', note: `${Math.round(r.rate)} flows/s on this machine` }]
        }, info);
    }
    finally {
        close();
        await service.stop();
    }
};
