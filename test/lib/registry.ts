import Crypto from 'node:crypto';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import Joi from 'joi';
import { ColumnCipher } from '../../lib/crypto/column-cipher';
import { Database } from '../../lib/db/database';
import { ValidationError } from '../../lib/errors';
import { migrateLatest } from '../../lib/db/migrate';
import { AuditLogModel } from '../../lib/db/models/audit-log';
import type { ResourceKind, TenantContext } from '../../lib/registry/kind';
import { Registry } from '../../lib/registry/registry';
import { tenantKind } from '../../resources/tenant';
import { createTestDatabase, DIALECTS, offlineDatabase, type TestDatabase } from '../helpers/databases';
import { manifestMigrations } from '../helpers/migrations';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

interface Hook {
    id: string;
    url: string;
    auth: { type: 'none' } | { type: 'apiKey'; config: { headerName: string; value: string } };
}

const hookKind: ResourceKind<Hook> = {
    kind: 'Hook',
    file: 'HookConfigFile',
    version: 2,
    schema: Joi.object({
        id: Joi.string().required(),
        url: Joi.string().uri().required(),
        auth: Joi.alternatives(
            Joi.object({ type: Joi.string().valid('none').required() }),
            Joi.object({ type: Joi.string().valid('apiKey').required(), config: Joi.object({ headerName: Joi.string().required(), value: Joi.string().required() }).required() })
        ).required()
    }),
    // v1 had `target` instead of `url`
    upgrades: { 1: ({ target, ...rest }: any, warn) => (warn({ code: 'RENAMED', message: 'target became url' }), { ...rest, url: target }) },
    dependsOn: ['Tenant'],
    secrets: ['auth.config.value'],
    id: (spec) => spec.id,
    location: { dir: 'hooks' }
};

const kind = (name: string, dependsOn: string[] = []): ResourceKind => ({
    kind: name, file: `${name}File`, version: 1, schema: Joi.object({ id: Joi.string() }), dependsOn, id: (s: any) => s.id, location: { dir: name }
});

describe('registry without a database', () => {
    it('orders kinds by their dependencies', () => {
        const r = new Registry(offlineDatabase());
        r.register(kind('C', ['B']));
        r.register(kind('B', ['A']));
        r.register(kind('A'));
        r.seal();
        expect(r.ordered().map((k) => k.kind)).to.equal(['A', 'B', 'C']);
    });

    it('fails to seal on an unknown dependency, naming it', () => {
        const r = new Registry(offlineDatabase());
        r.register(kind('A', ['Missing']));
        expect(() => r.seal()).to.throw(/A depends on Missing, which no plugin registers/);
    });

    it('fails to seal on a dependency cycle, naming the cycle', () => {
        const r = new Registry(offlineDatabase());
        r.register(kind('A', ['B']));
        r.register(kind('B', ['A']));
        expect(() => r.seal()).to.throw(/cycle: A -> B -> A/);
    });

    it('refuses kinds after sealing and twice-registered kinds', () => {
        const r = new Registry(offlineDatabase());
        r.register(kind('A'));
        expect(() => r.register(kind('A'))).to.throw(/registered twice/);
        r.seal();
        expect(() => r.register(kind('B'))).to.throw(/sealed/);
    });

    it('upgrades old versions with warnings and rejects newer versions and unknown schemas', () => {
        const r = new Registry(offlineDatabase());
        r.register(tenantKind);
        r.register(hookKind);
        r.seal();
        const parsed = r.parseDocument({ $schema: 'https://schemas.hallmark.dev/config/v1/HookConfigFile.schema.json', spec: { id: 'h', target: 'https://example.com', auth: { type: 'none' } } });
        const { spec, warnings } = r.validate(parsed.kind, parsed.spec, parsed.version);
        expect(spec).to.equal({ id: 'h', url: 'https://example.com', auth: { type: 'none' } });
        expect(warnings).to.equal([{ code: 'RENAMED', message: 'target became url' }]);
        expect(() => r.parseDocument({ $schema: 'https://schemas.hallmark.dev/config/v3/HookConfigFile.schema.json', spec: {} })).to.throw(/newer than this service supports/);
        expect(() => r.parseDocument({ $schema: 'https://example.com/other.json', spec: {} })).to.throw(/Unknown \$schema/);
        expect(() => r.parseDocument({ $schema: r.schemaUrl(hookKind), spec: {}, extra: 1 })).to.throw(/Unknown document field extra/);
    });
});

