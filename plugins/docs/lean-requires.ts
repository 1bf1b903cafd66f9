import Module from 'node:module';

/**
 * hapi-swagger requires modules this service never uses at run time, and they cost ~40 MiB of memory:
 * - swagger-ui-dist's main module loads its browser bundles, while hapi-swagger only needs the folder of the
 *   static files (getAbsoluteFSPath);
 * - swagger-parser (with ajv, validator, js-yaml) is used only with the `debug` option, and
 *   json-schema-ref-parser only with `deReference`; neither is set here.
 * The module cache is seeded with small stand-ins before hapi-swagger is loaded. Must be imported before it.
 */
const seed = (request: string, exports: unknown): void => {
    const resolved = require.resolve(request, { paths: [require.resolve('hapi-swagger')] });
    if (!require.cache[resolved]) {
        const stub = new Module(resolved);
        stub.filename = resolved;
        stub.loaded = true;
        stub.exports = exports;
        require.cache[resolved] = stub;
    }
};

const unused = (option: string) => () => {
    throw new Error(`hapi-swagger's ${option} option is not available in this service`);
};

const getAbsoluteFSPath = require('swagger-ui-dist/absolute-path.js') as () => string;
seed('swagger-ui-dist', { getAbsoluteFSPath, absolutePath: getAbsoluteFSPath });
seed('swagger-parser', { validate: unused('debug') });
seed('@apidevtools/json-schema-ref-parser', { dereference: unused('deReference') });

export {};
