import { execFileSync } from 'node:child_process';
import Fs from 'node:fs';
import Os from 'node:os';
import Path from 'node:path';
import { nameOf, resolvePlugin, type Manifest, type ManifestEntry } from '../../lib/compose';
import { projectRoot } from '../../lib/package-info';
import type { Config } from '../../manifests/environment';
import { manifest as defaultManifest } from '../../manifests/default';

/**
 * The operator console's assets, built once per test run (node console/build.mjs, esbuild: under a second) into a
 * temporary folder, so tests never depend on an earlier `npm run build` and never touch a developer's dist/.
 */
let built: string | undefined;
export const buildConsole = (): string => {
    if (!built) {
        built = Fs.mkdtempSync(Path.join(Os.tmpdir(), 'hallmark-console-'));
        execFileSync(process.execPath, [Path.join(projectRoot, 'console', 'build.mjs'), built], { stdio: 'pipe' });
    }
    return built;
};

/** The default manifest with the console plugin's options replaced (e.g. the assets a test built). */
export const withConsoleOptions = (options: Record<string, unknown>) => (config: Config): Manifest => {
    const base = defaultManifest(config);
    const isConsole = (entry: ManifestEntry) => nameOf(resolvePlugin(entry)) === 'hallmark-console';
    return { ...base, plugins: base.plugins.map((entry) => isConsole(entry) ? { ...entry, options: { ...entry.options, ...options } } : entry) };
};
