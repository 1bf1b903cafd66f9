import ChildProcess from 'node:child_process';
import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { cryptoSpeed, httpClient, observeRequests } from './load';
import { assertPortFree, NODE_FLAGS, processesCpuMs, serviceProcesses, type BenchService } from './service';
import { percentile, printTable } from './table';

/**
 * The flow benchmarks' common measurement (issue #19 item 1). Absolute rates do not travel between machines; the
 * ratio of a flow's server CPU to a floor measured in the same run does. The floor of a flow is what its requests
 * and its signatures cost at the least on this machine: requests × the CPU of a hello-world hapi route (its own
 * process, same client, same concurrency) + its ES256 signatures and verifications (and ECDH) at node's speed.
 *
 * Each flow: warm-up (≥ 20 s by default), then a closed-loop measurement (≥ 30 s) reporting flows/s (and per 5-s
 * window), p50/p99, the server's CPU per flow over all its threads and its ratio to the floor, the main thread's
 * share, the client's CPU, the server's RSS; then a serial phase (one request at a time) for the CPU per route.
 * The machine (cores, CPU model, node, load before the run) is printed and a run that starts on a busy machine is
 * flagged: on a shared machine the rate suffers first, CPU per flow much less.
 *
 * HALLMARK_BENCH_QUICK=1 (or `--quick`): 3 s warm-up, 10 s measurement, for development. HALLMARK_BENCH_WARMUP_S,
 * HALLMARK_BENCH_SECONDS, HALLMARK_BENCH_SERIAL_S (the serial phase) and HALLMARK_BENCH_WALLETS override. HALLMARK_BENCH_JSON=<file> appends each result as a
 * JSON line. HALLMARK_BENCH_MAIN_ONLY=1: the issuance bench runs its main flow only (A/B runs of one change).
 */

export interface BenchSettings {
    quick: boolean;
    warmupMs: number;
    measureMs: number;
    windowMs: number;
    routeMs: number;
    wallets: number;
}

export const settings = (): BenchSettings => {
    const quick = process.env.HALLMARK_BENCH_QUICK === '1' || process.argv.includes('--quick');
    const seconds = (name: string, fallback: number) => (process.env[name] ? Number(process.env[name]) * 1000 : fallback);
    return {
        quick,
        warmupMs: seconds('HALLMARK_BENCH_WARMUP_S', quick ? 3000 : 20_000),
        measureMs: seconds('HALLMARK_BENCH_SECONDS', quick ? 10_000 : 30_000),
        windowMs: 5000,
        routeMs: seconds('HALLMARK_BENCH_SERIAL_S', quick ? 3000 : 8000),
        wallets: Number(process.env.HALLMARK_BENCH_WALLETS ?? 8)
    };
};

const sum = (pids: number[], read: (pid: number) => number): number => pids.reduce((total, pid) => total + read(pid), 0);

/** CPU time (ns) of processes over all their threads, from the scheduler's per-thread accounting (ns resolution). */
export const threadsCpuNs = (pids: number[]): number => sum(pids, (pid) => {
    let total = 0;
    for (const tid of Fs.readdirSync(`/proc/${pid}/task`)) {
        try {
            total += Number(Fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
        }
        catch {
            // the thread ended between the listing and the read
        }
    }
    return total;
});

/** CPU time (ns) of the processes' main threads (their event loops). */
const mainThreadCpuNs = (pids: number[]): number => sum(pids, (pid) => Number(Fs.readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]));

