import type Hapi from '@hapi/hapi';
import { expect } from '@hapi/code';
import { issueMdoc } from '../../plugins/oid4vci/formats/mdoc';
import { bearer, clientWithToken, createTenant, rootToken } from './auth';
import type { DialectName } from './databases';
import { newHolderKey, type HolderKey } from './holder';
import { startReceiver, type Receiver } from './net';
import { manifestFor, startTestServer, type TestServer } from './server';

/**
 * The verifier tests' tenant: acme with an admin client, the mdoc issuer key chain `issuer` trusted by the trust list
 * `acme`, the access key chain `verifier`, and an mDL issued by `issuer` to a device key.
 */

export const DOCTYPE = 'org.iso.18013.5.1.mDL';
export const NS = 'org.iso.18013.5.1';
/** The name of the issuer's entity in the trust list `acme`: a verified credential's `trust.matchedIssuer`. */
export const TRUSTED_ISSUER = 'Acme issuer';

export interface ApiAnswer {
    status: number;
    body: any;
    payload: string;
}

export interface TenantAdmin {
    token: string;
    /** A management API call as the tenant's admin. */
    api(method: string, url: string, payload?: object): Promise<ApiAnswer>;
    /** A POST that must answer 201: the created resource. */
    create(url: string, payload: object): Promise<any>;
}

/** Tenant acme and its admin client (tenant:admin). */
export const acmeAdmin = async (server: Hapi.Server): Promise<TenantAdmin> => {
    const root = await rootToken(server);
    await createTenant(server, root, 'acme');
    const { token } = await clientWithToken(server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' });
    const api = async (method: string, url: string, payload?: object): Promise<ApiAnswer> => {
        const res = await server.inject({ method, url, headers: bearer(token), ...(payload ? { payload } : {}) });
        return { status: res.statusCode, body: res.result, payload: res.payload };
    };
    const create = async (url: string, payload: object) => {
        const res = await api('POST', url, payload);
        expect(res.status, res.payload).to.equal(201);
        return res.body;
    };
    return { token, api, create };
};

export interface VerifierTenant extends TenantAdmin {
    t: TestServer;
    /** Where the tests point webhooks. */
    receiver: Receiver;
    /** PEM of the root certificates of the key chains `issuer` and `verifier`. */
    issuerRoot: string;
    accessRoot: string;
    deviceKey: HolderKey;
    /** The mDL (issuerSigned, base64url) with family_name, given_name and age_over_18. */
    mdl: string;
    stop(): Promise<void>;
}

/**
 * A test server with the presentation plugin `plugin` (and the db KMS and tenancy), allowed to call the loopback test
 * servers, holding the verifier tenant.
 */
export const startVerifierTenant = async (dialect: DialectName, plugin: string): Promise<VerifierTenant> => {
    const receiver = await startReceiver();
    let t: TestServer | undefined;
    const stop = async () => {
        await t?.stop();
        await receiver.close();
    };
    try {
        t = await startTestServer(dialect, {
            manifest: manifestFor(plugin, 'hallmark-kms-db', 'hallmark-tenancy'),
            env: { OUTBOUND_URL_ALLOW_HTTP: 'true', OUTBOUND_URL_ALLOW_PRIVATE_NETWORK: 'true' }
        });
        const admin = await acmeAdmin(t.server);
        const issuerRoot = (await admin.create('/api/key-chain', { id: 'issuer', usageType: 'attestation', subject: { commonName: 'Acme issuer', organization: 'Acme', country: 'DE' } })).rootCertificate;
        const accessRoot = (await admin.create('/api/key-chain', { id: 'verifier', usageType: 'access', subject: { commonName: 'Acme verifier' } })).rootCertificate;
        await admin.create('/api/trust-lists', { id: 'acme', entities: [{ name: TRUSTED_ISSUER, serviceType: 'pid-issuance', certificates: [issuerRoot] }] });
        const deviceKey = await newHolderKey();
        const mdl = await issueMdoc(t.server.signing, {
            tenantId: 'acme', keyChainId: 'issuer', docType: DOCTYPE,
            namespaces: { [NS]: { family_name: 'Mustermann', given_name: 'Erika', age_over_18: true } },
            deviceJwk: deviceKey.publicJwk
        });
        return { ...admin, t, receiver, issuerRoot, accessRoot, deviceKey, mdl, stop };
    } catch (err) {
        // A failed setup leaves nothing running: the test's after() has no tenant to stop.
        await stop();
        throw err;
    }
};
