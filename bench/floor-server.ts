import Hapi from '@hapi/hapi';

/**
 * The floor of the flow benchmarks: a hello-world hapi route in its own process, loaded the same way as the service
 * (same client, same concurrency, same V8 flags). Its CPU per request is what any hapi route costs on this machine,
 * so a flow's server CPU divided by (its requests × this + its signatures) travels between machines.
 */
const main = async () => {
    const server = Hapi.server({ port: Number(process.env.PORT), host: '127.0.0.1' });
    server.route({ method: 'GET', path: '/hello', handler: () => ({ hello: 'world' }) });
    await server.start();
    process.stdout.write('ready\n');
    process.on('SIGTERM', () => {
        server.stop({ timeout: 100 }).then(() => process.exit(0), () => process.exit(1));
    });
};

if (require.main === module) {
    main().catch((err) => {
        process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
        process.exit(1);
    });
}
