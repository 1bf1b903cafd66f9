import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { matchDcql, type PresentedCredential } from '../../plugins/oid4vp/services/dcql';

/** matchDcql with its parsed queries kept: each answer follows the query it is given, asked again or changed. */

export const lab = Lab.script();
const { describe, it } = lab;

const query = (claims: string[]) => ({
    credentials: [{ id: 'pid', format: 'dc+sd-jwt', meta: { vct_values: ['urn:eudi:pid:1'] }, claims: claims.map((name) => ({ path: [name] })) }]
});

const presented = (claims: Record<string, unknown>): PresentedCredential[] =>
    [{ queryId: 'pid', format: 'dc+sd-jwt', vct: 'urn:eudi:pid:1', claims, raw: 'raw', keyBound: true }];

describe('oid4vp dcql matching', () => {
    it('answers each response by the query it is given, the same query asked again or another one', () => {
        const names = query(['given_name', 'family_name']);
        expect(matchDcql(names, presented({ given_name: 'Erika', family_name: 'Mustermann' }))).to.equal({ ok: true });
        // The same query again (its parsed form is kept): a response without a requested claim still fails.
        expect(matchDcql(query(['given_name', 'family_name']), presented({ given_name: 'Erika' }))).to.equal({ ok: false, message: 'Missing required claims for credential \'pid\'' });
        expect(matchDcql(names, presented({ given_name: 'Erika', family_name: 'Mustermann' }))).to.equal({ ok: true });
        // Another query with the same credential id: its own claims count, not the kept query's.
        expect(matchDcql(query(['birthdate']), presented({ given_name: 'Erika', family_name: 'Mustermann' }))).to.equal({ ok: false, message: 'Missing required claims for credential \'pid\'' });
        expect(matchDcql(query(['given_name']), presented({ given_name: 'Erika' }))).to.equal({ ok: true });
    });

    it('still checks values and missing credentials on a kept query', () => {
        const withValues = { credentials: [{ id: 'pid', format: 'dc+sd-jwt', meta: { vct_values: ['urn:eudi:pid:1'] }, claims: [{ path: ['nationality'], values: ['DE'] }] }] };
        expect(matchDcql(withValues, presented({ nationality: 'DE' }))).to.equal({ ok: true });
        expect(matchDcql(withValues, presented({ nationality: 'FR' })).ok).to.be.false();
        expect(matchDcql(withValues, presented({ nationality: 'FR' }))).to.include({ code: 'claim_value_mismatch' });
        expect(matchDcql(withValues, [])).to.equal({ ok: false, message: 'Missing required credentials' });
    });
});
