import Crypto from 'node:crypto';
import Fs from 'node:fs';
import Yauzl from 'yauzl';
import Yazl from 'yazl';
import { bundleInvalid, bundleTooLarge } from './errors';

/**
 * ZIP bundles. Reading uses yauzl: it reads the central directory first (so the entry count and declared sizes are
 * known before anything is inflated), refuses entry names that are absolute or climb out with `..`, and with
 * validateEntrySizes stops an entry that inflates beyond its declared size. Writing uses yazl, its companion.
 */

export interface ZipLimits {
    /** Bytes of the archive itself. */
    compressedBytes: number;
    /** Bytes of all entries once inflated. */
    expandedBytes: number;
    entries: number;
}

export const SPEC_ZIP_LIMITS: ZipLimits = { compressedBytes: 50 * 1024 * 1024, expandedBytes: 100 * 1024 * 1024, entries: 10_000 };

const MiB = (n: number) => `${Math.round(n / 1024 / 1024)} MiB`;

/** A relative path of a bundle: `/`-separated, no empty, `.` or `..` segment, no backslash or drive letter. */
export const pathProblem = (path: string): string | undefined => {
    if (!path || path.length > 512) {
        return 'must be 1 to 512 characters';
    }
    if (path.startsWith('/') || /^[A-Za-z]:/.test(path) || path.includes('\\')) {
        return 'must be relative, with / separators';
    }
    if (path.split('/').some((segment) => segment === '' || segment === '.' || segment === '..')) {
        return 'must not have empty, . or .. segments';
    }
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f]/.test(path)) {
        return 'must not contain control characters';
    }
    return undefined;
};

/** A file of an archive: its SHA-256 (hex), and its bytes when the reader asked to keep them. */
export interface ZipFileEntry {
    sha256: string;
    data?: Buffer;
}

/**
 * Every file of the archive by path; directories are left out. Throws BundleError (413 over a limit, 400 otherwise).
 * The archive is a buffer or a file (read where needed, never whole); each entry is hashed as it is inflated, and its
 * bytes kept only when `keep` says so, so a large asset costs no memory.
 */
export const readZip = async (archive: Buffer | { file: string }, limits: ZipLimits = SPEC_ZIP_LIMITS, keep: (path: string) => boolean = () => true): Promise<Map<string, ZipFileEntry>> => {
    const size = Buffer.isBuffer(archive) ? archive.length : (await Fs.promises.stat(archive.file)).size;
    if (size > limits.compressedBytes) {
        throw bundleTooLarge(`The archive is larger than ${MiB(limits.compressedBytes)}`);
    }
    let zip: Yauzl.ZipFile;
    try {
        const options = { lazyEntries: true, validateEntrySizes: true, strictFileNames: true, decodeStrings: true };
        zip = Buffer.isBuffer(archive) ? await Yauzl.fromBufferPromise(archive, options) : await Yauzl.openPromise(archive.file, options);
    }
    catch (err) {
        throw bundleInvalid('The bundle is not a readable ZIP archive', [{ path: '', message: (err as Error).message }]);
    }
    try {
        if (zip.entryCount > limits.entries) {
            throw bundleTooLarge(`The archive has ${zip.entryCount} entries; at most ${limits.entries} are allowed`);
        }
        const files = new Map<string, ZipFileEntry>();
        let declared = 0;
        let expanded = 0;
        try {
            for await (const entry of zip.eachEntry()) {
                const name = entry.fileName;
                if (name.endsWith('/')) {
                    continue;
                }
                const problem = pathProblem(name);
                if (problem) {
                    throw bundleInvalid(`Archive entry ${JSON.stringify(name)} ${problem}`, [{ path: name, message: problem }]);
                }
                if (files.has(name)) {
                    throw bundleInvalid(`Archive entry ${name} appears twice`, [{ path: name, message: 'duplicate entry' }]);
                }
                // The declared sizes come from the central directory: a bomb is refused before anything is inflated.
                declared += entry.uncompressedSize;
                if (declared > limits.expandedBytes) {
                    throw bundleTooLarge(`The archive expands to more than ${MiB(limits.expandedBytes)}`);
                }
                const kept = keep(name);
                const chunks: Buffer[] = [];
                const hash = Crypto.createHash('sha256');
                const stream = await zip.openReadStreamPromise(entry);
                for await (const chunk of stream as AsyncIterable<Buffer>) {
                    // validateEntrySizes stops an entry that lies about its size; this bounds the total as well.
                    expanded += chunk.length;
                    if (expanded > limits.expandedBytes) {
                        stream.destroy();
                        throw bundleTooLarge(`The archive expands to more than ${MiB(limits.expandedBytes)}`);
                    }
                    hash.update(chunk);
                    if (kept) {
                        chunks.push(chunk);
                    }
                }
                files.set(name, { sha256: hash.digest('hex'), ...(kept ? { data: Buffer.concat(chunks) } : {}) });
            }
        }
        catch (err) {
            if (err instanceof Error && err.name === 'BundleError') {
                throw err;
            }
            throw bundleInvalid('The bundle is not a readable ZIP archive', [{ path: '', message: (err as Error).message }]);
        }
        return files;
    }
    finally {
        zip.close();
    }
};

/** A ZIP archive of the given files, in the given order. */
export const writeZip = async (files: Array<{ path: string; data: Buffer }>, mtime: Date): Promise<Buffer> => {
    const zip = new Yazl.ZipFile();
    for (const file of files) {
        zip.addBuffer(file.data, file.path, { mtime, compress: true });
    }
    zip.end();
    const chunks: Buffer[] = [];
    for await (const chunk of zip.outputStream as AsyncIterable<Buffer>) {
        chunks.push(chunk);
    }
    return Buffer.concat(chunks);
};
