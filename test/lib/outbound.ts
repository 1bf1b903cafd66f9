import { execFileSync } from 'node:child_process';
import Dns from 'node:dns';
import Fs from 'node:fs';
import Http from 'node:http';
import Https from 'node:https';
import Net, { type AddressInfo } from 'node:net';
import Os from 'node:os';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { classifyAddress, isPublicAddress, type AddressClass } from '../../lib/outbound/addresses';
import {
    checkUrl,
    guardAgent,
    outboundRequest,
    OutboundBlockedError,
    OutboundRequestError,
    type OutboundFailure,
    type OutboundPolicy,
    type Resolver
} from '../../lib/outbound';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

// Every request in this file goes to a server on 127.0.0.1 or ::1 started here; public-looking names only ever reach
// checkUrl (which does not connect) or are blocked before any connection is made.

const STRICT: OutboundPolicy = { allowHttp: false, allowPrivateNetwork: false, allowedHosts: [] };
const LOCAL: OutboundPolicy = { allowHttp: true, allowPrivateNetwork: true, allowedHosts: [] };

/** A resolver that answers from a fixed list and counts its calls. */
const fixed = (...answers: string[][]): Resolver & { calls: string[] } => {
    const calls: string[] = [];
    const resolver = async (hostname: string) => {
        const answer = answers[Math.min(calls.length, answers.length - 1)]!;
        calls.push(hostname);
        return answer.map((address) => ({ address, family: (address.includes(':') ? 6 : 4) as 4 | 6 }));
    };
    return Object.assign(resolver, { calls });
};

const rejection = async (promise: Promise<unknown>): Promise<Error> => {
    try {
        await promise;
    }
    catch (err) {
        return err as Error;
    }

    throw new Error('expected a rejection');
};

interface Received {
    method: string;
    url: string;
    headers: Http.IncomingHttpHeaders;
    body: string;
}

interface Local {
    port: number;
    host: string;
    received: Received[];
    base: string;
    close(): Promise<void>;
}

const listen = async (
    handler: (req: Http.IncomingMessage, res: Http.ServerResponse, body: string) => void,
    host = '127.0.0.1'
): Promise<Local> => {
    const received: Received[] = [];
    const server = Http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (chunk: Buffer) => chunks.push(chunk));
        req.on('end', () => {
            const body = Buffer.concat(chunks).toString('utf8');
            received.push({ method: req.method!, url: req.url!, headers: req.headers, body });
            handler(req, res, body);
        });
    });
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    const { port } = server.address() as AddressInfo;
    return {
        port,
        host,
        received,
        base: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
        close: () => new Promise<void>((resolve) => {
            server.closeAllConnections();
            server.close(() => resolve());
        })
    };
};

const ok = (_req: Http.IncomingMessage, res: Http.ServerResponse): void => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ ok: true }));
};

