import Os from 'node:os';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { ConfigError, loadConfig } from '../../manifests/environment';

export const lab = Lab.script();
const { describe, it } = lab;

const BASE = { PUBLIC_URL: 'https://hallmark.example', MASTER_SECRET: 'm'.repeat(32), AUTH_CLIENT_ID: 'root', AUTH_CLIENT_SECRET: 'a-long-enough-secret' };

describe('WORKERS (cluster mode)', () => {
    it('defaults to every core, and to one process under NODE_ENV=test', () => {
        expect(loadConfig(BASE).workers).to.equal(Os.availableParallelism());
        expect(loadConfig({ ...BASE, NODE_ENV: 'development' }).workers).to.equal(Os.availableParallelism());
        expect(loadConfig({ ...BASE, NODE_ENV: 'test' }).workers).to.equal(1);
        expect(loadConfig({ ...BASE, NODE_ENV: 'test', WORKERS: '3' }).workers).to.equal(3);
        // Empty counts as unset, as container platforms pass it.
        expect(loadConfig({ ...BASE, WORKERS: '' }).workers).to.equal(Os.availableParallelism());
    });

    it('refuses what is not a process count, naming the variable', () => {
        for (const [value, message] of [['0', 'greater than or equal to 1'], ['2.5', 'an integer'], ['two', 'a number'], ['257', 'less than or equal to 256']]) {
            const err = (() => {
                try {
                    loadConfig({ ...BASE, WORKERS: value });
                }
                catch (e) {
                    return e;
                }
            })();
            expect(err).to.be.an.instanceof(ConfigError);
            expect((err as ConfigError).problems).to.equal([`WORKERS: "WORKERS" must be ${message}`]);
        }
    });
});
