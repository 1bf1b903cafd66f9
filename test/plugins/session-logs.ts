import { PassThrough } from 'node:stream';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as Jose from 'jose';
import type { Config } from '../../manifests/environment';
import { createLogger } from '../../lib/logging';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS, type DialectName } from '../helpers/databases';
import { ISSUER, pidConfig, PRE_AUTHORIZED as PRE_AUTH } from '../helpers/pid-config';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const pid = pidConfig();

type Store = Config['log']['sessionStore'];

interface LogRecord {
    level: string;
    msg: string;
    fields: Record<string, unknown>;
}

/** The console output (pino-pretty, not colorized) split into records: `[time] LEVEL: msg` and indented `key: value` lines. */
const parseRecords = (text: string): LogRecord[] => text.split(/\n(?=\[\d{2}:\d{2}:\d{2}\.\d{3}\] )/).filter(Boolean).map((block) => {
    const [head, ...rest] = block.split('\n');
    const match = /^\[[^\]]+\] (\w+): ?(.*)$/.exec(head ?? '');
    const fields: Record<string, unknown> = {};
    for (const line of rest) {
        const field = /^ {4}([\w.-]+): (.*)$/.exec(line);
        if (field) {
            try {
                fields[field[1]!] = JSON.parse(field[2]!);
            }
            catch {
                fields[field[1]!] = field[2];
            }
        }
    }
    return { level: (match?.[1] ?? '').toLowerCase(), msg: match?.[2] ?? '', fields };
});

interface Setup {
    t: TestServer;
    admin: string;
    output: () => string;
}

const prepare = async (dialect: DialectName, store: Store): Promise<Setup> => {
    const stream = new PassThrough();
    const chunks: string[] = [];
    stream.on('data', (c) => chunks.push(c.toString()));
    const logger = createLogger({
        log: {
            level: 'info', http: true, httpResponseBody: true, httpResponseBodyMaxLength: 0, redact: true,
            session: true, sessionStore: store, toFile: false, filePath: ''
        }
    }, { destination: stream });
    const t = await startTestServer(dialect, {
        manifest: manifestFor('hallmark-sessions', 'hallmark-oid4vci', 'hallmark-kms-db', 'hallmark-docs', 'hallmark-tenancy'),
        logger,
        env: { LOG_LEVEL: 'info', LOG_ENABLE_SESSION_LOGGER: 'true', LOG_SESSION_STORE: store, LOG_ENABLE_HTTP_LOGGER: 'true', LOG_HTTP_RESPONSE_BODY: 'true' }
    });
    const root = await rootToken(t.server);
    await createTenant(t.server, root, 'acme');
    const admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
    expect((await t.server.inject({ method: 'POST', url: '/api/key-chain', headers: bearer(admin), payload: { id: 'issuer', usageType: 'attestation', subject: { commonName: 'Acme', country: 'DE' } } })).statusCode).to.equal(201);
    const res = await t.server.inject({ method: 'POST', url: '/api/issuer/credentials', headers: bearer(admin), payload: pid });
    expect(res.statusCode, res.payload).to.equal(201);
    return { t, admin, output: () => chunks.join('') };
};

interface Flow {
    session: string;
    code: string;
    txCode: string;
    accessToken: string;
}