describe('outbound address classification', () => {
    const cases: Array<[string, AddressClass]> = [
        // IPv4 public, including the neighbours of blocked ranges
        ['8.8.8.8', 'public'],
        ['1.1.1.1', 'public'],
        ['93.184.216.34', 'public'],
        ['9.255.255.255', 'public'],
        ['11.0.0.0', 'public'],
        ['172.15.255.255', 'public'],
        ['172.32.0.0', 'public'],
        ['100.63.255.255', 'public'],
        ['100.128.0.0', 'public'],
        ['192.167.255.255', 'public'],
        ['192.169.0.0', 'public'],
        ['198.17.255.255', 'public'],
        ['198.20.0.0', 'public'],
        ['223.255.255.255', 'public'],
        ['126.255.255.255', 'public'],
        ['128.0.0.0', 'public'],
        // IPv4 special purpose
        ['0.0.0.0', 'unspecified'],
        ['0.1.2.3', 'unspecified'],
        ['127.0.0.1', 'loopback'],
        ['127.255.255.254', 'loopback'],
        ['10.0.0.1', 'private'],
        ['10.255.255.255', 'private'],
        ['172.16.0.1', 'private'],
        ['172.31.255.255', 'private'],
        ['192.168.0.1', 'private'],
        ['192.168.255.255', 'private'],
        ['169.254.169.254', 'link-local'],
        ['169.254.0.1', 'link-local'],
        ['100.64.0.1', 'carrier-grade-nat'],
        ['100.127.255.255', 'carrier-grade-nat'],
        ['192.0.2.5', 'documentation'],
        ['198.51.100.7', 'documentation'],
        ['203.0.113.9', 'documentation'],
        ['198.18.0.1', 'benchmark'],
        ['198.19.255.255', 'benchmark'],
        ['224.0.0.1', 'multicast'],
        ['239.255.255.250', 'multicast'],
        ['255.255.255.255', 'broadcast'],
        ['240.0.0.1', 'reserved'],
        ['255.255.255.254', 'reserved'],
        ['192.0.0.8', 'reserved'],
        ['192.88.99.1', 'reserved'],
        // IPv6 public
        ['2606:4700:4700::1111', 'public'],
        ['2001:4860:4860::8888', 'public'],
        ['2a00:1450:4001:82b::200e', 'public'],
        ['2001:200::1', 'public'],
        // IPv6 special purpose
        ['::', 'unspecified'],
        ['0:0:0:0:0:0:0:0', 'unspecified'],
        ['::1', 'loopback'],
        ['0:0:0:0:0:0:0:1', 'loopback'],
        ['fc00::1', 'private'],
        ['fd12:3456:789a::1', 'private'],
        ['FDFF:FFFF:FFFF:FFFF:FFFF:FFFF:FFFF:FFFF', 'private'],
        ['fec0::1', 'private'],
        ['fe80::1', 'link-local'],
        ['fe80::', 'link-local'],
        ['febf:ffff::1', 'link-local'],
        ['fe80::1%eth0', 'link-local'],
        ['2606:4700::1%eth0', 'link-local'],
        ['ff02::1', 'multicast'],
        ['ff05::1:3', 'multicast'],
        ['2001:db8::1', 'documentation'],
        ['2001:0db8:85a3:0000:0000:8a2e:0370:7334', 'documentation'],
        ['3fff::1', 'documentation'],
        ['2001::1', 'reserved'], // Teredo
        ['2001:10::1', 'reserved'], // ORCHID
        ['100::1', 'reserved'], // discard
        ['4000::1', 'reserved'], // outside 2000::/3
        ['5f00::1', 'reserved'],
        ['e000::1', 'reserved'],
        ['::ff:1', 'unspecified'], // IPv4-compatible 0.0.255.1
        // IPv4-mapped, -compatible and -translated forms classify the IPv4 address
        ['::ffff:127.0.0.1', 'loopback'],
        ['::ffff:7f00:1', 'loopback'],
        ['0:0:0:0:0:ffff:127.0.0.1', 'loopback'],
        ['::FFFF:C0A8:0101', 'private'],
        ['::ffff:10.1.2.3', 'private'],
        ['::ffff:169.254.169.254', 'link-local'],
        ['::ffff:100.64.0.1', 'carrier-grade-nat'],
        ['::ffff:0.0.0.0', 'unspecified'],
        ['::ffff:255.255.255.255', 'broadcast'],
        ['::ffff:8.8.8.8', 'public'],
        ['::127.0.0.1', 'loopback'],
        ['::10.0.0.1', 'private'],
        ['::8.8.8.8', 'public'],
        ['::ffff:0:127.0.0.1', 'loopback'],
        ['::ffff:0:8.8.8.8', 'public'],
        // NAT64
        ['64:ff9b::127.0.0.1', 'loopback'],
        ['64:ff9b::a00:1', 'private'],
        ['64:ff9b::a9fe:a9fe', 'link-local'],
        ['64:ff9b::808:808', 'public'],
        ['64:ff9b:1::1', 'private'],
        // 6to4
        ['2002:7f00:1::1', 'loopback'],
        ['2002:c0a8:101::1', 'private'],
        ['2002:a9fe:a9fe::', 'link-local'],
        ['2002:808:808::1', 'public'],
        // not IP addresses
        ['example.com', 'invalid'],
        ['', 'invalid'],
        ['1.2.3', 'invalid'],
        ['256.1.1.1', 'invalid'],
        ['01.2.3.4', 'invalid'],
        ['::ffff:1.2.3.256', 'invalid'],
        ['[::1]', 'invalid'],
        ['1::2::3', 'invalid']
    ];

    for (const [address, expected] of cases) {
        it(`classifies ${address || '(empty)'} as ${expected}`, () => {
            expect(classifyAddress(address)).to.equal(expected);
            expect(isPublicAddress(address)).to.equal(expected === 'public');
        });
    }
});

