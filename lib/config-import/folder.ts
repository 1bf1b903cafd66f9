import Fs from 'node:fs/promises';
import Path from 'node:path';
import type { ResourceKind } from '../registry/kind';

/** Reading CONFIG_FOLDER: which tenant folders there are, and which files a kind has in one of them. */

export interface TenantFolder {
    /** The directory name, which is the tenant id. */
    name: string;
    path: string;
}

export interface FolderFile {
    /** Relative to CONFIG_FOLDER with `/` separators, e.g. `acme/clients/web.json`: what messages name. */
    relative: string;
    path: string;
}

// stat, not lstat: symlinks count as what they point at (tenant folders are often mounted or linked).
const statOrUndefined = async (path: string) => Fs.stat(path).catch(() => undefined);

// Dot entries are tooling (.git) or mount machinery (Kubernetes `..data`), never tenants or documents.
const isHidden = (name: string) => name.startsWith('.');

/** The tenant folders directly under `root`, sorted by name; undefined when `root` is not a directory. */
export const listTenantFolders = async (root: string): Promise<{ tenants: TenantFolder[]; ignored: string[] } | undefined> => {
    const stat = await statOrUndefined(root);
    if (!stat?.isDirectory()) {
        return undefined;
    }
    const tenants: TenantFolder[] = [];
    const ignored: string[] = [];
    for (const name of (await Fs.readdir(root)).sort()) {
        const path = Path.join(root, name);
        const entry = isHidden(name) ? undefined : await statOrUndefined(path);
        if (entry?.isDirectory()) {
            tenants.push({ name, path });
        }
        else if (!entry && !isHidden(name)) {
            ignored.push(name);
        }
    }
    return { tenants, ignored };
};

const segments = (location: string) => location.split('/').filter(Boolean);

/** The files of one kind in a tenant folder: its one file, or every `*.json` in its directory sorted by name. */
export const kindFiles = async (tenant: TenantFolder, kind: ResourceKind): Promise<FolderFile[]> => {
    const at = (parts: string[]): FolderFile => ({ relative: [tenant.name, ...parts].join('/'), path: Path.join(tenant.path, ...parts) });
    if ('file' in kind.location) {
        const file = at(segments(kind.location.file));
        return (await statOrUndefined(file.path))?.isFile() ? [file] : [];
    }
    const dir = segments(kind.location.dir);
    const names = await Fs.readdir(Path.join(tenant.path, ...dir)).catch(() => [] as string[]);
    const files: FolderFile[] = [];
    for (const name of names.filter((n) => n.endsWith('.json') && !isHidden(n)).sort()) {
        const file = at([...dir, name]);
        if ((await statOrUndefined(file.path))?.isFile()) {
            files.push(file);
        }
    }
    return files;
};

/** The parsed JSON of a file; error messages never quote its content (the caller adds the file name). */
export const readJsonFile = async (file: FolderFile): Promise<unknown> => {
    let text: string;
    try {
        text = await Fs.readFile(file.path, 'utf8');
    }
    catch (err) {
        throw new Error(`cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
    try {
        return JSON.parse(text);
    }
    catch (err) {
        // V8 appends a quote of the text, which may hold a secret; the part before it names the token or position.
        const reason = (err as Error).message.replace(/, ".*" is not valid JSON$/s, '');
        throw new Error(`not valid JSON (${reason})`);
    }
};
