import Http from 'node:http';
import Net from 'node:net';

/** A port on 127.0.0.1 that nothing listens on right now (for a server to start on, or a receiver that is down). */
export const freePort = (): Promise<number> => new Promise((resolve, reject) => {
    const server = Net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
        const { port } = server.address() as Net.AddressInfo;
        server.close(() => resolve(port));
    });
});

export interface Delivery {
    path: string;
    headers: Http.IncomingHttpHeaders;
    body: any;
}

export interface Receiver {
    url: string;
    deliveries: Delivery[];
    close(): Promise<void>;
}

/** A webhook receiver on 127.0.0.1 that records each request's JSON body (or text) and answers as `answer` says. */
export const startReceiver = async (answer: (path: string) => { status: number; body: unknown } = () => ({ status: 200, body: {} })): Promise<Receiver> => {
    const deliveries: Delivery[] = [];
    const server = Http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let body: unknown = text;
            try {
                body = JSON.parse(text);
            }
            catch {
                // kept as text
            }
            const path = req.url ?? '';
            deliveries.push({ path, headers: req.headers, body });
            const reply = answer(path);
            res.writeHead(reply.status, { 'content-type': 'application/json' }).end(JSON.stringify(reply.body));
        });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as Net.AddressInfo;
    return { url: `http://127.0.0.1:${port}`, deliveries, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
};