/** The by-hand pre-authorized flow: offer (fetched twice: the second is refused), token, nonce, credential, notification. */
const issue = async ({ t, admin }: Setup, options: { badProof?: boolean } = {}): Promise<Flow> => {
    const holder = await Jose.generateKeyPair('ES256', { extractable: true });
    const proof = async (nonce: string, aud = ISSUER) => new Jose.SignJWT({ nonce, aud })
        .setProtectedHeader({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: await Jose.exportJWK(holder.publicKey) })
        .setIssuedAt().sign(holder.privateKey);

    const offer = await t.server.inject({ method: 'POST', url: '/api/issuer/offer', headers: bearer(admin), payload: { credentialConfigurationIds: ['pid'], credentialClaims: { pid: { type: 'inline', claims: { given_name: 'Erika', family_name: 'Mustermann' } } }, tx_code: true } });
    expect(offer.statusCode, offer.payload).to.equal(201);
    const { uri, tx_code: txCode, session } = offer.result as { uri: string; tx_code: string; session: string };
    const offerUrl = decodeURIComponent(new URL(uri.replace('openid-credential-offer://', 'https://x/')).searchParams.get('credential_offer_uri')!).replace('http://hallmark.test', '');
    const fetched = await t.server.inject(offerUrl);
    expect(fetched.statusCode).to.equal(200);
    expect((await t.server.inject(offerUrl)).statusCode).to.equal(404);
    const code = (fetched.result as any).grants[PRE_AUTH]['pre-authorized_code'] as string;

    const token = await t.server.inject({
        method: 'POST',
        url: '/issuers/acme/authorize/token',
        payload: `grant_type=${encodeURIComponent(PRE_AUTH)}&pre-authorized_code=${code}&tx_code=${txCode}`,
        headers: { 'content-type': 'application/x-www-form-urlencoded' }
    });
    expect(token.statusCode, token.payload).to.equal(200);
    const accessToken = (token.result as { access_token: string }).access_token;
    const nonce = async () => ((await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/nonce' })).result as { c_nonce: string }).c_nonce;
    if (options.badProof) {
        const refused = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/credential', headers: { authorization: `Bearer ${accessToken}` }, payload: { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proof(await nonce(), 'https://someone-else.example') } } });
        expect(refused.statusCode).to.equal(400);
        expect((refused.result as { error: string }).error).to.equal('invalid_proof');
    }
    const credential = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/credential', headers: { authorization: `Bearer ${accessToken}` }, payload: { credential_configuration_id: 'pid', proof: { proof_type: 'jwt', jwt: await proof(await nonce()) } } });
    expect(credential.statusCode, credential.payload).to.equal(200);
    const notified = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/notification', headers: { authorization: `Bearer ${accessToken}` }, payload: { notification_id: (credential.result as { notification_id: string }).notification_id, event: 'credential_accepted' } });
    expect(notified.statusCode, notified.payload).to.equal(204);
    return { session, code, txCode, accessToken };
};

const logsOf = async ({ t, admin }: Setup, session: string, token = admin) => {
    const res = await t.server.inject({ url: `/api/session/${session}/logs`, headers: bearer(token) });
    return { statusCode: res.statusCode, entries: res.result as Array<{ timestamp: string; level: string; stage?: string; message: string; detail?: Record<string, any> }> };
};

const rawRows = (t: TestServer, session: string) => t.server.db.knex('session_logs').where({ sessionId: session }).orderBy('id', 'asc');

for (const dialect of DIALECTS) {
    describe(`session flow logs (${dialect})`, () => {

        describe('LOG_SESSION_STORE=all', () => {
            let setup: Setup;
            let flow: Flow;
            before(async () => {
                setup = await prepare(dialect, 'all');
                flow = await issue(setup);
            });
            after(() => setup.t.stop());

            it('lists every entry of the flow in order, with stages and events', async () => {
                const { statusCode, entries } = await logsOf(setup, flow.session);
                expect(statusCode).to.equal(200);
                expect(entries.map((e) => [e.level, e.stage, e.detail?.event])).to.equal([
                    ['info', 'offer', 'flow_start'],
                    ['warn', 'offer', 'request_failed'],
                    ['info', 'token', 'token_issued'],
                    ['info', 'credential', 'credential_issued'],
                    ['info', 'notification', 'notification']
                ]);
                expect(entries.map((e) => e.message)).to.equal([
                    'credential offer fetched',
                    'Unknown or already used credential offer',
                    'access token issued',
                    'credential issued',
                    'wallet notification credential_accepted'
                ]);
                for (const entry of entries) {
                    expect(entry.detail!.flowType).to.equal('OID4VCI');
                    expect(entry.detail!.request).to.not.exist();
                    expect(Date.parse(entry.timestamp)).to.be.a.number();
                }
                const times = entries.map((e) => Date.parse(e.timestamp));
                expect(times).to.equal([...times].sort((a, b) => a - b));
                expect(entries[1]!.detail).to.include({ status: 404, error: 'not_found' });
                expect(entries[3]!.detail).to.include({ credentialConfigurationId: 'pid', format: 'dc+sd-jwt', count: 1 });
                expect(entries[4]!.detail).to.include({ notificationEvent: 'credential_accepted' });
            });

            it('log lines carry sessionId and tenantId once the session is resolved, and never a code or token', async () => {
                const records = parseRecords(setup.output());
                const flowRecords = records.filter((r) => r.fields.sessionId === flow.session && r.fields.flowType !== undefined);
                expect(flowRecords.map((r) => r.fields.event)).to.equal(['flow_start', 'request_failed', 'token_issued', 'credential_issued', 'notification']);
                for (const record of flowRecords) {
                    expect(record.fields).to.include({ tenantId: 'acme', flowType: 'OID4VCI', context: 'oid4vci' });
                    expect(record.fields.stage).to.be.a.string();
                    expect(record.msg).to.not.be.empty();
                }
                expect(flowRecords[1]!.level).to.equal('warn');
                // Other lines of those requests (HTTP log lines) carry the session too.
                const httpLines = records.filter((r) => r.fields.sessionId === flow.session && r.fields.flowType === undefined);
                expect(httpLines.every((r) => r.fields.tenantId === 'acme')).to.be.true();
                const text = setup.output();
                expect(text).to.contain('credential offer fetched');
                expect(text).to.not.contain(flow.code);
                expect(text).to.not.contain(flow.accessToken);
                expect(text).to.not.contain(`tx_code=${flow.txCode}`);
            });

            it('answers 404 for another tenant, an invisible session type and an unknown session', async () => {
                const root = await rootToken(setup.t.server);
                await createTenant(setup.t.server, root, 'other');
                const other = (await clientWithToken(setup.t.server, root, { clientId: 'other-admin', roles: ['tenant:admin'], tenantId: 'other' })).token;
                expect((await logsOf(setup, flow.session, other)).statusCode).to.equal(404);
                const verifierOnly = (await clientWithToken(setup.t.server, root, { clientId: 'acme-verifier', roles: ['presentation:request'], tenantId: 'acme' })).token;
                expect((await logsOf(setup, flow.session, verifierOnly)).statusCode).to.equal(404);
                const offerer = (await clientWithToken(setup.t.server, root, { clientId: 'acme-offerer', roles: ['issuance:offer'], tenantId: 'acme' })).token;
                const visible = await logsOf(setup, flow.session, offerer);
                expect(visible.statusCode).to.equal(200);
                expect(visible.entries).to.have.length(5);
                expect((await logsOf(setup, '00000000-0000-4000-8000-000000000000')).statusCode).to.equal(404);
                expect((await setup.t.server.inject(`/api/session/${flow.session}/logs`)).statusCode).to.equal(401);
            });
            it('is documented in the OpenAPI document', async () => {
                const doc = (await setup.t.server.inject('/api/docs-json')).result as any;
                const get = doc.paths['/api/session/{id}/logs'].get;
                expect(get.tags).to.include('sessions');
                expect(get.summary ?? get.description).to.contain('log');
                expect(JSON.stringify(get.responses['200'])).to.contain('SessionLogEntr');
            });
        });

        describe('LOG_SESSION_STORE=errors', () => {
            let setup: Setup;
            let flow: Flow;
            before(async () => {
                setup = await prepare(dialect, 'errors');
                flow = await issue(setup, { badProof: true });
            });
            after(() => setup.t.stop());

            it('keeps only warn and error entries, such as a refused proof', async () => {
                const { statusCode, entries } = await logsOf(setup, flow.session);
                expect(statusCode).to.equal(200);
                expect(entries.map((e) => [e.level, e.stage, e.detail?.event, e.detail?.error])).to.equal([
                    ['warn', 'offer', 'request_failed', 'not_found'],
                    ['warn', 'credential', 'request_failed', 'invalid_proof']
                ]);
                expect(entries[1]!.message).to.equal('The proof audience must be the credential issuer');
                expect(entries[1]!.detail!.stack).to.not.exist();
                // The info records were still logged.
                expect(parseRecords(setup.output()).filter((r) => r.fields.sessionId === flow.session && r.fields.flowType !== undefined).map((r) => r.fields.event))
                    .to.equal(['flow_start', 'request_failed', 'token_issued', 'request_failed', 'credential_issued', 'notification']);
            });
        });

        describe('LOG_SESSION_STORE=off', () => {
            let setup: Setup;
            let flow: Flow;
            before(async () => {
                setup = await prepare(dialect, 'off');
                flow = await issue(setup, { badProof: true });
            });
            after(() => setup.t.stop());

            it('stores nothing, while the flow is still logged', async () => {
                const { statusCode, entries } = await logsOf(setup, flow.session);
                expect(statusCode).to.equal(200);
                expect(entries).to.equal([]);
                expect(await rawRows(setup.t, flow.session)).to.have.length(0);
                expect(parseRecords(setup.output()).filter((r) => r.fields.sessionId === flow.session && r.fields.tenantId === 'acme' && r.fields.flowType !== undefined)).to.have.length(6);
            });
        });

        describe('LOG_SESSION_STORE=verbose', () => {
            let setup: Setup;
            let flow: Flow;
            before(async () => {
                setup = await prepare(dialect, 'verbose');
                flow = await issue(setup, { badProof: true });
            });
            after(() => setup.t.stop());

            it('keeps request and response bodies with secrets redacted, and error stacks', async () => {
                const { entries } = await logsOf(setup, flow.session);
                expect(entries.map((e) => [e.stage, e.detail?.event])).to.equal([
                    ['offer', 'flow_start'],
                    ['offer', 'request_failed'],
                    ['token', 'token_issued'],
                    ['credential', 'request_failed'],
                    ['credential', 'credential_issued'],
                    ['notification', 'notification']
                ]);
                const [offer, , token, refused, credential, notification] = entries.map((e) => e.detail!);
                expect(offer!.request).to.include({ method: 'GET' });
                expect(offer!.response.status).to.equal(200);
                expect(offer!.response.body.grants[PRE_AUTH]['pre-authorized_code']).to.equal('[redacted]');
                expect(offer!.response.body.credential_configuration_ids).to.equal(['pid']);

                expect(token!.request).to.include({ method: 'POST', path: '/issuers/acme/authorize/token' });
                expect(token!.request.body).to.equal({ grant_type: PRE_AUTH, 'pre-authorized_code': '[redacted]', tx_code: '[redacted]' });
                expect(token!.response.body).to.include({ access_token: '[redacted]', token_type: 'Bearer' });

                expect(refused!.error).to.include({ status: 400, error: 'invalid_proof' });
                expect(refused!.error.stack).to.contain('OAuthError');
                expect(refused!.request.body.credential_configuration_id).to.equal('pid');

                // Issued credentials carry personal data: like codes and tokens they never reach a log.
                expect(credential!.response.status).to.equal(200);
                expect(credential!.response.body.credentials).to.equal('[redacted]');
                expect(notification!.request.body).to.include({ event: 'credential_accepted' });

                const opened = JSON.stringify(entries);
                expect(opened).to.not.contain(flow.code);
                expect(opened).to.not.contain(flow.accessToken);
                expect(opened).to.not.contain(`"${flow.txCode}"`);
            });

            it('seals the detail column at rest', async () => {
                const rows = await rawRows(setup.t, flow.session);
                expect(rows).to.have.length(6);
                for (const row of rows) {
                    expect(setup.t.server.db.cipher.isEncrypted(row.detail)).to.be.true();
                    expect(row.detail).to.not.contain('redacted');
                    expect(row.detail).to.not.contain('Erika');
                    expect(row).to.include({ tenantId: 'acme', flowType: 'OID4VCI' });
                }
                expect(JSON.parse(setup.t.server.db.cipher.decrypt(rows[4]!.detail)).response.status).to.equal(200);
                const text = setup.output();
                expect(text).to.not.contain(flow.code);
                expect(text).to.not.contain(flow.accessToken);
            });
        });
    });
}

describe('session flow logger off (LOG_ENABLE_SESSION_LOGGER=false)', () => {
    it('stores nothing even with LOG_SESSION_STORE=all', async () => {
        const t = await startTestServer(DIALECTS[0] ?? 'sqlite', { manifest: manifestFor('hallmark-sessions', 'hallmark-oid4vci', 'hallmark-kms-db', 'hallmark-tenancy'), env: { LOG_SESSION_STORE: 'all' } });
        try {
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            const admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            expect((await t.server.inject({ method: 'POST', url: '/api/key-chain', headers: bearer(admin), payload: { id: 'issuer', usageType: 'attestation', subject: { commonName: 'Acme', country: 'DE' } } })).statusCode).to.equal(201);
            expect((await t.server.inject({ method: 'POST', url: '/api/issuer/credentials', headers: bearer(admin), payload: pid })).statusCode).to.equal(201);
            const flow = await issue({ t, admin, output: () => '' });
            const { statusCode, entries } = await logsOf({ t, admin, output: () => '' }, flow.session);
            expect(statusCode).to.equal(200);
            expect(entries).to.equal([]);
            expect(await t.server.db.knex('session_logs').count({ n: '*' }).first()).to.include({ n: dialect0Count(0) });
        }
        finally {
            await t.stop();
        }
    });
});

/** count(*) is a number on SQLite and a string on PostgreSQL. */
const dialect0Count = (n: number): number | string => ((DIALECTS[0] ?? 'sqlite') === 'postgres' ? String(n) : n);