for (const dialect of DIALECTS) {
    describe(`registry write path (${dialect})`, () => {
        let testDb: TestDatabase;
        let db: Database;
        let registry: Registry;
        const admin: TenantContext = { clientId: 'root', roles: ['tenant:manage'] };
        const acme: TenantContext = { tenantId: 'acme', clientId: 'acme-admin', roles: ['tenant:admin'] };
        const other: TenantContext = { tenantId: 'other', clientId: 'other-admin', roles: ['tenant:admin'] };

        before(async () => {
            testDb = await createTestDatabase(dialect);
            db = Database.open(testDb.config, new ColumnCipher(Crypto.randomBytes(32)));
            await migrateLatest(db.knex, await manifestMigrations());
            registry = new Registry(db);
            registry.register(tenantKind);
            registry.register(hookKind);
            registry.seal();
            await registry.write(admin, tenantKind, { id: 'acme', name: 'Acme' });
            await registry.write(admin, tenantKind, { id: 'other', name: 'Other' });
        });
        after(async () => {
            await db.close();
            await testDb.drop();
        });

        it('creates, updates, reports unchanged, and audits each change with redacted secrets', async () => {
            const spec = { id: 'h1', url: 'https://hooks.example.com', auth: { type: 'apiKey', config: { headerName: 'X-Key', value: 'top-secret-value' } } };
            const created = await registry.write(acme, hookKind, spec, { mode: 'create' });
            expect(created.action).to.equal('create');
            expect(created.resource.generation).to.equal(1);
            const again = await registry.write(acme, hookKind, spec);
            expect(again.action).to.equal('unchanged');
            const updated = await registry.write(acme, hookKind, { ...spec, url: 'https://hooks2.example.com' });
            expect(updated.action).to.equal('update');
            expect(updated.resource.generation).to.equal(2);

            const audit = await db.model(AuditLogModel).query().where({ tenantId: 'acme', kind: 'Hook' }).orderBy('id');
            expect(audit.map((a) => a.action)).to.equal(['create', 'update']);
            expect(audit[0]!.actor).to.equal('acme-admin');
            expect(JSON.stringify(audit)).to.not.contain('top-secret-value');
            expect(audit[0]!.changes).to.contain({ path: 'auth', after: { type: 'apiKey', config: { headerName: 'X-Key', value: '[redacted]' } } });
            expect(audit[1]!.changes).to.equal([{ path: 'url', before: 'https://hooks.example.com', after: 'https://hooks2.example.com' }]);
        });

        it('stores specs of kinds with secrets encrypted', async () => {
            const raw = await db.knex('resources').where({ tenant_id: 'acme', kind: 'Hook', id: 'h1' }).first();
            expect(raw.spec).to.not.contain('top-secret-value');
            expect(raw.spec).to.not.contain('hooks2.example.com');
            expect(raw.spec.startsWith('hm1.')).to.be.true();
            const read = await registry.get(acme, hookKind, 'h1');
            expect(read!.spec.auth).to.equal({ type: 'apiKey', config: { headerName: 'X-Key', value: 'top-secret-value' } });
        });

        it('rejects create of an existing id (409), update of a missing id (404) and invalid specs (400 with details)', async () => {
            await expect(registry.write(acme, hookKind, { id: 'h1', url: 'https://x.example', auth: { type: 'none' } }, { mode: 'create' })).to.reject(/already exists/);
            await expect(registry.write(acme, hookKind, { id: 'nope', url: 'https://x.example', auth: { type: 'none' } }, { mode: 'update' })).to.reject(/not found/);
            const err = await expect(registry.write(acme, hookKind, { id: 'h2', url: 'https://x.example', auth: { type: 'none' }, extra: true })).to.reject();
            expect((err as any).status).to.equal(400);
            expect((err as any).details).to.equal([{ path: 'extra', message: '"extra" is not allowed' }]);
        });

        // Replicas share a PostgreSQL database; SQLite's one connection per process serializes a process's writes, and
        // its processes (cluster mode) bootstrap once, in the primary's prepare step, before the workers start.
        if (dialect === 'postgres') {
            it('takes one of 20 concurrent creates of an id from two replicas, answers the others 409 (create) or unchanged (upsert), never a 500', async () => {
                // A second connection pool on the same database plays another replica.
                const peerDb = Database.open(testDb.config, db.cipher);
                const peer = new Registry(peerDb);
                peer.register(tenantKind);
                peer.register(hookKind);
                peer.seal();
                try {
                    const spec = (id: string) => ({ id, url: 'https://race.example', auth: { type: 'none' } });
                    const creates = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => (i % 2 ? peer : registry).write(acme, hookKind, spec('raced-create'), { mode: 'create' })));
                    const created = creates.filter((r) => r.status === 'fulfilled');
                    expect(created.map((r) => (r as PromiseFulfilledResult<{ action: string }>).value.action)).to.equal(['create']);
                    for (const refused of creates.filter((r): r is PromiseRejectedResult => r.status === 'rejected')) {
                        expect(refused.reason.status, refused.reason.stack).to.equal(409);
                    }
                    const upserts = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? peer : registry).write(acme, hookKind, spec('raced-upsert'))));
                    expect(upserts.map((r) => r.action).sort()).to.equal(['create', ...Array(19).fill('unchanged')]);
                    const audit = await db.model(AuditLogModel).query().where({ tenantId: 'acme', kind: 'Hook' }).whereIn('resourceId', ['raced-create', 'raced-upsert']);
                    expect(audit.map((a) => a.action)).to.equal(['create', 'create']);
                }
                finally {
                    await peerDb.close();
                }
            });
        }

        it('scopes every read and delete by the context tenant', async () => {
            expect(await registry.get(other, hookKind, 'h1')).to.be.undefined();
            expect(await registry.list(other, hookKind)).to.equal([]);
            await expect(registry.remove(other, hookKind, 'h1')).to.reject(/not found/);
            expect(await registry.get(acme, hookKind, 'h1')).to.exist();
        });

        it('writes nothing, audit included, when the surrounding transaction fails', async () => {
            const before = await db.model(AuditLogModel).query().resultSize();
            await expect(registry.transaction(async () => {
                await registry.write(acme, hookKind, { id: 'h3', url: 'https://x.example', auth: { type: 'none' } });
                throw new Error('later step failed');
            })).to.reject('later step failed');
            expect(await registry.get(acme, hookKind, 'h3')).to.be.undefined();
            expect(await db.model(AuditLogModel).query().resultSize()).to.equal(before);
        });

        it('reports a change to its listeners only once it is committed, never a rolled-back one', async () => {
            const heard: string[] = [];
            registry.onChange(hookKind, (_tenantId, id) => heard.push(id));
            await expect(registry.transaction(async () => {
                await registry.write(acme, hookKind, { id: 'h4', url: 'https://x.example', auth: { type: 'none' } });
                throw new Error('later step failed');
            })).to.reject('later step failed');
            await new Promise((resolve) => setImmediate(resolve));
            expect(heard).to.equal([]);
            await registry.transaction(async () => {
                await registry.write(acme, hookKind, { id: 'h5', url: 'https://x.example', auth: { type: 'none' } });
                expect(heard).to.equal([]);
            });
            await new Promise((resolve) => setImmediate(resolve));
            expect(heard).to.equal(['h5']);
            await registry.write(acme, hookKind, { id: 'h6', url: 'https://x.example', auth: { type: 'none' } });
            expect(heard).to.equal(['h5', 'h6']);
        });

        it('calls its listeners outside the committed transaction, so work they start can query', async () => {
            const seen: Array<{ ambient: boolean; later: Promise<unknown> }> = [];
            registry.onChange(hookKind, (_tenantId, id) => {
                // What a background refresh does: read the database after the write, on its own.
                seen.push({ ambient: db.ambient() !== undefined, later: (async () => {
                    await new Promise((resolve) => setImmediate(resolve));
                    return registry.get(acme, hookKind, id);
                })() });
            });
            await registry.write(acme, hookKind, { id: 'h7', url: 'https://x.example', auth: { type: 'none' } });
            await registry.transaction(() => registry.write(acme, hookKind, { id: 'h8', url: 'https://x.example', auth: { type: 'none' } }));
            await new Promise((resolve) => setImmediate(resolve));
            expect(seen.map((s) => s.ambient)).to.equal([false, false]);
            const read = await Promise.all(seen.map((s) => s.later)) as Array<{ spec: { id: string } } | undefined>;
            expect(read.map((r) => r?.spec.id)).to.equal(['h7', 'h8']);
        });

        it('deletes with an audit entry; deleting a tenant removes what it owns', async () => {
            await registry.write(other, hookKind, { id: 'o1', url: 'https://o.example', auth: { type: 'none' } });
            await registry.remove(acme, hookKind, 'h1');
            expect(await registry.get(acme, hookKind, 'h1')).to.be.undefined();
            const deletion = await db.model(AuditLogModel).query().where({ tenantId: 'acme', action: 'delete' }).first();
            expect(deletion!.resourceId).to.equal('h1');

            await registry.remove(admin, tenantKind, 'other');
            expect(await db.knex('resources').where({ tenant_id: 'other' }).count({ n: '*' }).first()).to.equal({ n: dialect === 'postgres' ? '0' : 0 });
            const tenantDeletion = await db.model(AuditLogModel).query().whereNull('tenantId').where({ kind: 'Tenant', action: 'delete' }).first();
            expect(tenantDeletion!.resourceId).to.equal('other');
        });
    });
}

