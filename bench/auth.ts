import autocannon from 'autocannon';
import { post, ROOT, startService } from './service';
import { printTable } from './table';

const run = (options: autocannon.Options) => new Promise<autocannon.Result>((resolve, reject) =>
    autocannon(options, (err, result) => (err ? reject(err) : resolve(result))));

/** Token endpoint and an authenticated GET, one server process, loaded from this process over keep-alive. */
export const benchAuth = async (): Promise<void> => {
    const service = await startService(3918);
    try {
        const token = await post(`${service.url}/api/oauth2/token`, { grant_type: 'client_credentials', client_id: ROOT.id, client_secret: ROOT.secret });
        const bearer = `Bearer ${token.body.access_token}`;
        await post(`${service.url}/api/tenants`, { id: 'bench', name: 'Bench' }, { authorization: bearer });

        const rows: Array<Record<string, string | number>> = [];
        const cases: Array<[string, autocannon.Options, number]> = [
            ['POST /api/oauth2/token', {
                url: `${service.url}/api/oauth2/token`,
                method: 'POST',
                headers: { 'content-type': 'application/json' },
                body: JSON.stringify({ grant_type: 'client_credentials', client_id: ROOT.id, client_secret: ROOT.secret })
            }, 2000],
            ['GET /api/tenants/bench (bearer)', { url: `${service.url}/api/tenants/bench`, headers: { authorization: bearer } }, 4000]
        ];
        for (const [name, options, target] of cases) {
            await run({ ...options, connections: 8, duration: 2 });
            const result = await run({ ...options, connections: 16, duration: 8 });
            rows.push({
                endpoint: name,
                'req/s': Math.round(result.requests.average),
                'p50 ms': result.latency.p50,
                'p99 ms': result.latency.p99,
                non2xx: result.non2xx,
                target: `>= ${target}/s`
            });
        }
        printTable('Management authentication (one process, SQLite, 16 connections, 8 s)', rows);
    }
    finally {
        await service.stop();
    }
};
