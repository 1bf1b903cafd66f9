// Lint: typescript-eslint's recommended rules (syntax only, so a run stays fast) plus the hapi rules that match
// this code base's style (hapi's no-arrowception is left out: curried factories `(options) => (config) => …` are this
// code base's way of building handlers and manifests). `npm test` runs it before the type check. The rules apply to TypeScript files; lab's coverage
// instrumenter asks this configuration how to parse the transpiled JavaScript, so `*.js` gets the parser settings of
// hapi's module configuration (what lab uses when a project has no configuration of its own).
import babelParser from '@babel/eslint-parser';
import hapi from '@hapi/eslint-plugin';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
    { ignores: ['dist/**', 'node_modules/**', 'tmp/**', 'logs/**'] },
    {
        files: ['**/*.js'],
        languageOptions: { parser: babelParser, parserOptions: { requireConfigFile: false }, ecmaVersion: 2022, sourceType: 'script' }
    },
    {
        files: ['**/*.ts'],
        extends: [js.configs.recommended, ...tseslint.configs.recommended],
        plugins: { '@hapi': hapi },
        rules: {
            '@hapi/capitalize-modules': ['error', 'global-scope-only'],
            '@hapi/no-var': 'error',
            'eqeqeq': ['error', 'always', { null: 'ignore' }],
            'no-console': 'error',
            'prefer-const': 'error',
            'no-throw-literal': 'error',
            // require() is deliberate where it stays: modules loaded on first use (start-up memory), the ESM-only
            // graphile-worker loaded from CommonJS, manifests and fixtures named by path at run time.
            '@typescript-eslint/no-require-imports': 'off',
            '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
            // `any` is allowed where a library or a JSON document leaves the type open; casts are reviewed by hand.
            '@typescript-eslint/no-explicit-any': 'off'
        }
    },
    {
        // Test fixtures stand for other programs (a KMS server, an identity provider) and may talk to the console.
        files: ['test/fixtures/**/*.ts'],
        rules: { 'no-console': 'off' }
    }
);
