// Lets child processes in tests run the TypeScript sources directly, as lab --typescript does in-process.
const Module = require('node:module');
const Fs = require('node:fs');
const { extensions } = require('@hapi/lab/lib/modules/typescript');

for (const { ext, transform } of extensions) {
    require.extensions[ext] = (module, filename) => {
        module._compile(transform(Fs.readFileSync(filename, 'utf8'), filename), filename);
    };
}
module.exports = Module;
