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

    it('answers 404 for an unknown kind and for a version it does not serve', async () => {
        expect((await t.server.inject('/api/schemas/v1/NoSuchFile.schema.json')).statusCode).to.equal(404);
        expect((await t.server.inject('/api/schemas/v9/TenantConfigFile.schema.json')).statusCode).to.equal(404);
        expect((await t.server.inject('/api/schemas/vx/TenantConfigFile.schema.json')).statusCode).to.equal(400);
    });
});
