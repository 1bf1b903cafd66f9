import Crypto from 'node:crypto';
import Pino from 'pino';
import { createServer } from '../lib/compose';
import { loadConfig } from '../manifests/environment';
import { manifest } from '../manifests/default';
import { AwsKmsServer } from '../test/fixtures/aws-kms-server';
import { CscServer } from '../test/fixtures/csc-server';
import { KmsServer } from '../test/fixtures/kms-server';
import { VaultServer } from '../test/fixtures/vault-server';
import { createSoftHsmToken } from '../test/helpers/softhsm';
import { printTable } from './table';
import { tenantKind } from '../resources/tenant';
import { kmsConfigKind } from '../resources/kms-config';
import { keyChainKind } from '../resources/key-chain';

const DURATION_MS = 2000;

/** Key chain (and provider) id -> what the table calls it. */
const LABELS: Record<string, string> = {
    db: 'db',
    remote: 'http (loopback)',
    hsm: 'pkcs11 (SoftHSM2)',
    vault: 'vault (Transit test server, loopback)',
    aws: 'cloud-kms (AWS KMS test server, loopback)',
    qtsp: 'csc (CSC v2 test server, loopback)'
};

/** Signatures per second of one signer in a closed loop with `concurrency` callers. */
const rate = async (sign: () => Promise<unknown> | unknown, concurrency: number): Promise<number> => {
    const until = Date.now() + DURATION_MS;
    let count = 0;
    await Promise.all(Array.from({ length: concurrency }, async () => {
        while (Date.now() < until) {
            await sign();
            count++;
        }
    }));
    return count / (DURATION_MS / 1000);
};

/**
 * ES256 signatures per second through the signing service (key chain material cached, KMS deadline included), for
 * each provider, next to raw node:crypto in the same run. In-process; the http, vault, cloud-kms and csc providers
 * talk to their test servers (test/fixtures) over loopback, pkcs11 to a SoftHSM2 token. The csc test server signs
 * digests with BigInt curve arithmetic, so its rate measures the fixture more than the provider.
 */
export const benchKms = async (): Promise<void> => {
    const data = Crypto.randomBytes(200);
    const folder = require('node:fs').mkdtempSync(require('node:path').join(require('node:os').tmpdir(), 'hallmark-bench-kms-'));
    const hsm = createSoftHsmToken();
    const kmsServer = await KmsServer.start();
    const vault = await VaultServer.start();
    const aws = await AwsKmsServer.start('eu-central-1', 'AKIAHALLMARKBENCH001', 'bench-secret-access-key-0123456789');
    const csc = await CscServer.start('bench', 'bench-csc-client-secret');
    const seal = await csc.addCredential('seal');
    // The SDK's own endpoint setting sends the cloud-kms provider to the test server.
    const previousEndpoint = process.env.AWS_ENDPOINT_URL_KMS;
    process.env.AWS_ENDPOINT_URL_KMS = aws.origin;
    process.env.AWS_EC2_METADATA_DISABLED = 'true';
    const config = loadConfig({ PUBLIC_URL: 'http://127.0.0.1', FOLDER: folder, MASTER_SECRET: 'm'.repeat(40), AUTH_CLIENT_ID: 'root', AUTH_CLIENT_SECRET: 'bench-root-secret-0123', WORKER: 'off', LOG_LEVEL: 'error',
        // The tenant's providers are on loopback: the outbound policy would refuse them.
        OUTBOUND_URL_ALLOW_HTTP: 'true', OUTBOUND_URL_ALLOW_PRIVATE_NETWORK: 'true' });
    const server = await createServer(manifest(config), { logger: Pino({ level: 'silent' }) });
    await server.initialize();
    try {
        const ctx = { clientId: 'bench', roles: [] };
        await server.registry.write(ctx, tenantKind, { id: 'bench', name: 'Bench' });
        const tenant = { ...ctx, tenantId: 'bench' };
        await server.registry.write(tenant, kmsConfigKind, {
            providers: [
                { id: 'remote', type: 'http', baseUrl: kmsServer.origin },
                { id: 'hsm', type: 'pkcs11', library: hsm.library, slot: hsm.label, pin: hsm.pin },
                { id: 'vault', type: 'vault', vaultUrl: vault.origin, vaultToken: vault.token },
                { id: 'aws', type: 'cloud-kms', region: 'eu-central-1', accessKeyId: 'AKIAHALLMARKBENCH001', secretAccessKey: 'bench-secret-access-key-0123456789' },
                { id: 'qtsp', type: 'csc', baseUrl: csc.origin, tokenUrl: csc.tokenUrl, clientId: 'bench', clientSecret: 'bench-csc-client-secret', credentialId: 'seal' }
            ]
        });
        for (const provider of ['db', 'remote', 'hsm', 'vault', 'aws']) {
            await server.registry.write(tenant, keyChainKind, { id: provider, usageType: 'attestation', kmsProvider: provider });
        }
        // A csc credential is referenced, never generated.
        const { x, y } = Crypto.createPublicKey(seal.privateKey).export({ format: 'jwk' });
        await server.registry.write(tenant, keyChainKind, { id: 'qtsp', usageType: 'attestation', keySource: { type: 'external-reference', provider: 'qtsp', externalKeyId: 'seal', publicJwk: { kty: 'EC', crv: 'P-256', x, y }, certificateChain: seal.pem } });

        const { privateKey } = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
        const rows: Array<Record<string, string | number>> = [];
        for (const concurrency of [1, 8]) {
            const raw = await rate(() => Crypto.sign('sha256', data, { key: privateKey, dsaEncoding: 'ieee-p1363' }), concurrency);
            rows.push({ signer: 'raw node:crypto ES256', concurrency, 'sign/s': Math.round(raw), 'share of raw': '100%' });
            for (const [provider, label] of Object.entries(LABELS)) {
                const perSecond = await rate(() => server.signing.sign('bench', provider, data), concurrency);
                rows.push({ signer: `${label} provider`, concurrency, 'sign/s': Math.round(perSecond), 'share of raw': `${Math.round((perSecond / raw) * 100)}%` });
            }
        }
        printTable('KMS signatures per second (target: db provider >= 80% of raw)', rows);
    }
    finally {
        await server.stop();
        await kmsServer.stop();
        await vault.stop();
        await aws.stop();
        await csc.stop();
        if (previousEndpoint === undefined) {
            delete process.env.AWS_ENDPOINT_URL_KMS;
        }
        else {
            process.env.AWS_ENDPOINT_URL_KMS = previousEndpoint;
        }
        hsm.remove();
    }
};
