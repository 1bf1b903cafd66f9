import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { ConfigError, loadConfig } from '../../manifests/environment';

export const lab = Lab.script();
const { describe, it } = lab;

const base = {
    PUBLIC_URL: 'https://hallmark.example.com',
    MASTER_SECRET: 'm'.repeat(32),
    AUTH_CLIENT_ID: 'root',
    AUTH_CLIENT_SECRET: 'a-long-enough-secret'
};

const problems = (env: Record<string, string>): string[] => {
    try {
        loadConfig(env);
    }
    catch (err) {
        expect(err).to.be.an.instanceof(ConfigError);
        return (err as ConfigError).problems;
    }
    throw new Error('expected the configuration to be rejected');
};

describe('runtime configuration', () => {
    it('applies the defaults of the specification', () => {
        const config = loadConfig(base);
        expect(config.db.type).to.equal('sqlite');
        expect(config.db.migrationsRun).to.be.true();
        expect(config.sessions).to.equal({ ttl: 86400, cleanupMode: 'full', tidyUpInterval: 3600, issuerMultiConsumption: false });
        expect(config.log.level).to.equal('debug');
        expect(config.log.httpResponseBodyMaxLength).to.equal(4096);
        expect(config.log.redact).to.be.true();
        expect(config.log.sessionStore).to.equal('off');
        expect(config.port).to.equal(3000);
        expect(config.worker).to.be.true();
        expect(config.auth.tokenTtl).to.equal(3600);
        expect(config.auth.tenantClaim).to.equal('tenant_id');
        expect(config.configImport.unresolvedPlaceholders).to.equal('fail-tenant');
    });

    it('parses booleans, numbers and lists', () => {
        const config = loadConfig({ ...base, DB_MIGRATIONS_RUN: 'false', LOG_TO_FILE: '1', SESSION_TTL: '120', OUTBOUND_URL_ALLOWED_HOSTS: 'A.example.com, b.example.com,', CONFIG_VARIABLE_STRICT: 'ignore' });
        expect(config.db.migrationsRun).to.be.false();
        expect(config.log.toFile).to.be.true();
        expect(config.sessions.ttl).to.equal(120);
        expect(config.outbound.allowedHosts).to.equal(['a.example.com', 'b.example.com']);
        expect(config.configImport.unresolvedPlaceholders).to.equal('warn');
    });

    it('names the variable and the rule of every invalid value', () => {
        const found = problems({ ...base, DB_PORT: 'x', LOG_LEVEL: 'loud', SESSION_CLEANUP_MODE: 'some', LOG_TO_FILE: 'maybe' });
        expect(found.some((p) => p.startsWith('LOG_LEVEL:') && p.includes('debug, info, warn, error'))).to.be.true();
        expect(found.some((p) => p.startsWith('SESSION_CLEANUP_MODE:'))).to.be.true();
        expect(found.some((p) => p.startsWith('LOG_TO_FILE:') && p.includes('boolean'))).to.be.true();
        expect(found.some((p) => p.startsWith('DB_PORT:') && p.includes('number'))).to.be.true();
    });

    it('requires the five DB_* values with postgres', () => {
        const found = problems({ ...base, DB_TYPE: 'postgres', DB_HOST: 'localhost' });
        for (const v of ['DB_PORT', 'DB_USERNAME', 'DB_PASSWORD', 'DB_DATABASE']) {
            expect(found.some((p) => p.startsWith(`${v}:`) && p.includes('required'))).to.be.true();
        }
    });

    it('requires a master secret of at least 32 characters', () => {
        expect(problems({ ...base, MASTER_SECRET: 'short' }).join()).to.contain('MASTER_SECRET: "MASTER_SECRET" length must be at least 32 characters long');
        const { MASTER_SECRET: _unused, ...withoutSecret } = base;
        expect(problems(withoutSecret).join()).to.contain('MASTER_SECRET');
    });

    it('requires PUBLIC_URL outside development', () => {
        const { PUBLIC_URL: _unused, ...rest } = base;
        expect(problems(rest).join()).to.contain('PUBLIC_URL');
        expect(loadConfig({ ...rest, NODE_ENV: 'development' }).publicUrl).to.equal('http://localhost:3000');
    });

    it('treats empty values as unset', () => {
        expect(loadConfig({ ...base, LOG_LEVEL: '' }).log.level).to.equal('debug');
    });
});