describe('outbound URL policy', () => {
    const publicDns = () => fixed(['93.184.216.34']);

    it('refuses http without allowHttp and other schemes always', async () => {
        const resolver = publicDns();
        const err = await rejection(checkUrl(STRICT, 'http://hooks.example.com/x', resolver));
        expect(err).to.be.an.instanceof(OutboundBlockedError);
        expect(err.message).to.contain('OUTBOUND_URL_ALLOW_HTTP');
        for (const url of ['ftp://example.com/', 'file:///etc/passwd', 'javascript:alert(1)', 'gopher://example.com/', 'ws://example.com/']) {
            expect(await rejection(checkUrl(LOCAL, url, resolver))).to.be.an.instanceof(OutboundBlockedError);
        }

        expect(await rejection(checkUrl(STRICT, 'not a url', resolver))).to.be.an.instanceof(OutboundBlockedError);
        expect(resolver.calls).to.equal([]);
        const checked = await checkUrl({ ...STRICT, allowHttp: true }, 'http://hooks.example.com/x', resolver);
        expect(checked.address).to.equal('93.184.216.34');
    });

    it('refuses credentials in the URL without repeating them', async () => {
        for (const url of ['https://user:s3cret@example.com/', 'https://s3cret@example.com/', 'https://:s3cret@example.com/']) {
            const err = await rejection(checkUrl(LOCAL, url, publicDns()));
            expect(err).to.be.an.instanceof(OutboundBlockedError);
            expect(err.message).to.contain('credentials');
            expect(err.message).to.not.contain('s3cret');
        }
    });

    it('matches allowedHosts exactly or by subdomain, and not by suffix', async () => {
        const policy: OutboundPolicy = { ...STRICT, allowedHosts: ['example.com', 'hooks.partner.test'] };
        for (const url of ['https://example.com/', 'https://a.example.com/', 'https://a.b.example.com:8443/x', 'https://EXAMPLE.com./', 'https://hooks.partner.test/']) {
            const checked = await checkUrl(policy, url, publicDns());
            expect(checked.address).to.equal('93.184.216.34');
        }

        for (const url of ['https://badexample.com/', 'https://example.com.evil.test/', 'https://example.co/', 'https://partner.test/', 'https://xhooks.partner.test/', 'https://93.184.216.34/']) {
            const resolver = publicDns();
            const err = await rejection(checkUrl(policy, url, resolver));
            expect(err, url).to.be.an.instanceof(OutboundBlockedError);
            expect(err.message).to.contain('OUTBOUND_URL_ALLOWED_HOSTS');
            expect(resolver.calls).to.equal([]);
        }

        expect((await checkUrl(STRICT, 'https://anything.example.net/', publicDns())).address).to.equal('93.184.216.34');
    });

    it('compares allowedHosts written in Unicode or with brackets in their canonical form', async () => {
        const policy: OutboundPolicy = { ...STRICT, allowedHosts: ['bücher.example', '[2606:4700::1111]'] };
        expect((await checkUrl(policy, 'https://shop.bücher.example/', publicDns())).url.hostname).to.equal('shop.xn--bcher-kva.example');
        expect((await checkUrl(policy, 'https://[2606:4700::1111]/', publicDns())).address).to.equal('2606:4700::1111');
    });

    it('blocks a name when any of its addresses is not public, in whatever order', async () => {
        for (const answer of [['93.184.216.34', '10.0.0.5'], ['10.0.0.5', '93.184.216.34'], ['2606:4700::1111', '::ffff:127.0.0.1'], ['93.184.216.34', 'fd00::1']]) {
            const err = await rejection(checkUrl(STRICT, 'https://hooks.example.com/', fixed(answer)));
            expect(err, answer.join()).to.be.an.instanceof(OutboundBlockedError);
            expect(err.message).to.contain('OUTBOUND_URL_ALLOW_PRIVATE_NETWORK');
        }

        const err = await rejection(checkUrl(STRICT, 'https://hooks.example.com/', fixed(['93.184.216.34', '169.254.169.254'])));
        expect(err.message).to.contain('link-local');
        expect((await checkUrl(STRICT, 'https://hooks.example.com/', fixed(['93.184.216.34', '2606:4700::1111']))).family).to.equal(4);
        expect((await checkUrl(STRICT, 'https://hooks.example.com/', fixed(['2606:4700::1111', '93.184.216.34']))).family).to.equal(6);
        expect(await rejection(checkUrl(LOCAL, 'https://hooks.example.com/', fixed(['not-an-ip'])))).to.be.an.instanceof(OutboundBlockedError);
    });

    it('classifies IP literals, including bracketed, mapped and odd IPv4 notations, without resolving them', async () => {
        const resolver = publicDns();
        for (const url of ['https://127.0.0.1/', 'https://[::1]:8443/', 'https://[::ffff:127.0.0.1]/', 'https://[::ffff:7f00:1]/', 'https://0x7f.1/',
            'https://2130706433/', 'https://[fe80::1]/', 'https://169.254.169.254/latest/meta-data', 'https://0.0.0.0/', 'https://[64:ff9b::a00:1]/',
            'https://[2002:c0a8:101::1]/', 'https://10.1.2.3/', 'https://[fd00::1]/']) {
            expect(await rejection(checkUrl(STRICT, url, resolver)), url).to.be.an.instanceof(OutboundBlockedError);
        }

        expect(await checkUrl(STRICT, 'https://8.8.8.8/', resolver)).to.include({ address: '8.8.8.8', family: 4 });
        expect(await checkUrl(STRICT, 'https://[2606:4700:4700::1111]/', resolver)).to.include({ address: '2606:4700:4700::1111', family: 6 });
        expect(resolver.calls).to.equal([]);
    });

    it('resolves once per check and returns the address it checked, so a rebinding answer cannot slip through', async () => {
        const rebinding = fixed(['93.184.216.34'], ['127.0.0.1']);
        const checked = await checkUrl(STRICT, 'https://hooks.example.com/', rebinding);
        expect(checked.address).to.equal('93.184.216.34');
        expect(rebinding.calls).to.equal(['hooks.example.com']);
        expect(await rejection(checkUrl(STRICT, 'https://hooks.example.com/', rebinding))).to.be.an.instanceof(OutboundBlockedError);
    });

    it('reports resolution failures as request errors', async () => {
        const failing: Resolver = () => Promise.reject(Object.assign(new Error('getaddrinfo ENOTFOUND nowhere.test'), { code: 'ENOTFOUND' }));
        const err = await rejection(checkUrl(STRICT, 'https://nowhere.test/?token=abc', failing));
        expect(err).to.be.an.instanceof(OutboundRequestError);
        expect(err.message).to.contain('ENOTFOUND');
        expect(err.message).to.not.contain('token');
        expect(await rejection(checkUrl(STRICT, 'https://nowhere.test/', fixed([])))).to.be.an.instanceof(OutboundRequestError);
    });
});

