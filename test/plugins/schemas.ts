import Fs from 'node:fs';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import Ajv from 'ajv';
import { startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const demo = Path.join(__dirname, '../../examples/config/demo');
const demoDocuments = (): string[] => {
    const found: string[] = [];
    const walk = (dir: string) => {
        for (const entry of Fs.readdirSync(dir, { withFileTypes: true })) {
            const path = Path.join(dir, entry.name);
            if (entry.isDirectory()) {
                walk(path);
            }
            else if (entry.name.endsWith('.json')) {
                found.push(path);
            }
        }
    };
    walk(demo);
    return found;
};

describe('JSON Schemas of configuration documents', () => {
    let t: TestServer;
    before(async () => {
        t = await startTestServer('sqlite');
    });
    after(() => t.stop());

    it('serves one for every registered kind at its current version, without a token', async () => {
        for (const kind of t.server.registry.ordered()) {
            const res = await t.server.inject(`/api/schemas/v${kind.version}/${kind.file}.schema.json`);
            expect(res.statusCode, kind.file).to.equal(200);
            expect(res.headers['content-type']).to.contain('application/schema+json');
            const schema = JSON.parse(res.payload);
            expect(schema.$id).to.equal(`https://schemas.hallmark.dev/config/v${kind.version}/${kind.file}.schema.json`);
            expect(schema.properties.spec.type).to.equal('object');
        }
    });

    it('accepts the demo documents and rejects an unknown field, as the joi schemas do', async () => {
        const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
        for (const file of demoDocuments().filter((f) => !f.endsWith('info.json'))) {
            const document = JSON.parse(Fs.readFileSync(file, 'utf8'));
            const url = new URL(document.$schema);
            const res = await t.server.inject(url.pathname.replace('/config/', '/api/schemas/'));
            expect(res.statusCode, file).to.equal(200);
            const schema = JSON.parse(res.payload);
            const validate = ajv.getSchema(schema.$id) ?? ajv.compile(schema);
            expect(validate(document), `${file}: ${JSON.stringify(validate.errors)}`).to.be.true();
            expect(validate({ ...document, spec: { ...document.spec, colour: 'red' } }), file).to.be.false();
        }
    });

    it('serves every earlier version of a kind too, each with its own $id', async () => {
        for (const kind of t.server.registry.ordered()) {
            for (let version = 1; version <= kind.version; version++) {
                const res = await t.server.inject(`/api/schemas/v${version}/${kind.file}.schema.json`);
                expect(res.statusCode, `${kind.file} v${version}`).to.equal(200);
                expect(JSON.parse(res.payload).$id).to.equal(`https://schemas.hallmark.dev/config/v${version}/${kind.file}.schema.json`);
            }
        }
    });

    it('describes the PresentationConfigFile of each version as spec 9 defines it', async () => {
        const schemaOf = async (version: number) => JSON.parse((await t.server.inject(`/api/schemas/v${version}/PresentationConfigFile.schema.json`)).payload);
        // Every DCQL claim query's `values` (objects with both path and values), and the registration body's fields.
        const claimValues = (node: unknown, found: Array<{ minItems?: number; items: unknown }> = []) => {
            if (node && typeof node === 'object') {
                const properties = (node as { properties?: Record<string, any> }).properties;
                if (properties?.path && properties.values) {
                    found.push(properties.values);
                }
                Object.values(node).forEach((child) => claimValues(child, found));
            }
            return found;
        };
        const bodyFields = (schema: any) => Object.keys(schema.properties.spec.properties.registration_cert.properties.body.properties);
        const [v1, v2, v3] = [await schemaOf(1), await schemaOf(2), await schemaOf(3)];
        // Version 3: strings, integers and booleans, never empty.
        expect(claimValues(v3).length).to.be.above(1);
        for (const values of claimValues(v3)) {
            expect(values.minItems).to.equal(1);
            expect(JSON.stringify(values.items)).to.contain('integer').and.to.contain('boolean');
        }
        // Versions 1 and 2: strings only, possibly empty.
        for (const values of [...claimValues(v2), ...claimValues(v1)]) {
            expect(values.minItems ?? 0).to.equal(0);
            expect(values.items).to.equal({ type: 'string' });
        }
        // provided_attestations only in version 1.
        expect(bodyFields(v1)).to.include(['provides_attestations', 'provided_attestations']);
        expect(bodyFields(v2)).to.not.include('provided_attestations');
        expect(bodyFields(v3)).to.not.include('provided_attestations');
    });

    it('answers 404 for an unknown kind and for a version it does not serve', async () => {
        expect((await t.server.inject('/api/schemas/v1/NoSuchFile.schema.json')).statusCode).to.equal(404);
        expect((await t.server.inject('/api/schemas/v9/TenantConfigFile.schema.json')).statusCode).to.equal(404);
        expect((await t.server.inject('/api/schemas/vx/TenantConfigFile.schema.json')).statusCode).to.equal(400);
        expect((await t.server.inject('/api/schemas/v0/TenantConfigFile.schema.json')).statusCode).to.equal(400);
    });
});
