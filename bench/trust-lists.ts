import { parseTrustList } from '../plugins/trust/services/list-formats';
import { party } from '../test/helpers/pki';
import { rsaSigner, signLote, signTrustedList, SVC, trustedListXml } from '../test/helpers/trust-lists';
import { printTable } from './table';

const HOUR = 3_600_000;

/**
 * Checking a published list: signature verification (xml-crypto for TS 119 612 XML, jose for TS 119 602 JWT) and
 * reading its services, in process. This is what a cold cache or the refresh job pays per list; requests use the
 * stored snapshot. Sizes: a national trusted list has tens to a few hundred services.
 */
export const benchTrustLists = async (): Promise<void> => {
    const signer = await rsaSigner('Bench scheme operator');
    const ecSigner = await party('Bench LoTE operator', null, { ca: true });
    const ca = await party('Bench PID CA', null, { ca: true });
    const rows: Array<Record<string, string | number>> = [];
    for (const services of [10, 100, 500]) {
        const entries = Array.from({ length: services }, () => ({ type: SVC.pidXml, certificates: [ca.cert] }));
        const xml = signTrustedList(trustedListXml(entries, new Date(Date.now() + HOUR)), signer);
        const jwt = await signLote(entries.map((e) => ({ ...e, type: SVC.pidLote })), new Date(Date.now() + HOUR), ecSigner.privateKey);
        for (const [format, body, signers] of [['TS 119 612 XML (RSA)', xml, [signer.certificate]], ['TS 119 602 JWT (ES256)', jwt, [ecSigner.cert]]] as const) {
            await parseTrustList(body, [...signers], new Date());
            const runs = 20;
            const started = process.hrtime.bigint();
            for (let i = 0; i < runs; i++) {
                await parseTrustList(body, [...signers], new Date());
            }
            const ms = Number(process.hrtime.bigint() - started) / 1e6 / runs;
            rows.push({ format, services, kib: Math.round(Buffer.byteLength(body) / 1024), 'ms per check': ms.toFixed(1) });
        }
    }
    printTable('Trust list signature check and parse (per list)', rows);
};

if (require.main === module) {
    benchTrustLists().catch((err) => {
        process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
        process.exit(1);
    });
}
