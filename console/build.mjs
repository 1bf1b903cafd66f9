// Builds the operator console into dist/console: esbuild bundles src/main.ts (with the QR encoder, uqr) and
// src/console.css into content-hashed files under assets/, and index.html is written with their names. Why esbuild:
// one well-kept package with no dependencies of its own that bundles TypeScript and CSS in well under a second; the
// console has no framework, so nothing more is needed. Types are checked by `tsc -p console/tsconfig.json`
// (part of `npm run build`). Usage: node console/build.mjs [outdir]
import Fs from 'node:fs';
import Path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const here = Path.dirname(fileURLToPath(import.meta.url));
const out = Path.resolve(process.argv[2] ?? Path.join(here, '..', 'dist', 'console'));
const assets = Path.join(out, 'assets');

Fs.rmSync(out, { recursive: true, force: true });
const result = await esbuild.build({
    entryPoints: [Path.join(here, 'src', 'main.ts'), Path.join(here, 'src', 'console.css')],
    bundle: true,
    minify: true,
    sourcemap: 'linked',
    format: 'esm',
    target: ['es2022', 'chrome109', 'firefox115', 'safari16'],
    outdir: assets,
    entryNames: '[name]-[hash]',
    metafile: true,
    logLevel: 'warning'
});
const outputs = Object.entries(result.metafile.outputs).filter(([, o]) => o.entryPoint).map(([file]) => Path.basename(file));
const js = outputs.find((f) => f.endsWith('.js'));
const css = outputs.find((f) => f.endsWith('.css'));
const html = Fs.readFileSync(Path.join(here, 'index.html'), 'utf8').replace('{{js}}', js).replace('{{css}}', css);
Fs.writeFileSync(Path.join(out, 'index.html'), html);
