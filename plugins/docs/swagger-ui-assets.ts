/**
 * hapi-swagger only needs the folder of swagger-ui-dist's static files, but requiring the package's main module
 * loads its browser bundles into the server (~40 MiB resident). Seed the module cache with the one function used.
 * Must be imported before hapi-swagger.
 */
const main = require.resolve('swagger-ui-dist');
const getAbsoluteFSPath = require('swagger-ui-dist/absolute-path.js') as () => string;

if (!require.cache[main]) {
    const stub = new (require('node:module') as typeof import('node:module'))(main);
    stub.filename = main;
    stub.loaded = true;
    stub.exports = { getAbsoluteFSPath, absolutePath: getAbsoluteFSPath };
    require.cache[main] = stub;
}

export {};