describe('outbound requests', () => {
    let server: Local;
    before(async () => {
        server = await listen((req, res, body) => {
            const url = new URL(req.url!, 'http://x');
            switch (url.pathname) {
                case '/echo':
                    res.writeHead(200, { 'content-type': 'application/json' });
                    res.end(JSON.stringify({ method: req.method, headers: req.headers, body }));
                    return;
                case '/redirect':
                    res.writeHead(302, { location: 'http://127.0.0.1/internal?token=loc-secret' });
                    res.end();
                    return;
                case '/not-modified':
                    res.writeHead(304);
                    res.end();
                    return;
                case '/fail':
                    res.writeHead(500, { 'content-type': 'text/plain' });
                    res.end('boom');
                    return;
                case '/big':
                    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': '2048' });
                    res.end(Buffer.alloc(2048));
                    return;
                case '/big-chunked':
                    res.writeHead(200, { 'content-type': 'application/octet-stream' });
                    res.write(Buffer.alloc(700));
                    res.end(Buffer.alloc(700));
                    return;
                case '/exact':
                    res.writeHead(200);
                    res.end(Buffer.alloc(1024, 1));
                    return;
                case '/not-json':
                    res.writeHead(200, { 'content-type': 'application/json' });
                    res.end('{"secret-body": ');
                    return;
                case '/hang':
                    return; // never answers
                case '/trickle': {
                    res.writeHead(200);
                    const tick = setInterval(() => res.write('.'), 50);
                    res.on('close', () => clearInterval(tick));
                    return;
                }
                default:
                    ok(req, res);
            }
        });
    });
    after(() => server.close());

    const local = (path: string) => `${server.base}${path}`;

    it('blocks localhost without the allow flags and reaches it with allowHttp and allowPrivateNetwork', async () => {
        // Listen on whatever localhost resolves to first here (127.0.0.1 or ::1), since the default resolver is used.
        const [first] = await Dns.promises.lookup('localhost', { all: true, verbatim: true });
        const target = await listen(ok, first!.address);
        try {
            const url = `http://localhost:${target.port}/hook`;
            expect(await rejection(outboundRequest(STRICT, url))).to.be.an.instanceof(OutboundBlockedError);
            expect(await rejection(outboundRequest({ ...STRICT, allowHttp: true }, url))).to.be.an.instanceof(OutboundBlockedError);
            expect(await rejection(outboundRequest({ ...STRICT, allowPrivateNetwork: true }, url))).to.be.an.instanceof(OutboundBlockedError);
            expect(target.received).to.have.length(0);

            const res = await outboundRequest(LOCAL, url, { method: 'POST', body: { event: 'x' } });
            expect(res.status).to.equal(200);
            expect(res.json()).to.equal({ ok: true });
            expect(target.received).to.have.length(1);
            expect(target.received[0]!.url).to.equal('/hook');
            expect(target.received[0]!.headers.host).to.equal(`localhost:${target.port}`);
        }
        finally {
            await target.close();
        }
    });

    it('connects to the checked address and keeps the name in the Host header', async () => {
        const resolver = fixed(['127.0.0.1']);
        const before = server.received.length;
        const res = await outboundRequest(LOCAL, `http://hooks.example.test:${server.port}/echo?x=1`, { headers: { 'X-Api-Key': 'k' } }, { resolver });
        expect(res.status).to.equal(200);
        expect(resolver.calls).to.equal(['hooks.example.test']);
        expect(server.received).to.have.length(before + 1);
        const seen = server.received.at(-1)!;
        expect(seen.headers.host).to.equal(`hooks.example.test:${server.port}`);
        expect(seen.headers['x-api-key']).to.equal('k');
        expect(seen.url).to.equal('/echo?x=1');
        expect(seen.method).to.equal('GET');
    });

    it('does not resolve again when connecting (a rebinding resolver cannot move the connection)', async () => {
        // Second and later answers point at 127.0.0.2, where nothing listens: a second lookup would fail the request.
        const rebinding = fixed(['127.0.0.1'], ['127.0.0.2']);
        const res = await outboundRequest(LOCAL, `http://hooks.example.test:${server.port}/echo`, {}, { resolver: rebinding });
        expect(res.status).to.equal(200);
        expect(rebinding.calls).to.have.length(1);
        expect(server.received.at(-1)!.headers.host).to.equal(`hooks.example.test:${server.port}`);
    });

    it('blocks a name resolving to loopback when private networks are not allowed, and sends nothing', async () => {
        const before = server.received.length;
        const err = await rejection(outboundRequest({ ...LOCAL, allowPrivateNetwork: false }, `http://hooks.example.test:${server.port}/echo`, {}, { resolver: fixed(['127.0.0.1']) }));
        expect(err).to.be.an.instanceof(OutboundBlockedError);
        expect(err.message).to.contain('loopback');
        // Loopback first: were the check ever broken, the connection would still stay on this machine.
        const mixed = await rejection(outboundRequest({ ...LOCAL, allowPrivateNetwork: false }, `http://hooks.example.test:${server.port}/echo`, {}, { resolver: fixed(['127.0.0.1', '93.184.216.34']) }));
        expect(mixed).to.be.an.instanceof(OutboundBlockedError);
        expect(server.received).to.have.length(before);
    });

    it('reaches an IPv6 loopback literal when allowed', { skip: !Os.networkInterfaces().lo?.some((i) => i.family === 'IPv6') }, async () => {
        const v6 = await listen(ok, '::1');
        try {
            expect(await rejection(outboundRequest({ ...LOCAL, allowPrivateNetwork: false }, `${v6.base}/`))).to.be.an.instanceof(OutboundBlockedError);
            const res = await outboundRequest(LOCAL, `${v6.base}/`);
            expect(res.status).to.equal(200);
            expect(v6.received[0]!.headers.host).to.equal(`[::1]:${v6.port}`);
        }
        finally {
            await v6.close();
        }
    });

    it('sends an object body as JSON with content-type and defaults the method to POST', async () => {
        const res = await outboundRequest(LOCAL, local('/echo'), { body: { status: 'completed', n: 1 }, headers: { Host: 'evil.test', 'Content-Length': '1' } });
        const echoed = res.json<{ method: string; headers: Record<string, string>; body: string }>();
        expect(echoed.method).to.equal('POST');
        expect(echoed.headers['content-type']).to.equal('application/json');
        expect(echoed.headers.host).to.equal(`127.0.0.1:${server.port}`);
        expect(JSON.parse(echoed.body)).to.equal({ status: 'completed', n: 1 });
        expect(echoed.headers['content-length']).to.equal(String(Buffer.byteLength(echoed.body)));

        const custom = (await outboundRequest(LOCAL, local('/echo'), { method: 'PUT', body: { a: 1 }, headers: { 'Content-Type': 'application/merge-patch+json' } })).json<any>();
        expect(custom.method).to.equal('PUT');
        expect(custom.headers['content-type']).to.equal('application/merge-patch+json');

        const raw = (await outboundRequest(LOCAL, local('/echo'), { method: 'PATCH', body: 'plain' })).json<any>();
        expect(raw.headers['content-type']).to.not.exist();
        expect(raw.body).to.equal('plain');
        const buffer = (await outboundRequest(LOCAL, local('/echo'), { body: Buffer.from('bytes') })).json<any>();
        expect(buffer.body).to.equal('bytes');
    });

    it('returns non-2xx responses with text() and json() helpers', async () => {
        const res = await outboundRequest(LOCAL, local('/fail'));
        expect(res.status).to.equal(500);
        expect(res.text()).to.equal('boom');
        expect(res.headers['content-type']).to.equal('text/plain');
        expect(Buffer.isBuffer(res.body)).to.be.true();

        const bad = await outboundRequest(LOCAL, local('/not-json'));
        const err = (() => {
            try {
                bad.json();
            }
            catch (e) {
                return e as Error;
            }

            throw new Error('expected json() to throw');
        })();
        expect(err).to.be.an.instanceof(OutboundRequestError);
        expect(err.message).to.not.contain('secret-body');
        expect((await outboundRequest(LOCAL, local('/not-modified'))).status).to.equal(304);
    });

    it('does not follow redirects', async () => {
        const before = server.received.length;
        const err = await rejection(outboundRequest(LOCAL, local('/redirect?token=q-secret')));
        expect(err).to.be.an.instanceof(OutboundRequestError);
        expect(err.message).to.contain('redirects are not followed');
        expect(err.message).to.not.contain('secret');
        expect(server.received).to.have.length(before + 1);
    });

    it('times out a server that does not answer, and one that trickles its body', async () => {
        for (const path of ['/hang', '/trickle']) {
            const started = Date.now();
            const err = await rejection(outboundRequest(LOCAL, local(`${path}?token=t-secret`), { timeoutMs: 200 }));
            const elapsed = Date.now() - started;
            expect(err, path).to.be.an.instanceof(OutboundRequestError);
            expect(err.message).to.contain('timed out');
            expect(err.message).to.not.contain('secret');
            expect(elapsed).to.be.below(1000);
            expect(elapsed).to.be.at.least(150);
        }
    });

    it('times out a resolver that never answers', async () => {
        const stuck: Resolver = () => new Promise(() => {});
        const started = Date.now();
        const err = await rejection(outboundRequest(LOCAL, 'https://slow.example.test/', { timeoutMs: 200 }, { resolver: stuck }));
        expect(err).to.be.an.instanceof(OutboundRequestError);
        expect(err.message).to.contain('timed out');
        expect(Date.now() - started).to.be.below(1000);
    });

    it('aborts responses larger than maxResponseBytes, declared or streamed', async () => {
        for (const path of ['/big', '/big-chunked']) {
            const err = await rejection(outboundRequest(LOCAL, local(path), { maxResponseBytes: 1024 }));
            expect(err, path).to.be.an.instanceof(OutboundRequestError);
            expect(err.message).to.contain('exceeds 1024 bytes');
        }

        const exact = await outboundRequest(LOCAL, local('/exact'), { maxResponseBytes: 1024 });
        expect(exact.body.length).to.equal(1024);
        expect((await outboundRequest(LOCAL, local('/big'))).body.length).to.equal(2048);
    });

    it('refuses request bodies over 1 MiB without connecting', async () => {
        const before = server.received.length;
        const err = await rejection(outboundRequest(LOCAL, local('/echo'), { body: 'x'.repeat(1024 * 1024 + 1) }));
        expect(err).to.be.an.instanceof(OutboundRequestError);
        expect(err.message).to.contain('request body');
        expect(server.received).to.have.length(before);
    });

    it('keeps query strings, paths, userinfo and header values out of error messages', async () => {
        const closed = await listen(ok);
        await closed.close();
        const url = `http://127.0.0.1:${closed.port}/hooks/p-secret?token=q-secret`;
        const refused = await rejection(outboundRequest(LOCAL, url));
        expect(refused).to.be.an.instanceof(OutboundRequestError);
        expect(refused.message).to.contain('ECONNREFUSED');

        const blocked = await rejection(outboundRequest(STRICT, url));
        expect(blocked).to.be.an.instanceof(OutboundBlockedError);

        const userinfo = await rejection(outboundRequest(LOCAL, `http://u-secret:pw-secret@127.0.0.1:${closed.port}/?token=q-secret`));
        expect(userinfo).to.be.an.instanceof(OutboundBlockedError);

        const header = await rejection(outboundRequest(LOCAL, local('/echo?token=q-secret'), { headers: { 'x-api-key': 'h-secret\r\nInjected: 1' } }));
        expect(header).to.be.an.instanceof(OutboundRequestError);

        for (const err of [refused, blocked, userinfo, header]) {
            expect(err.message).to.not.contain('secret');
            expect(err.message).to.not.contain('token');
        }
    });
});

