import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import Yazl from 'yazl';
import { pathProblem, readZip, SPEC_ZIP_LIMITS } from '../../plugins/bundles/archive';
import { decodeJsonBundle, decodeZipBundle, jcs, sha256Hex, type JsonBundle, type Manifest } from '../../plugins/bundles/bundle';
import type { BundleError } from '../../plugins/bundles/errors';

export const lab = Lab.script();
const { describe, it } = lab;

/** The bundle format alone (no database): listings, checksums, paths and archive limits. */

const zip = async (files: Array<[string, Buffer | string]>, directories: string[] = []) => {
    const archive = new Yazl.ZipFile();
    directories.forEach((d) => archive.addEmptyDirectory(d));
    for (const [name, data] of files) {
        archive.addBuffer(Buffer.isBuffer(data) ? data : Buffer.from(data), name);
    }
    archive.end();
    const chunks: Buffer[] = [];
    for await (const chunk of archive.outputStream as AsyncIterable<Buffer>) {
        chunks.push(chunk);
    }
    return Buffer.concat(chunks);
};

const document = { $schema: 'https://schemas.hallmark.dev/config/v1/TrustListConfigFile.schema.json', spec: { id: 'a', url: 'https://trust.example.com/list' } };
const manifestFor = (extra: Partial<Manifest> = {}): Manifest => ({
    format: 'hallmark.config-bundle',
    formatVersion: 2,
    resources: [{ kind: 'TrustList', id: 'a', $schema: document.$schema, path: 'trust-lists/a.json', sha256: sha256Hex(jcs(document)) }],
    assets: [],
    requirements: [],
    warnings: [],
    ...extra
});
const json = (extra: Partial<JsonBundle> = {}, manifest: Partial<Manifest> = {}): JsonBundle => ({ manifest: manifestFor(manifest), documents: [{ path: 'trust-lists/a.json', document: document as never }], assets: [], ...extra });

const refusal = async (fn: () => unknown): Promise<BundleError> => {
    try {
        await fn();
    }
    catch (err) {
        return err as BundleError;
    }
    throw new Error('not refused');
};

