import { machine, measureFlow, printMachine, type FlowResult } from './harness';
import { prepareIssuance } from './issuance';
import { printTable } from './table';
import { DEMO_CONFIG, startService } from './service';

/**
 * Issue #19 item 3: the pre-authorized issuance flow on 1 and on 2 workers (cluster mode, one SQLite database in WAL
 * mode), measured one after the other in the same run, side by side. The CPU per flow counts every process of the
 * service (primary and workers); "floor-bound flows/s" is what all cores of the machine could do at the same-run
 * floor, and the target of #19 is that all workers reach 35 % of it. The wallets run in this process and take a
 * share of the same cores, which is part of what the share measures.
 */
export const benchWorkers = async (): Promise<void> => {
    const info = await machine();
    printMachine(info);
    const counts = (process.env.HALLMARK_BENCH_WORKERS ?? `1,${info.cores}`).split(',').map(Number);
    const results: Array<{ workers: number; result: FlowResult }> = [];
    for (const workers of counts) {
        const service = await startService(3925, { ...DEMO_CONFIG, WORKERS: String(workers) });
        try {
            const { spec } = await prepareIssuance(service);
            const result = await measureFlow(service, spec('issuance', 'pid', `Issuance on ${workers} worker${workers === 1 ? '' : 's'} (cluster mode, SQLite)`), info);
            results.push({ workers, result });
        }
        finally {
            await service.stop();
        }
    }
    const column = (pick: (r: FlowResult) => string) => Object.fromEntries(results.map(({ workers, result }) => [`${workers} worker${workers === 1 ? '' : 's'}`, pick(result)]));
    const floorBound = (r: FlowResult) => (info.cores * 1000) / r.floorMs;
    printTable('Issuance, 1 and more workers side by side (same run)', [
        { measure: 'flows/s', ...column((r) => String(Math.round(r.rate))) },
        { measure: 'p50 | p99 ms', ...column((r) => `${r.p50.toFixed(1)} | ${r.p99.toFixed(1)}`) },
        { measure: 'server CPU ms/flow (all processes)', ...column((r) => r.serverCpuMs.toFixed(2)) },
        { measure: 'server cores busy', ...column((r) => r.serverCores.toFixed(2)) },
        { measure: 'wallet cores busy (this process)', ...column((r) => r.clientCores.toFixed(2)) },
        { measure: 'ratio to the floor', ...column((r) => `${r.ratio.toFixed(2)}×`) },
        { measure: `floor-bound flows/s (${info.cores} cores)`, ...column((r) => String(Math.round(floorBound(r)))) },
        { measure: 'share of the floor-bound rate (target ≥ 35 % with all workers)', ...column((r) => `${((100 * r.rate) / floorBound(r)).toFixed(1)} %`) },
        { measure: 'server RSS MiB (all processes)', ...column((r) => String(Math.round(r.rssMiB))) }
    ]);
};
