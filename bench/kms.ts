import Crypto from 'node:crypto';
import Pino from 'pino';
import { createServer } from '../lib/compose';
import { loadConfig } from '../manifests/environment';
import { manifest } from '../manifests/default';
import { KmsServer } from '../test/fixtures/kms-server';
import { createSoftHsmToken } from '../test/helpers/softhsm';
import { printTable } from './table';
import { tenantKind } from '../resources/tenant';
import { kmsConfigKind } from '../resources/kms-config';
import { keyChainKind } from '../resources/key-chain';

const DURATION_MS = 2000;

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
 * each provider, next to raw node:crypto in the same run. In-process; the http provider talks to the test KMS
 * server over loopback, pkcs11 to a SoftHSM2 token.
 */
export const benchKms = async (): Promise<void> => {
    const data = Crypto.randomBytes(200);
    const folder = require('node:fs').mkdtempSync(require('node:path').join(require('node:os').tmpdir(), 'hallmark-bench-kms-'));
    const hsm = createSoftHsmToken();
    const kmsServer = await KmsServer.start();
    const config = loadConfig({ PUBLIC_URL: 'http://127.0.0.1', FOLDER: folder, MASTER_SECRET: 'm'.repeat(40), AUTH_CLIENT_ID: 'root', AUTH_CLIENT_SECRET: 'bench-root-secret-0123', WORKER: 'off', LOG_LEVEL: 'error' });
    const server = await createServer(manifest(config), { logger: Pino({ level: 'silent' }) });
    await server.initialize();
    try {
        const ctx = { clientId: 'bench', roles: [] };
        await server.registry.write(ctx, tenantKind, { id: 'bench', name: 'Bench' });
        const tenant = { ...ctx, tenantId: 'bench' };
        await server.registry.write(tenant, kmsConfigKind, {
            providers: [
                { id: 'remote', type: 'http', baseUrl: kmsServer.origin },
                { id: 'hsm', type: 'pkcs11', library: hsm.library, slot: hsm.label, pin: hsm.pin }
            ]
        });
        for (const provider of ['db', 'remote', 'hsm']) {
            await server.registry.write(tenant, keyChainKind, { id: provider, usageType: 'attestation', kmsProvider: provider });
        }

        const { privateKey } = Crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
        const rows: Array<Record<string, string | number>> = [];
        for (const concurrency of [1, 8]) {
            const raw = await rate(() => Crypto.sign('sha256', data, { key: privateKey, dsaEncoding: 'ieee-p1363' }), concurrency);
            rows.push({ signer: 'raw node:crypto ES256', concurrency, 'sign/s': Math.round(raw), 'share of raw': '100%' });
            for (const provider of ['db', 'remote', 'hsm']) {
                const perSecond = await rate(() => server.signing.sign('bench', provider, data), concurrency);
                rows.push({ signer: `${provider === 'db' ? 'db' : provider === 'remote' ? 'http (loopback)' : 'pkcs11 (SoftHSM2)'} provider`, concurrency, 'sign/s': Math.round(perSecond), 'share of raw': `${Math.round((perSecond / raw) * 100)}%` });
            }
        }
        printTable('KMS signatures per second (target: db provider >= 80% of raw)', rows);
    }
    finally {
        await server.stop();
        await kmsServer.stop();
        hsm.remove();
    }
};
