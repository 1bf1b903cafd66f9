import * as Lab from '@hapi/lab';
import { expect } from '@hapi/code';
import { substitutePlaceholders } from '../../lib/config-import/placeholders';

export const lab = Lab.script();
const { describe, it } = lab;

describe('substitutePlaceholders', () => {
    it('replaces ${VAR} inside and around other text', () => {
        const result = substitutePlaceholders('https://${HOST}:${PORT}/x', { HOST: 'example.org', PORT: '8443' });
        expect(result).to.equal({ value: 'https://example.org:8443/x', unresolved: [] });
    });

    it('uses the default of ${VAR:default} only when the variable is unset or empty', () => {
        const value = { a: '${A:one}', b: '${B:two}', c: '${C:three}', d: '${D:}' };
        expect(substitutePlaceholders(value, { A: 'set', B: '' })).to.equal({ value: { a: 'set', b: 'two', c: 'three', d: '' }, unresolved: [] });
    });

    it('keeps defaults holding colons and spaces', () => {
        expect(substitutePlaceholders('${URL:http://localhost:3000/a b}', {}).value).to.equal('http://localhost:3000/a b');
    });

    it('reports unset and empty variables without default and keeps their literal text', () => {
        const result = substitutePlaceholders({ x: '${MISSING}', y: ['${EMPTY}', '${MISSING}-again'] }, { EMPTY: '' });
        expect(result.value).to.equal({ x: '${MISSING}', y: ['${EMPTY}', '${MISSING}-again'] });
        expect(result.unresolved).to.equal(['MISSING', 'EMPTY']);
    });

    it('substitutes once: a value holding ${...} is not expanded again', () => {
        const result = substitutePlaceholders('${OUTER}', { OUTER: '${INNER}', INNER: 'no' });
        expect(result).to.equal({ value: '${INNER}', unresolved: [] });
    });

    it('walks nested objects and arrays, leaving keys and non-strings alone', () => {
        const input = { '${KEY}': { list: [1, true, null, '${V}', { deep: '${V}' }] }, n: 3 };
        const result = substitutePlaceholders(input, { KEY: 'k', V: 'v' });
        expect(result.value).to.equal({ '${KEY}': { list: [1, true, null, 'v', { deep: 'v' }] }, n: 3 });
        expect(input['${KEY}'].list[3]).to.equal('${V}');
    });

    it('only knows uppercase letters, digits and _ in names', () => {
        const result = substitutePlaceholders('${lower} ${MIXED_case} ${A_1} $A {B}', { lower: 'x', A_1: 'ok' });
        expect(result).to.equal({ value: '${lower} ${MIXED_case} ok $A {B}', unresolved: [] });
    });

    it('passes scalars through', () => {
        expect(substitutePlaceholders(42, {})).to.equal({ value: 42, unresolved: [] });
        expect(substitutePlaceholders(null, {})).to.equal({ value: null, unresolved: [] });
    });
});