describe('outbound requests over a guarded agent', () => {
    let server: Local;
    before(async () => {
        server = await listen((req, res) => {
            switch (new URL(req.url!, 'http://x').pathname) {
                case '/redirect':
                    res.writeHead(302, { location: 'http://127.0.0.1/elsewhere' });
                    res.end();
                    return;
                case '/big':
                    res.writeHead(200, { 'content-length': '2048' });
                    res.end(Buffer.alloc(2048));
                    return;
                case '/hang':
                    return; // never answers
                default:
                    ok(req, res);
            }
        });
    });
    after(() => server.close());

    const named = (path: string) => `http://kms.example.test:${server.port}${path}`;

    it('keeps connections alive, each checked once by the guard, and names each failure', async () => {
        const resolver = fixed(['127.0.0.1']);
        const agent = guardAgent(new Http.Agent({ keepAlive: true }), LOCAL, named('/'), resolver);
        try {
            for (const path of ['/a', '/b', '/c']) {
                expect((await outboundRequest(LOCAL, named(path), { agent })).status).to.equal(200);
            }

            expect(resolver.calls).to.equal(['kms.example.test']);
            expect(server.received.at(-1)!.headers.host).to.equal(`kms.example.test:${server.port}`);
            const failures: Array<[string, OutboundFailure]> = [
                ['/hang', 'timeout'],
                ['/big', 'too-large'],
                ['/redirect', 'redirect']
            ];
            for (const [path, failure] of failures) {
                const err = await rejection(outboundRequest(LOCAL, named(path), { agent, timeoutMs: 200, maxResponseBytes: 1024 }));
                expect(err, path).to.be.an.instanceof(OutboundRequestError);
                expect((err as OutboundRequestError).failure, path).to.equal(failure);
            }
        }
        finally {
            agent.destroy();
        }
    });

    it('reports the guard\'s refusal and failed resolution as they are, and sends nothing', async () => {
        const before = server.received.length;
        const refusing = guardAgent(new Http.Agent({ keepAlive: true }), STRICT, named('/'), fixed(['127.0.0.1']));
        const missing: Resolver = () => Promise.reject(Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' }));
        const nameless = guardAgent(new Http.Agent({ keepAlive: true }), LOCAL, named('/'), missing);
        try {
            expect(await rejection(outboundRequest(STRICT, named('/a'), { agent: refusing }))).to.be.an.instanceof(OutboundBlockedError);
            const err = await rejection(outboundRequest(LOCAL, named('/a'), { agent: nameless }));
            expect(err).to.be.an.instanceof(OutboundRequestError);
            expect((err as OutboundRequestError).failure).to.equal('unreachable');
            expect(((err as OutboundRequestError).cause as NodeJS.ErrnoException).code).to.equal('ENOTFOUND');
            expect(server.received).to.have.length(before);
        }
        finally {
            refusing.destroy();
            nameless.destroy();
        }
    });

    it('retries once on a fresh connection when a kept-alive one was closed while idle', async () => {
        // Answers the first request of each connection and resets the connection at its second one.
        let connections = 0;
        const raw = Net.createServer((socket) => {
            connections++;
            let requests = 0;
            socket.on('data', (chunk: Buffer) => {
                if (!chunk.includes('\r\n\r\n')) {
                    return;
                }

                if (++requests === 1) {
                    socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\nok');
                }
                else {
                    socket.resetAndDestroy();
                }
            });
        });
        await new Promise<void>((resolve) => raw.listen(0, '127.0.0.1', resolve));
        const url = `http://127.0.0.1:${(raw.address() as AddressInfo).port}/`;
        const agent = guardAgent(new Http.Agent({ keepAlive: true }), LOCAL, url);
        try {
            expect((await outboundRequest(LOCAL, url, { agent })).text()).to.equal('ok');
            expect((await outboundRequest(LOCAL, url, { agent })).text()).to.equal('ok');
            expect(connections).to.equal(2);
        }
        finally {
            agent.destroy();
            await new Promise<void>((resolve) => raw.close(() => resolve()));
        }
    });
});

const HAS_OPENSSL = (() => {
    try {
        execFileSync('openssl', ['version'], { stdio: 'pipe' });
        return true;
    }
    catch {
        return false;
    }
})();

describe('outbound https', { skip: !HAS_OPENSSL }, () => {
    let tls: Https.Server;
    let port: number;
    const servernames: string[] = [];
    before(async () => {
        const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-outbound-'));
        try {
            execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'key.pem', '-out', 'cert.pem',
                '-days', '1', '-subj', '/CN=hooks.example.test', '-addext', 'subjectAltName=DNS:hooks.example.test'], { cwd: dir, stdio: 'pipe' });
            tls = Https.createServer({
                key: Fs.readFileSync(Path.join(dir, 'key.pem')),
                cert: Fs.readFileSync(Path.join(dir, 'cert.pem')),
                // Called for the ClientHello, so it records the server name even when the client then refuses the certificate.
                SNICallback: (servername, callback) => {
                    servernames.push(servername);
                    callback(null, undefined);
                }
            }, ok);
        }
        finally {
            Fs.rmSync(dir, { recursive: true, force: true });
        }

        tls.on('tlsClientError', () => {});
        await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
        port = (tls.address() as AddressInfo).port;
    });
    after(() => new Promise<void>((resolve) => {
        tls.closeAllConnections();
        tls.close(() => resolve());
    }));

    it('sends the hostname as TLS server name to the pinned address and verifies the certificate', async () => {
        const err = await rejection(outboundRequest(LOCAL, `https://hooks.example.test:${port}/?token=q-secret`, {}, { resolver: fixed(['127.0.0.1']) }));
        expect(err).to.be.an.instanceof(OutboundRequestError);
        // The self-signed certificate is not trusted: verification is on, so the request never got past the handshake.
        expect(err.message).to.contain('SELF_SIGNED');
        expect(err.message).to.not.contain('secret');
        expect(servernames).to.equal(['hooks.example.test']);
    });
});