/** A resolver with fixed answers per host name; unknown names fail like a name that does not exist. */
const dns = (answers: Record<string, string[]>) => async (hostname: string) => {
    const found = answers[hostname];
    if (!found) {
        throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    }
    return found.map((address) => ({ address, family: (address.includes(':') ? 6 : 4) as 4 | 6 }));
};

for (const dialect of DIALECTS) {
    describe(`registry outbound URL check at save (${dialect})`, () => {
        let testDb: TestDatabase;
        let db: Database;
        // Beacons are written with URLs at a fixed path and inside a list, like trust list sources or KMS providers.
        const beaconKind: ResourceKind<{ id: string; url?: string; mirrors?: Array<{ url: string }> }> = {
            kind: 'Beacon',
            file: 'BeaconFile',
            version: 1,
            schema: Joi.object({ id: Joi.string().required(), url: Joi.string(), mirrors: Joi.array().items(Joi.object({ url: Joi.string() })) }),
            dependsOn: ['Tenant'],
            outboundUrls: ['url', 'mirrors.*.url'],
            id: (spec) => spec.id,
            location: { dir: 'beacons' }
        };
        const resolver = dns({ 'public.example': ['93.184.216.34'], 'inside.example': ['93.184.216.34', '10.1.2.3'], 'meta.example': ['169.254.169.254'] });
        let registries: { strict: Registry; open: Registry };
        const acme: TenantContext = { tenantId: 'acme', clientId: 'acme-admin', roles: ['tenant:admin'] };

        before(async () => {
            testDb = await createTestDatabase(dialect);
            db = Database.open(testDb.config, new ColumnCipher(Crypto.randomBytes(32)));
            await migrateLatest(db.knex, await manifestMigrations());
            registries = {
                strict: new Registry(db, { outbound: { allowHttp: false, allowPrivateNetwork: false, allowedHosts: [] }, resolver }),
                open: new Registry(db, { outbound: { allowHttp: true, allowPrivateNetwork: true, allowedHosts: [] }, resolver })
            };
            for (const r of Object.values(registries)) {
                r.register(tenantKind);
                r.register(beaconKind);
                r.seal();
            }
            await registries.open.write({ clientId: 'root', roles: ['tenant:manage'] }, tenantKind, { id: 'acme', name: 'Acme' });
        });
        after(async () => {
            await db.close();
            await testDb.drop();
        });

        it('refuses every declared URL field the policy forbids, naming the field and the address class, and writes nothing', async () => {
            const cases: Array<[object, Array<{ path: string; message: string }>]> = [
                [{ url: 'https://127.0.0.1/x' }, [{ path: 'url', message: 'url: loopback address 127.0.0.1 is not allowed by the outbound policy (OUTBOUND_URL_ALLOW_PRIVATE_NETWORK is off)' }]],
                [{ url: 'https://inside.example/x' }, [{ path: 'url', message: 'url: inside.example resolves to private address 10.1.2.3, which is not allowed by the outbound policy (OUTBOUND_URL_ALLOW_PRIVATE_NETWORK is off)' }]],
                [{ mirrors: [{ url: 'https://public.example' }, { url: 'https://meta.example/latest' }] }, [{ path: 'mirrors.1.url', message: 'mirrors.1.url: meta.example resolves to link-local address 169.254.169.254, which is not allowed by the outbound policy (OUTBOUND_URL_ALLOW_PRIVATE_NETWORK is off)' }]],
                [{ url: 'http://public.example/x' }, [{ path: 'url', message: 'url: http URLs are not allowed by the outbound policy (OUTBOUND_URL_ALLOW_HTTP is off)' }]]
            ];
            for (const [fields, details] of cases) {
                const err = await expect(registries.strict.write(acme, beaconKind, { id: 'b1', ...fields })).to.reject(ValidationError);
                expect(err.status).to.equal(400);
                expect(err.details).to.equal(details);
                expect(await registries.strict.get(acme, beaconKind, 'b1')).to.be.undefined();
            }
        });

        it('accepts public URLs, names that do not resolve now (checked again at use), and private ones when the policy allows them', async () => {
            const strict = await registries.strict.write(acme, beaconKind, { id: 'b2', url: 'https://public.example/x', mirrors: [{ url: 'https://not-registered.example' }] });
            expect(strict.action).to.equal('create');
            for (const url of ['http://127.0.0.1:8080/x', 'https://inside.example', 'https://[fe80::1]/', 'https://meta.example']) {
                expect((await registries.open.write(acme, beaconKind, { id: 'b3', url })).spec.url).to.equal(url);
            }
        });
    });
}