export const rssMiB = (pids: number[]): number => sum(pids, (pid) => Number(/VmRSS:\s+(\d+)/.exec(Fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024);

/** Busy CPU time of the whole machine (ms, all cores) from /proc/stat. */
const machineBusyMs = (): { busy: number; total: number } => {
    const fields = Fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const idle = fields[3]! + (fields[4] ?? 0);
    const total = fields.reduce((a, b) => a + b, 0);
    return { busy: ((total - idle) * 1000) / 100, total: (total * 1000) / 100 };
};

export interface MachineInfo {
    cores: number;
    cpu: string;
    node: string;
    memoryGiB: number;
    load1: number;
    /** Cores busy with other work during the 2 s before the run. */
    busyCores: number;
    busy: boolean;
}

/** The machine and how busy it is before a run (2 s sample of /proc/stat, plus the 1-minute load average). */
export const machine = async (): Promise<MachineInfo> => {
    const before = machineBusyMs();
    await new Promise((r) => setTimeout(r, 2000));
    const after = machineBusyMs();
    const cores = Os.cpus().length;
    const busyCores = (after.busy - before.busy) / 2000;
    const load1 = Os.loadavg()[0]!;
    return {
        cores,
        cpu: Os.cpus()[0]?.model ?? 'unknown',
        node: process.version,
        memoryGiB: Math.round(Os.totalmem() / 2 ** 30),
        load1,
        busyCores,
        // More than a quarter of a core busy elsewhere, or a load average above a quarter of the cores.
        busy: busyCores > 0.25 || load1 > cores / 4
    };
};

export const printMachine = (info: MachineInfo): void => {
    process.stdout.write(`\nMachine: ${info.cores} cores (${info.cpu}), ${info.memoryGiB} GiB, node ${info.node}; before the run: load ${info.load1.toFixed(2)}, `
        + `${info.busyCores.toFixed(2)} cores busy${info.busy ? '  ** BUSY MACHINE: rates are not comparable; CPU per flow is less affected **' : ''}\n`);
};

export interface Floor {
    /** Server CPU (all threads) per hello-world hapi request, ms. */
    hapiMs: number;
    signMs: number;
    verifyMs: number;
    ecdhMs: number;
    sign: number;
    verify: number;
    ecdh: number;
}

let measuredFloor: Floor | undefined;

/** The same-run floor: a hello-world hapi route in its own process under the same closed loop, and node's crypto. */
export const floor = async (): Promise<Floor> => {
    if (measuredFloor) {
        return measuredFloor;
    }
    const options = settings();
    const port = 3930;
    await assertPortFree(port);
    const child = ChildProcess.spawn(process.execPath, [...NODE_FLAGS, Path.join(__dirname, 'floor-server.js')], { env: { PATH: process.env.PATH ?? '', PORT: String(port), NODE_ENV: 'production' }, stdio: ['ignore', 'pipe', 'inherit'] });
    try {
        await new Promise<void>((resolve, reject) => {
            child.stdout!.once('data', () => resolve());
            child.once('exit', (code) => reject(new Error(`floor server exited with ${code}`)));
        });
        const { call, close } = httpClient();
        const url = `http://127.0.0.1:${port}/hello`;
        const hello = async () => {
            await call(url, 'GET');
        };
        await loop(hello, options.wallets, options.quick ? 2000 : 5000);
        const before = threadsCpuNs([child.pid!]);
        const measured = await loop(hello, options.wallets, options.quick ? 3000 : 10_000);
        const hapiMs = (threadsCpuNs([child.pid!]) - before) / 1e6 / measured.count;
        close();
        const speed = cryptoSpeed();
        measuredFloor = { hapiMs, signMs: 1000 / speed.sign, verifyMs: 1000 / speed.verify, ecdhMs: 1000 / speed.ecdh, ...speed };
        return measuredFloor;
    }
    finally {
        child.kill('SIGTERM');
    }
};

/** `wallets` concurrent loops of `flow` for `ms`: the end times (ms since start) and latencies (ms) of every flow. */
const loop = async (flow: () => Promise<void>, wallets: number, ms: number) => {
    const latencies: number[] = [];
    const ends: number[] = [];
    const start = Date.now();
    const until = start + ms;
    await Promise.all(Array.from({ length: wallets }, async () => {
        while (Date.now() < until) {
            const began = process.hrtime.bigint();
            await flow();
            latencies.push(Number(process.hrtime.bigint() - began) / 1e6);
            ends.push(Date.now() - start);
        }
    }));
    return { latencies, ends, count: latencies.length, elapsedMs: Date.now() - start };
};

/** A path with its ids (UUIDs, nonces, tokens: long or all-digit segments) replaced by `{id}`. */
const routeOf = (method: string, url: string): string => {
    const path = new URL(url).pathname.split('/').map((s) => (s.length >= 16 || /^\d+$/.test(s) ? '{id}' : s)).join('/');
    return `${method} ${path}`;
};

export interface FlowSpec {
    /** Short name (for the JSON lines). */
    name: string;
    title: string;
    run: () => Promise<void>;
    /** What the server must do at the least per flow. */
    requests: number;
    signs: number;
    verifies: number;
    ecdh?: number;
    /** The target of the ratio to the floor (issue #19: issuance ≤ 3, presentation ≤ 4). */
    targetRatio?: number;
    /** Extra rows (targets of the flow's own issue). */
    extra?: (result: FlowResult) => Array<Record<string, string | number>>;
}

export interface FlowResult {
    name: string;
    rate: number;
    p50: number;
    p99: number;
    serverCpuMs: number;
    mainThreadMs: number;
    floorMs: number;
    ratio: number;
    clientCores: number;
    serverCores: number;
    rssMiB: number;
    windows: number[];
    /** Server CPU per flow, one flow at a time: 10th percentile and median (other work on the machine only adds). */
    serialP10: number;
    serialMedian: number;
    routes: Array<{ route: string; cpuMs: number }>;
    machine: MachineInfo;
}

/** Measures one flow against a running service (see the file comment) and prints its table. */
export const measureFlow = async (service: BenchService, spec: FlowSpec, info: MachineInfo): Promise<FlowResult> => {
    const options = settings();
    const base = await floor();
    await loop(spec.run, options.wallets, options.warmupMs);

    const pids = serviceProcesses(service.pid);
    const cpu0 = threadsCpuNs(pids);
    const main0 = mainThreadCpuNs(pids);
    const proc0 = processesCpuMs(pids);
    const client0 = process.cpuUsage();
    const measured = await loop(spec.run, options.wallets, options.measureMs);
    const client = process.cpuUsage(client0);
    const threadsMs = (threadsCpuNs(pids) - cpu0) / 1e6;
    // Threads that ended during the run (libuv's pool grows and shrinks) are in the process total only.
    const serverMs = Math.max(threadsMs, processesCpuMs(pids) - proc0);
    const mainMs = (mainThreadCpuNs(pids) - main0) / 1e6;
    const rss = rssMiB(pids);
    const latencies = [...measured.latencies].sort((a, b) => a - b);
    const windows = Array.from({ length: Math.floor(measured.elapsedMs / options.windowMs) }, (_, i) =>
        measured.ends.filter((t) => t >= i * options.windowMs && t < (i + 1) * options.windowMs).length / (options.windowMs / 1000));

    // Per route: one flow at a time, each request charged with the server CPU up to the next request's start.
    const charged = new Map<string, { ns: number }>();
    let current: string | undefined;
    let mark = 0;
    let flows = 0;
    const settle = () => {
        const now = threadsCpuNs(pids);
        if (current) {
            const entry = charged.get(current) ?? { ns: 0 };
            entry.ns += now - mark;
            charged.set(current, entry);
        }
        mark = now;
    };
    observeRequests((method, url) => {
        settle();
        current = routeOf(method, url);
    });
    const until = Date.now() + options.routeMs;
    const perFlow: number[] = [];
    try {
        while (Date.now() < until) {
            const before = threadsCpuNs(pids);
            await spec.run();
            perFlow.push((threadsCpuNs(pids) - before) / 1e6);
            flows++;
        }
        settle();
    }
    finally {
        observeRequests(undefined);
    }
    const routes = [...charged].map(([route, { ns }]) => ({ route, cpuMs: ns / 1e6 / flows }));

    const floorMs = spec.requests * base.hapiMs + spec.signs * base.signMs + spec.verifies * base.verifyMs + (spec.ecdh ?? 0) * base.ecdhMs;
    const serverCpuMs = serverMs / measured.count;
    const result: FlowResult = {
        name: spec.name,
        rate: measured.count / (measured.elapsedMs / 1000),
        p50: percentile(latencies, 50),
        p99: percentile(latencies, 99),
        serverCpuMs,
        mainThreadMs: mainMs / measured.count,
        floorMs,
        ratio: serverCpuMs / floorMs,
        clientCores: (client.user + client.system) / 1000 / measured.elapsedMs,
        serverCores: serverMs / measured.elapsedMs,
        rssMiB: rss,
        windows,
        serialP10: percentile(perFlow.sort((a, b) => a - b), 10),
        serialMedian: percentile(perFlow, 50),
        routes,
        machine: info
    };
    const crypto = `${spec.signs} sign × ${base.signMs.toFixed(3)} + ${spec.verifies} verify × ${base.verifyMs.toFixed(3)}${spec.ecdh ? ` + ${spec.ecdh} ECDH × ${base.ecdhMs.toFixed(3)}` : ''}`;
    printTable(`${spec.title} — ${options.wallets} wallets, warm-up ${options.warmupMs / 1000} s, measured ${options.measureMs / 1000} s${options.quick ? ' (QUICK)' : ''}${info.busy ? ' (BUSY MACHINE)' : ''}`, [
        { measure: 'flows/s', value: Math.round(result.rate), note: 'absolute: only with the machine above' },
        { measure: 'flows/s per 5-s window', value: windows.map((w) => Math.round(w)).join(' '), note: '' },
        { measure: 'p50 | p99 ms', value: `${result.p50.toFixed(1)} | ${result.p99.toFixed(1)}`, note: 'p99 target < 50' },
        { measure: 'server CPU ms/flow (all threads)', value: serverCpuMs.toFixed(2), note: `main thread ${result.mainThreadMs.toFixed(2)}; ${result.serverCores.toFixed(2)} cores busy` },
        { measure: 'floor ms/flow (same run)', value: floorMs.toFixed(2), note: `${spec.requests} req × ${base.hapiMs.toFixed(3)} (hello-world hapi) + ${crypto}` },
        { measure: 'ratio to the floor', value: `${result.ratio.toFixed(2)}×`, note: spec.targetRatio ? `target ≤ ${spec.targetRatio}×` : '' },
        { measure: 'floor-bound flows/s (one core)', value: Math.round(1000 / floorMs), note: 'what one core could do at the floor' },
        { measure: 'client CPU (wallets, this process)', value: `${result.clientCores.toFixed(2)} cores`, note: '' },
        { measure: 'server RSS MiB', value: Math.round(rss), note: '' },
        ...routes.map((r) => ({ measure: `  CPU ms per flow: ${r.route}`, value: r.cpuMs.toFixed(3), note: '' })),
        { measure: '  CPU ms per flow: sum of routes (serial)', value: routes.reduce((a, r) => a + r.cpuMs, 0).toFixed(2), note: `${flows} flows, one at a time` },
        { measure: 'serial CPU ms/flow p10 | median', value: `${result.serialP10.toFixed(2)} | ${result.serialMedian.toFixed(2)}`, note: 'the least noisy figure on a shared machine (A/B of one change)' },
        ...(spec.extra?.(result) ?? [])
    ]);
    if (process.env.HALLMARK_BENCH_JSON) {
        Fs.appendFileSync(process.env.HALLMARK_BENCH_JSON, `${JSON.stringify({ ...result, floor: base, at: new Date().toISOString(), settings: options })}\n`);
    }
    return result;
};
