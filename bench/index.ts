import { benchAuth } from './auth';
import { benchAuthorizationCode } from './authorization-code';
import { benchBundles } from './bundles';
import { benchDcApi, benchIso18013 } from './browser-presentation';
import { benchIssuance } from './issuance';
import { benchPresentation } from './presentation';
import { benchKms } from './kms';
import { benchMicro } from './micro';
import { benchSessions } from './sessions';
import { benchStartup } from './startup';
import { benchStatusLists } from './status-lists';
import { benchTrustLists } from './trust-lists';
import { benchWorkers } from './workers';

/** Runs every benchmark, or the ones named on the command line. */
const benches: Record<string, () => Promise<void>> = {
    startup: benchStartup,
    auth: benchAuth,
    kms: benchKms,
    issuance: benchIssuance,
    authcode: benchAuthorizationCode,
    presentation: benchPresentation,
    sessions: benchSessions,
    status: benchStatusLists,
    bundles: benchBundles,
    iso18013: benchIso18013,
    dcapi: benchDcApi,
    trust: benchTrustLists,
    workers: benchWorkers,
    micro: benchMicro
};

const main = async () => {
    const names = process.argv.slice(2);
    for (const [name, run] of Object.entries(benches)) {
        if (!names.length || names.includes(name)) {
            await run();
        }
    }
};

main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
});
