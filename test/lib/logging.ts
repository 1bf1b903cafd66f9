import Fs from 'node:fs';
import Path from 'node:path';
import { PassThrough } from 'node:stream';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { loadConfig } from '../../manifests/environment';
import { createLogger, redactQuery, redactSensitive } from '../../lib/logging';
import * as probe from '../fixtures/probe-plugin';
import { createTestDatabase } from '../helpers/databases';
import { manifestFor, startTestServer, testEnv } from '../helpers/server';

export const lab = Lab.script();
const { describe, it } = lab;

const capture = () => {
    const stream = new PassThrough();
    const chunks: string[] = [];
    stream.on('data', (c) => chunks.push(c.toString()));
    return { stream, text: () => chunks.join('') };
};

describe('logging', () => {
    it('redacts authorization headers, secrets, codes, tokens and private keys at any depth', () => {
        const out = redactSensitive({
            headers: { Authorization: 'Bearer abc', accept: 'json' },
            body: { client_secret: 's3cret', nested: [{ privateJwk: { d: 'dd' } }, { 'pre-authorized_code': 'pac' }], name: 'kept' }
        });
        expect(out).to.equal({
            headers: { Authorization: '[redacted]', accept: 'json' },
            body: { client_secret: '[redacted]', nested: [{ privateJwk: '[redacted]' }, { 'pre-authorized_code': '[redacted]' }], name: 'kept' }
        });
        expect(redactQuery('/x?pre-authorized_code=abc&state=1&access_token=t')).to.equal('/x?pre-authorized_code=[redacted]&state=1&access_token=[redacted]');
        // A malformed key must not throw (it runs in a response listener): it is redacted.
        expect(redactQuery('/x?%E0=1&q=code')).to.equal('/x?%E0=[redacted]&q=[redacted]');
    });

    it('writes JSON lines to LOG_FILE_PATH in order while the console stays human-readable', async () => {
        const db = await createTestDatabase('sqlite');
        const file = Path.join(db.folder, 'logs', 'hallmark.log');
        try {
            const config = loadConfig(testEnv(db, { LOG_LEVEL: 'info', LOG_TO_FILE: 'true', LOG_FILE_PATH: file }));
            const consoleOut = capture();
            const log = createLogger(config, { destination: consoleOut.stream });
            for (let i = 0; i < 50; i++) {
                log.info({ i, token: 'tok' }, `line ${i}`);
            }
            const lines = Fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
            expect(lines.map((l) => l.i)).to.equal(Array.from({ length: 50 }, (_, i) => i));
            expect(lines[0].token).to.equal('[redacted]');
            expect(lines[0].msg).to.equal('line 0');
            expect(consoleOut.text()).to.contain('line 49');
            expect(() => JSON.parse(consoleOut.text().split('\n')[0]!)).to.throw();
        }
        finally {
            await db.drop();
        }
    });

    it('logs HTTP requests with redacted, truncated response bodies when asked', async () => {
        const consoleOut = capture();
        const env = { LOG_LEVEL: 'info', LOG_ENABLE_HTTP_LOGGER: 'true', LOG_HTTP_RESPONSE_BODY: 'true', LOG_HTTP_RESPONSE_BODY_MAX_LENGTH: '40' };
        const db = await createTestDatabase('sqlite');
        const log = createLogger(loadConfig(testEnv(db, env)), { destination: consoleOut.stream });
        await db.drop();
        const t = await startTestServer('sqlite', { env, logger: log, manifest: manifestFor('hallmark-core', { plugin: probe.plugin }) });
        try {
            await t.server.inject({ method: 'POST', url: '/api/probe?access_token=abc', payload: { name: 'n'.repeat(100) }, headers: { authorization: 'Bearer very-secret' } });
            const text = consoleOut.text();
            expect(text).to.contain('/api/probe?access_token=[redacted]');
            expect(text).to.contain('[truncated]');
            expect(text).to.not.contain('very-secret');
            expect(text).to.not.contain('n'.repeat(50));
        }
        finally {
            await t.stop();
        }
    });
});