describe('bundle format', () => {
    it('names what is wrong with a path', () => {
        expect(pathProblem('issuance/config.json')).to.be.undefined();
        expect(pathProblem('')).to.contain('1 to 512');
        expect(pathProblem('a'.repeat(513))).to.contain('1 to 512');
        expect(pathProblem('/etc/passwd')).to.contain('relative');
        expect(pathProblem('C:/x.json')).to.contain('relative');
        expect(pathProblem('a\\b.json')).to.contain('relative');
        expect(pathProblem('a//b.json')).to.contain('segments');
        expect(pathProblem('./a.json')).to.contain('segments');
        expect(pathProblem('a/../../b.json')).to.contain('segments');
        expect(pathProblem('a\u0001.json')).to.contain('control');
    });

    it('computes RFC 8785 canonical JSON', () => {
        expect(jcs({ b: 1, a: [true, null, 'x'], c: { z: 1.5, y: undefined } })).to.equal('{"a":[true,null,"x"],"b":1,"c":{"z":1.5}}');
        expect(jcs([undefined])).to.equal('[null]');
        expect(jcs({ '\u00e9': 1, e: 2, E: 3 })).to.equal('{"E":3,"e":2,"\u00e9":1}');
    });

    it('decodes a valid JSON bundle and digests it', () => {
        const bundle = decodeJsonBundle(json());
        expect(bundle.documents).to.have.length(1);
        expect(bundle.digest).to.match(/^[0-9a-f]{64}$/);
        expect(decodeJsonBundle(json()).digest).to.equal(bundle.digest);
    });

    it('refuses listings that are wrong in themselves', async () => {
        const invalid = await refusal(() => decodeJsonBundle(json({}, { format: 'other' })));
        expect(invalid.code).to.equal('BUNDLE_INVALID');
        expect(invalid.details![0]!.path).to.equal('manifest.format');
        const listing = await refusal(() => decodeJsonBundle(json({
            assets: [{ path: 'images/a.png', contentType: 'image/png', data: 'AA==' }, { path: 'images/a.png', contentType: 'image/png', data: 'AA==' }]
        }, {
            resources: [...manifestFor().resources, { ...manifestFor().resources[0]!, path: 'manifest.json', id: 'b' }, { ...manifestFor().resources[0]!, id: 'c' }],
            assets: [{ path: 'manifest.json', contentType: 'x/y', sha256: '0'.repeat(64) }, { path: 'trust-lists/a.json', contentType: 'x/y', sha256: '0'.repeat(64) }, { path: 'images/missing.png', contentType: 'x/y', sha256: '0'.repeat(64) }]
        })));
        const messages = listing.details!.map((d) => d.message).join('\n');
        expect(messages).to.contain('manifest.json is the manifest');
        expect(messages).to.contain('trust-lists/a.json is listed twice');
        expect(messages).to.contain('images/a.png appears twice');
        expect(messages).to.contain('images/a.png is not listed');
        expect(messages).to.contain('images/missing.png is listed but missing');
        const missing = await refusal(() => decodeJsonBundle(json({ documents: [] })));
        expect(missing.details![0]!.message).to.contain('listed but missing');
    });

    it('reads ZIP bundles: directories skipped, assets checked, every listed file present and valid JSON', async () => {
        const bytes = Buffer.from(JSON.stringify(document));
        const png = Buffer.from('png');
        const manifest = manifestFor({ resources: [{ ...manifestFor().resources[0]!, sha256: sha256Hex(bytes) }], assets: [{ path: 'images/a.png', contentType: 'image/png', sha256: sha256Hex(png) }] });
        const archive = await zip([['manifest.json', JSON.stringify(manifest)], ['trust-lists/a.json', bytes], ['images/a.png', png]], ['images/']);
        const good = await decodeZipBundle(archive);
        // Assets are hashed as they are read, and kept only when asked for (a bundle written again).
        expect(good.assets).to.equal([{ entry: manifest.assets[0]! }]);
        expect((await decodeZipBundle(archive, undefined, { keepAssets: true })).assets.map((a) => a.data!.toString())).to.equal(['png']);
        // From a file, the same.
        const file = Path.join(Os.tmpdir(), `bundle-${process.pid}.zip`);
        Fs.writeFileSync(file, archive);
        try {
            const fromFile = await decodeZipBundle({ file });
            expect(fromFile.digest).to.equal(good.digest);
            expect(fromFile.documents).to.equal(good.documents);
        }
        finally {
            Fs.rmSync(file, { force: true });
        }

        const broken = await refusal(async () => decodeZipBundle(await zip([['manifest.json', JSON.stringify(manifest)], ['images/a.png', 'other']])));
        const messages = broken.details!.map((d) => d.message).join('\n');
        expect(messages).to.contain('trust-lists/a.json is listed but missing');
        expect(messages).to.contain('images/a.png: checksum mismatch');
        const noAsset = await refusal(async () => decodeZipBundle(await zip([['manifest.json', JSON.stringify(manifest)], ['trust-lists/a.json', bytes]])));
        expect(noAsset.details![0]!.message).to.contain('images/a.png is listed but missing');
        const notJson = Buffer.from('{"spec": "secret-text"');
        const invalidJson = await refusal(async () => decodeZipBundle(await zip([['manifest.json', JSON.stringify(manifestFor({ resources: [{ ...manifestFor().resources[0]!, sha256: sha256Hex(notJson) }] }))], ['trust-lists/a.json', notJson]])));
        expect(invalidJson.details![0]!.message).to.contain('not valid JSON');
        expect(JSON.stringify(invalidJson.details)).to.not.contain('secret-text');
        const badManifest = await refusal(async () => decodeZipBundle(await zip([['manifest.json', '{']])));
        expect(badManifest.message).to.contain('manifest.json is not valid JSON');
    });

    it('enforces the archive limits before inflating', async () => {
        const archive = await zip([['a.json', '{}'], ['b.json', 'x'.repeat(1000)]]);
        const tooBig = await refusal(() => readZip(archive, { ...SPEC_ZIP_LIMITS, compressedBytes: 10 }));
        expect(tooBig.status).to.equal(413);
        const tooMany = await refusal(() => readZip(archive, { ...SPEC_ZIP_LIMITS, entries: 1 }));
        expect(tooMany.status).to.equal(413);
        expect(tooMany.message).to.contain('2 entries');
        const expands = await refusal(() => readZip(archive, { ...SPEC_ZIP_LIMITS, expandedBytes: 500 }));
        expect(expands.status).to.equal(413);
        expect((await readZip(archive)).get('b.json')!.data!.length).to.equal(1000);
        // Bytes are kept only for what `keep` names; every entry is hashed.
        const hashed = await readZip(archive, SPEC_ZIP_LIMITS, () => false);
        expect(hashed.get('b.json')!.data).to.not.exist();
        expect(hashed.get('b.json')!.sha256).to.equal(sha256Hex((await readZip(archive)).get('b.json')!.data!));
    });

    it('refuses an entry that inflates beyond the size its central directory declares', async () => {
        const archive = await zip([['a.bin', Buffer.alloc(100_000)]]);
        const central = archive.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]));
        archive.writeUInt32LE(10, central + 24);
        const lying = await refusal(() => readZip(archive));
        expect(lying.status).to.equal(400);
        expect(lying.code).to.equal('BUNDLE_INVALID');
    });
});
