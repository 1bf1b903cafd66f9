import Crypto from 'node:crypto';
import * as Lab from '@hapi/lab';
import { expect } from '@hapi/code';
import * as X509 from '@peculiar/x509';
import type { ErrorDetail } from '../../lib/errors';
import { presentationConfigKind, withTenantUrl, type PresentationConfig, type PresentationConfigInput } from '../../resources/presentation-config';
import { checkTransactionDataCredentialIds } from '../../resources/presentation/transaction-data';
import { TS12_TRANSACTION_TYPES } from '../../resources/presentation/ts12';
import { trustListKind, type TrustList } from '../../resources/trust-list';
import { webhookEndpointKind } from '../../resources/webhook-endpoint';
import { validationRegistry, variant } from '../helpers/kind-validation';

export const lab = Lab.script();
const { describe, it, before } = lab;

const { registry, valid, problems, paths } = validationRegistry([webhookEndpointKind, trustListKind, presentationConfigKind]);

const schemaOf = (version: number) => `https://schemas.hallmark.dev/config/v${version}/PresentationConfigFile.schema.json`;

// A certificate's DER in base64 only has to look like base64 here.
const VERIFIER_DER = Buffer.from('verifier certificate DER stand-in').toString('base64');

/** A realistic PID request: SD-JWT VC, claim sets, values of every type, all three kinds of trusted authorities. */
const pid: PresentationConfig = {
    id: 'pid-age-check',
    description: 'Age and name check with the PID',
    lifeTime: 600,
    skewSeconds: 30,
    statusCheckMode: 'strict',
    dcql_query: {
        credentials: [
            {
                id: 'pid',
                format: 'dc+sd-jwt',
                meta: { vct_values: ['urn:eudi:pid:1', '<TENANT_URL>/credentials/pid'] },
                claims: [
                    { id: 'given_name', path: ['given_name'] },
                    { id: 'family_name', path: ['family_name'] },
                    { id: 'birthdate', path: ['birthdate'] },
                    { id: 'over_18', path: ['age_equal_or_over', '18'], values: [true] },
                    { id: 'country', path: ['address', 'country'], values: ['DE', 'AT', 'NL'] },
                    { id: 'birth_year', path: ['age_birth_year'], values: [1990, 1991, 1992] },
                    { id: 'nationalities', path: ['nationalities', null] },
                    { id: 'first_nationality', path: ['nationalities', 0] }
                ],
                claim_sets: [
                    ['given_name', 'family_name', 'over_18'],
                    ['given_name', 'family_name', 'birthdate']
                ],
                trusted_authorities: [
                    {
                        type: 'etsi_tl',
                        values: [
                            { trustListId: 'eu-pid-providers' },
                            { url: 'https://tl.example.eu/pid-providers.xml' },
                            { verifierX509Der: VERIFIER_DER },
                            { verifierKey: { kty: 'EC', crv: 'P-256', x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU', y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0' } }
                        ]
                    },
                    { type: 'openid_federation', values: ['https://federation.example.eu'] },
                    { type: 'aki', values: ['s9tIpPmhxdiuNkHMEWNpYim8S8Y'] }
                ],
                multiple: false
            }
        ],
        credential_sets: [{ options: [['pid']], required: true }]
    },
    registration_cert: {
        jwt: 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJyZWdpc3RyYXRpb24ifQ.c2ln',
        body: {
            privacy_policy: 'https://shop.example.com/privacy',
            support_uri: 'https://shop.example.com/support',
            purpose: [{ lang: 'en', content: 'Age verification' }, { lang: 'de', content: 'Altersprüfung' }],
            credentials: [{ format: 'dc+sd-jwt', meta: { vct_values: ['urn:eudi:pid:1'] }, claims: [{ path: ['age_equal_or_over', '18'] }] }],
            provides_attestations: []
        }
    },
    webhookEndpointId: 'shop-results',
    attached: [{ format: 'registration_cert', data: { note: 'stored only' }, credential_ids: ['pid'] }],
    redirectUri: 'https://shop.example.com/checkout/{sessionId}/done',
    accessKeyChainId: 'shop-access',
    readerAuth: null
};

/** An mDL request. */
const mdl: PresentationConfig = {
    id: 'mdl-check',
    dcql_query: {
        credentials: [
            {
                id: 'mdl',
                format: 'mso_mdoc',
                meta: { doctype_value: 'org.iso.18013.5.1.mDL' },
                claims: [
                    { id: 'family_name', path: ['org.iso.18013.5.1', 'family_name'], intent_to_retain: false },
                    { id: 'portrait', path: ['org.iso.18013.5.1', 'portrait'], intent_to_retain: true },
                    { id: 'age_over_21', path: ['org.iso.18013.5.1', 'age_over_21'], values: [true] },
                    { path: ['org.iso.18013.5.1', 'driving_privileges'] }
                ],
                claim_sets: [['family_name', 'age_over_21'], ['portrait']]
            }
        ]
    },
    readerAuth: true
};

/** A TS12 payment confirmation bound to a payment card credential. */
const payment: PresentationConfig = {
    id: 'card-payment',
    dcql_query: {
        credentials: [{ id: 'card', format: 'dc+sd-jwt', meta: { vct_values: ['https://credentials.example.com/card'] }, claims: [{ path: ['pan_last_four'] }] }]
    },
    transaction_data: [{
        type: 'urn:eudi:sca:payment:1',
        credential_ids: ['card'],
        transaction_data_hashes_alg: ['sha-256'],
        payload: {
            transaction_id: '8D8AC610-566D-4EF0-9C22-186B2A5ED793',
            date_time: '2025-11-13T20:20:39+00:00',
            payee: { name: 'Awesome Merchant', id: 'DE12ZZZ00000012345', website: 'https://merchant.example.com' },
            currency: 'EUR',
            amount: 1595.5,
            sct_inst: true,
            recurrence: { start_date: '2026-01-01', number: 12, frequency: 'MNTH', mit_options: { amount_variable: true, max_amount: 2000 } }
        }
    }]
};

const ts12 = (type: string, payload: unknown) => ({ ...payment, transaction_data: [{ type, credential_ids: ['card'], payload }] });

describe('PresentationConfig', () => {
    it('accepts a realistic PID SD-JWT configuration as given, filling in only the defaults', () => {
        const spec = valid(presentationConfigKind, pid);
        expect<unknown>(spec).to.equal(pid);
        expect(spec.dcql_query.credentials).to.equal(pid.dcql_query.credentials);
        // Values keep their types.
        expect(spec.dcql_query.credentials[0]!.claims!.map((c) => c.values)).to.equal([undefined, undefined, undefined, [true], ['DE', 'AT', 'NL'], [1990, 1991, 1992], undefined, undefined]);
        expect(spec.dcql_query.credential_sets).to.equal([{ options: [['pid']], required: true }]);
        expect(presentationConfigKind.id(spec)).to.equal('pid-age-check');
    });

    it('accepts an mDL configuration and fills in the defaults', () => {
        const spec = valid(presentationConfigKind, mdl);
        expect<unknown>(spec).to.equal({ ...mdl, lifeTime: 300, skewSeconds: 60 });
        expect(valid(presentationConfigKind, { ...mdl, readerAuth: undefined }).readerAuth).to.equal(false);
        const sets = valid(presentationConfigKind, variant(mdl, (c) => (c.dcql_query.credential_sets = [{ options: [['mdl']] }])));
        expect(sets.dcql_query.credential_sets).to.equal([{ options: [['mdl']], required: true }]);
    });

    it('accepts the nullable fields as null', () => {
        const nulls = { description: null, transaction_data: null, registration_cert: null, webhookEndpointId: null, attached: null, redirectUri: null, accessKeyChainId: null, readerAuth: null };
        expect(valid(presentationConfigKind, { ...mdl, ...nulls })).to.contain(nulls);
    });

    it('leaves the validated input untouched', () => {
        const input = structuredClone(pid);
        valid(presentationConfigKind, input);
        expect<unknown>(input).to.equal(pid);
    });

    describe('rejects, naming the failing path', () => {
        const pidQuery = (change: (query: any) => void) => variant(pid, (c) => change(c.dcql_query.credentials[0]));

        it('a query without credential queries', () => {
            expect(problems(presentationConfigKind, variant(pid, (c) => (c.dcql_query.credentials = []))))
                .to.equal([{ path: 'dcql_query.credentials', message: '"dcql_query.credentials" must contain at least 1 items' }]);
            expect(paths(presentationConfigKind, variant(pid, (c) => delete c.dcql_query.credentials))).to.equal(['dcql_query.credentials']);
            expect(paths(presentationConfigKind, variant(pid, (c) => delete c.dcql_query))).to.equal(['dcql_query']);
        });

        it('credential query ids with other characters than letters, digits, _ and -', () => {
            for (const id of ['pid query', 'pid.1', 'pid/1', '']) {
                expect(paths(presentationConfigKind, pidQuery((q) => (q.id = id)))).to.equal(['dcql_query.credentials.0.id']);
            }
            expect(problems(presentationConfigKind, pidQuery((q) => (q.id = 'pid!')))).to.equal([{
                path: 'dcql_query.credentials.0.id',
                message: '"dcql_query.credentials[0].id" must contain only letters, digits, _ and -'
            }]);
            expect(valid(presentationConfigKind, variant(mdl, (c) => (c.dcql_query.credentials[0].id = 'Mdl_2-b'))).dcql_query.credentials[0]!.id).to.equal('Mdl_2-b');
        });

        it('duplicate credential query ids', () => {
            const spec = variant(pid, (c) => c.dcql_query.credentials.push({ ...mdl.dcql_query.credentials[0], id: 'pid' }));
            expect(problems(presentationConfigKind, spec)).to.equal([{ path: 'dcql_query.credentials.1.id', message: '"dcql_query.credentials[1].id" repeats the id of credentials[0]' }]);
        });

        it('a credential query without meta, in either format', () => {
            expect(problems(presentationConfigKind, pidQuery((q) => delete q.meta))).to.equal([{ path: 'dcql_query.credentials.0.meta', message: '"dcql_query.credentials[0].meta" is required' }]);
            expect(paths(presentationConfigKind, variant(mdl, (c) => delete c.dcql_query.credentials[0].meta))).to.equal(['dcql_query.credentials.0.meta']);
            expect(paths(presentationConfigKind, variant(mdl, (c) => (c.dcql_query.credentials[0].meta = {})))).to.equal(['dcql_query.credentials.0.meta.doctype_value']);
            // Each format has its own meta.
            expect(paths(presentationConfigKind, variant(mdl, (c) => (c.dcql_query.credentials[0].meta = { vct_values: ['urn:x'] })))).to.only.include([
                'dcql_query.credentials.0.meta.doctype_value',
                'dcql_query.credentials.0.meta.vct_values'
            ]);
        });

        it('empty or missing vct_values', () => {
            expect(problems(presentationConfigKind, pidQuery((q) => (q.meta.vct_values = [])))).to.equal([{
                path: 'dcql_query.credentials.0.meta.vct_values',
                message: '"dcql_query.credentials[0].meta.vct_values" must contain at least 1 items'
            }]);
            expect(paths(presentationConfigKind, pidQuery((q) => (q.meta = {})))).to.equal(['dcql_query.credentials.0.meta.vct_values']);
            expect(paths(presentationConfigKind, pidQuery((q) => (q.meta.vct_values = 'urn:eudi:pid:1')))).to.equal(['dcql_query.credentials.0.meta.vct_values']);
        });

        it('an unknown format', () => {
            expect(problems(presentationConfigKind, pidQuery((q) => (q.format = 'jwt_vc_json')))).to.equal([{
                path: 'dcql_query.credentials.0.format',
                message: '"dcql_query.credentials[0].format" must be one of [mso_mdoc, dc+sd-jwt]'
            }]);
        });

        it('duplicate claim ids in one credential query', () => {
            expect(problems(presentationConfigKind, pidQuery((q) => (q.claims[6].id = 'given_name')))).to.equal([{
                path: 'dcql_query.credentials.0.claims.6.id',
                message: '"dcql_query.credentials[0].claims[6].id" repeats the id of claims[0]'
            }]);
            // Unique per query: another query may use the same claim ids.
            const two = variant(pid, (c) => c.dcql_query.credentials.push({ ...structuredClone(pid.dcql_query.credentials[0]), id: 'pid2' }));
            expect(valid(presentationConfigKind, two).dcql_query.credentials).to.have.length(2);
        });

        it('claim_sets naming a claim id the query does not have', () => {
            expect(problems(presentationConfigKind, pidQuery((q) => (q.claim_sets[1][2] = 'birth_date')))).to.equal([{
                path: 'dcql_query.credentials.0.claim_sets.1.2',
                message: '"dcql_query.credentials[0].claim_sets[1][2]" names no claim id of this credential query'
            }]);
            // A claim id of another credential query does not count.
            const other = variant(mdl, (c) => {
                c.dcql_query.credentials.push(structuredClone(pid.dcql_query.credentials[0]));
                c.dcql_query.credentials[0].claim_sets = [['family_name', 'given_name']];
            });
            expect(paths(presentationConfigKind, other)).to.equal(['dcql_query.credentials.0.claim_sets.0.1']);
            expect(paths(presentationConfigKind, variant(mdl, (c) => (c.dcql_query.credentials[0].claim_sets = [[]])))).to.equal(['dcql_query.credentials.0.claim_sets.0']);
        });

        it('an empty values array', () => {
            expect(problems(presentationConfigKind, pidQuery((q) => (q.claims[3].values = [])))).to.equal([{
                path: 'dcql_query.credentials.0.claims.3.values',
                message: '"dcql_query.credentials[0].claims[3].values" must contain at least 1 items'
            }]);
        });

        it('values entries that are not strings, integers or booleans', () => {
            expect(problems(presentationConfigKind, pidQuery((q) => (q.claims[3].values = [true, { value: true }])))).to.equal([{
                path: 'dcql_query.credentials.0.claims.3.values.1',
                message: '"dcql_query.credentials[0].claims[3].values[1]" must be a string, an integer or a boolean'
            }]);
            for (const bad of [null, 1.5, ['DE']]) {
                expect(paths(presentationConfigKind, pidQuery((q) => (q.claims[4].values = ['DE', bad])))).to.equal(['dcql_query.credentials.0.claims.4.values.1']);
            }
        });

        it('intent_to_retain in the dc+sd-jwt shape', () => {
            expect(problems(presentationConfigKind, pidQuery((q) => (q.claims[0].intent_to_retain = true)))).to.equal([{
                path: 'dcql_query.credentials.0.claims.0.intent_to_retain',
                message: '"dcql_query.credentials[0].claims[0].intent_to_retain" is not allowed'
            }]);
        });

        it('claim paths that are empty or hold other than strings, integers >= 0 and null', () => {
            expect(paths(presentationConfigKind, pidQuery((q) => (q.claims[0].path = [])))).to.equal(['dcql_query.credentials.0.claims.0.path']);
            expect(paths(presentationConfigKind, pidQuery((q) => (q.claims[6].path = ['nationalities', -1])))).to.equal(['dcql_query.credentials.0.claims.6.path.1']);
            expect(paths(presentationConfigKind, pidQuery((q) => (q.claims[6].path = ['nationalities', true])))).to.equal(['dcql_query.credentials.0.claims.6.path.1']);
            expect(paths(presentationConfigKind, pidQuery((q) => delete q.claims[0].path))).to.equal(['dcql_query.credentials.0.claims.0.path']);
        });

        it('trusted authorities of an unknown type or with values of the wrong shape', () => {
            const authority = (i: number, change: (a: any) => void) => pidQuery((q) => change(q.trusted_authorities[i]));
            expect(problems(presentationConfigKind, authority(0, (a) => (a.type = 'x509')))).to.equal([{
                path: 'dcql_query.credentials.0.trusted_authorities.0.type',
                message: '"dcql_query.credentials[0].trusted_authorities[0].type" must be one of [aki, etsi_tl, openid_federation]'
            }]);
            expect(paths(presentationConfigKind, authority(0, (a) => (a.values = ['https://tl.example.eu/pid.xml'])))).to.equal(['dcql_query.credentials.0.trusted_authorities.0.values.0']);
            expect(paths(presentationConfigKind, authority(0, (a) => (a.values = [{}])))).to.equal(['dcql_query.credentials.0.trusted_authorities.0.values.0']);
            expect(paths(presentationConfigKind, authority(0, (a) => (a.values[2].verifierX509Der = 'not base64!')))).to.equal(['dcql_query.credentials.0.trusted_authorities.0.values.2.verifierX509Der']);
            expect(paths(presentationConfigKind, authority(0, (a) => (a.values[3].verifierKey.d = 'private')))).to.equal(['dcql_query.credentials.0.trusted_authorities.0.values.3.verifierKey.d']);
            expect(paths(presentationConfigKind, authority(0, (a) => (a.values[0].extra = 1)))).to.equal(['dcql_query.credentials.0.trusted_authorities.0.values.0.extra']);
            expect(paths(presentationConfigKind, authority(1, (a) => (a.values = [{ url: 'https://federation.example.eu' }])))).to.equal(['dcql_query.credentials.0.trusted_authorities.1.values.0']);
            expect(paths(presentationConfigKind, authority(1, (a) => (a.values = [])))).to.equal(['dcql_query.credentials.0.trusted_authorities.1.values']);
            // aki values are base64url.
            expect(paths(presentationConfigKind, authority(2, (a) => (a.values = ['s9tI+PmhxdiuNkHMEWNpYim8S8Y'])))).to.equal(['dcql_query.credentials.0.trusted_authorities.2.values.0']);
            expect(paths(presentationConfigKind, authority(2, (a) => delete a.values))).to.equal(['dcql_query.credentials.0.trusted_authorities.2.values']);
        });

        it('credential_sets naming unknown credential query ids or with empty options', () => {
            expect(problems(presentationConfigKind, variant(pid, (c) => (c.dcql_query.credential_sets = [{ options: [['pid'], ['pid', 'mdl']] }])))).to.equal([{
                path: 'dcql_query.credential_sets.0.options.1.1',
                message: '"dcql_query.credential_sets[0].options[1][1]" names no credential query'
            }]);
            expect(paths(presentationConfigKind, variant(pid, (c) => (c.dcql_query.credential_sets = [{ options: [] }])))).to.equal(['dcql_query.credential_sets.0.options']);
            expect(paths(presentationConfigKind, variant(pid, (c) => (c.dcql_query.credential_sets = [{ options: [[]] }])))).to.equal(['dcql_query.credential_sets.0.options.0']);
            expect(paths(presentationConfigKind, variant(pid, (c) => (c.dcql_query.credential_sets = [{ required: true }])))).to.equal(['dcql_query.credential_sets.0.options']);
            expect(paths(presentationConfigKind, variant(pid, (c) => (c.dcql_query.credential_sets[0].required = 'yes')))).to.equal(['dcql_query.credential_sets.0.required']);
        });

        it('transaction_data naming a credential id the query does not have', () => {
            expect(problems(presentationConfigKind, variant(payment, (c) => c.transaction_data[0].credential_ids.push('pid')))).to.equal([{
                path: 'transaction_data.0.credential_ids.1',
                message: '"transaction_data[0].credential_ids[1]" names no credential query of dcql_query'
            }]);
            expect(paths(presentationConfigKind, variant(payment, (c) => (c.transaction_data[0].credential_ids = [])))).to.equal(['transaction_data.0.credential_ids']);
            expect(paths(presentationConfigKind, variant(payment, (c) => delete c.transaction_data[0].type))).to.equal(['transaction_data.0.type']);
        });

        it('an unsupported urn:eudi:sca: transaction data type', () => {
            const details = problems(presentationConfigKind, variant(payment, (c) => (c.transaction_data[0].type = 'urn:eudi:sca:payment_authentication:1')));
            expect(details).to.equal([{
                path: 'transaction_data.0.type',
                message: `"transaction_data[0].type" is not a supported TS12 transaction data type (supported: ${TS12_TRANSACTION_TYPES.join(', ')})`
            }]);
        });

        it('a TS12 type in another letter case (URN names are case-insensitive), which is no supported spelling', () => {
            for (const type of ['URN:EUDI:SCA:payment_authentication:1', 'Urn:Eudi:Sca:payment:1']) {
                const details = problems(presentationConfigKind, variant(payment, (c) => (c.transaction_data[0].type = type)));
                expect(details, type).to.equal([{
                    path: 'transaction_data.0.type',
                    message: `"transaction_data[0].type" is not a supported TS12 transaction data type (supported: ${TS12_TRANSACTION_TYPES.join(', ')})`
                }]);
            }
        });

        it('a TS12 type with a missing or invalid payload', () => {
            expect(problems(presentationConfigKind, variant(payment, (c) => delete c.transaction_data[0].payload))).to.equal([{
                path: 'transaction_data.0.payload',
                message: '"transaction_data[0].payload" is required for urn:eudi:sca:payment:1'
            }]);
            const payload = (change: (p: any) => void) => variant(payment, (c) => change(c.transaction_data[0].payload));
            expect(problems(presentationConfigKind, payload((p) => (p.currency = 'eur')))).to.equal([{
                path: 'transaction_data.0.payload.currency',
                message: '"transaction_data[0].payload.currency" with value "eur" fails to match the ISO 4217 alpha-3 code pattern'
            }]);
            expect(paths(presentationConfigKind, payload((p) => delete p.payee.id))).to.equal(['transaction_data.0.payload.payee.id']);
            expect(paths(presentationConfigKind, payload((p) => delete p.transaction_id))).to.equal(['transaction_data.0.payload.transaction_id']);
            expect(paths(presentationConfigKind, payload((p) => (p.transaction_id = 'x'.repeat(37))))).to.equal(['transaction_data.0.payload.transaction_id']);
            // No conversion: the wallet hashes the payload as given.
            expect(paths(presentationConfigKind, payload((p) => (p.amount = '1595.50')))).to.equal(['transaction_data.0.payload.amount']);
            expect(paths(presentationConfigKind, payload((p) => (p.recurrence.frequency = 'MONTHLY')))).to.equal(['transaction_data.0.payload.recurrence.frequency']);
            expect(paths(presentationConfigKind, payload((p) => (p.execution_date = '2026-01-01')))).to.equal(['transaction_data.0.payload.execution_date']);
            expect(paths(presentationConfigKind, payload((p) => (p.date_time = '13.11.2025')))).to.equal(['transaction_data.0.payload.date_time']);
            expect(paths(presentationConfigKind, payload((p) => (p.recurrence.start_date = '2026-02-30')))).to.equal(['transaction_data.0.payload.recurrence.start_date']);
            expect(paths(presentationConfigKind, payload((p) => (p.payee.iban = 'DE00')))).to.equal(['transaction_data.0.payload.payee.iban']);
            expect(paths(presentationConfigKind, ts12('urn:eudi:sca:payment:1', 'pay 10 EUR'))).to.equal(['transaction_data.0.payload']);
        });

        it('read-only fields', () => {
            const details = problems(presentationConfigKind, { ...pid, createdAt: '2025-01-01T00:00:00.000Z', updatedAt: '2025-01-01T00:00:00.000Z', registrationCertCache: { fingerprint: 'ab' } });
            expect(details).to.equal([
                { path: 'createdAt', message: '"createdAt" is read-only' },
                { path: 'updatedAt', message: '"updatedAt" is read-only' },
                { path: 'registrationCertCache', message: '"registrationCertCache" is read-only' }
            ]);
            expect(paths(presentationConfigKind, { ...pid, registrationCertCache: null })).to.equal(['registrationCertCache']);
        });

        it('unknown fields everywhere, naming each', () => {
            expect(problems(presentationConfigKind, { ...pid, extra: 1 })).to.equal([{ path: 'extra', message: '"extra" is not allowed' }]);
            const spec = variant(pid, (c) => {
                c.dcql_query.extra = 1;
                c.dcql_query.credentials[0].extra = 1;
                c.dcql_query.credentials[0].meta.extra = 1;
                c.dcql_query.credentials[0].claims[0].extra = 1;
                c.dcql_query.credential_sets[0].extra = 1;
                c.registration_cert.extra = 1;
                c.registration_cert.body.extra = 1;
                c.attached[0].extra = 1;
            });
            expect(paths(presentationConfigKind, spec)).to.only.include([
                'dcql_query.extra',
                'dcql_query.credentials.0.extra',
                'dcql_query.credentials.0.meta.extra',
                'dcql_query.credentials.0.claims.0.extra',
                'dcql_query.credential_sets.0.extra',
                'registration_cert.extra',
                'registration_cert.body.extra',
                'attached.0.extra'
            ]);
            expect(paths(presentationConfigKind, variant(payment, (c) => (c.transaction_data[0].extra = 1)))).to.equal(['transaction_data.0.extra']);
        });

        it('scalar fields out of range', () => {
            expect(paths(presentationConfigKind, { ...pid, lifeTime: 0 })).to.equal(['lifeTime']);
            expect(paths(presentationConfigKind, { ...pid, lifeTime: 1.5 })).to.equal(['lifeTime']);
            expect(paths(presentationConfigKind, { ...pid, skewSeconds: -1 })).to.equal(['skewSeconds']);
            expect(paths(presentationConfigKind, { ...pid, statusCheckMode: 'lenient' })).to.equal(['statusCheckMode']);
            expect(paths(presentationConfigKind, { ...pid, readerAuth: 'yes' })).to.equal(['readerAuth']);
            expect(paths(presentationConfigKind, { ...pid, redirectUri: 'done/{sessionId}' })).to.equal(['redirectUri']);
            expect(paths(presentationConfigKind, { ...pid, id: 'has/slash' })).to.equal(['id']);
            expect(paths(presentationConfigKind, variant(pid, (c) => delete c.id))).to.equal(['id']);
            expect(paths(presentationConfigKind, variant(pid, (c) => delete c.attached[0].data))).to.equal(['attached.0.data']);
            expect(paths(presentationConfigKind, variant(pid, (c) => (c.registration_cert.body.purpose = [{ lang: 'en' }])))).to.equal(['registration_cert.body.purpose.0.content']);
        });
    });

    describe('TS12 transaction data', () => {
        it('accepts the four basic types of TS12 v1.0 and stores their payloads as given', () => {
            expect(TS12_TRANSACTION_TYPES).to.equal(['urn:eudi:sca:payment:1', 'urn:eudi:sca:login_risk_transaction:1', 'urn:eudi:sca:account_access:1', 'urn:eudi:sca:emandate:1']);
            expect<unknown>(valid(presentationConfigKind, payment).transaction_data).to.equal(payment.transaction_data);
            const payloads: Record<string, unknown> = {
                'urn:eudi:sca:payment:1': { transaction_id: 'tx-1', payee: { name: 'Shop AB', id: 'SE1' }, pisp: { legal_name: 'PISP Ltd', brand_name: 'Pay', domain_name: 'pay.example.com' }, execution_date: '2026-03-01', currency: 'SEK', amount: -40.78 },
                'urn:eudi:sca:login_risk_transaction:1': { transaction_id: 'tx-2', date_time: '2025-11-13T20:20:39Z', service: 'Superbank Online Banking', action: 'Log in to Online Banking' },
                'urn:eudi:sca:account_access:1': { transaction_id: 'tx-3', aisp: { legal_name: 'AISP Ltd', brand_name: 'Budget', domain_name: 'budget.example.com' }, description: 'Read balances' },
                'urn:eudi:sca:emandate:1': { transaction_id: 'tx-4', start_date: '2026-01-01', reference_number: 'A-98765', creditor_id: 'FR14ZZZ001122334455', purpose: 'Pay monthly bill' }
            };
            for (const [type, payload] of Object.entries(payloads)) {
                expect<unknown>(valid(presentationConfigKind, ts12(type, payload)).transaction_data![0]!.payload).to.equal(payload);
            }
            // An e-mandate needs its purpose only without payment_payload.
            const pull = { transaction_id: 'tx-5', payment_payload: (payloads['urn:eudi:sca:payment:1'] as object) };
            expect<unknown>(valid(presentationConfigKind, ts12('urn:eudi:sca:emandate:1', pull)).transaction_data![0]!.payload).to.equal(pull);
            expect(paths(presentationConfigKind, ts12('urn:eudi:sca:emandate:1', { transaction_id: 'tx-6' }))).to.equal(['transaction_data.0.payload.purpose']);
            expect(paths(presentationConfigKind, ts12('urn:eudi:sca:emandate:1', { ...pull, payment_payload: { transaction_id: 'tx-7' } }))).to.only.include([
                'transaction_data.0.payload.payment_payload.payee',
                'transaction_data.0.payload.payment_payload.currency',
                'transaction_data.0.payload.payment_payload.amount'
            ]);
            expect(paths(presentationConfigKind, ts12('urn:eudi:sca:login_risk_transaction:1', { transaction_id: 'tx-8' }))).to.equal(['transaction_data.0.payload.action']);
            expect(paths(presentationConfigKind, ts12('urn:eudi:sca:account_access:1', { transaction_id: 'tx-9', aisp: { legal_name: 'AISP Ltd' } }))).to.only.include([
                'transaction_data.0.payload.aisp.brand_name',
                'transaction_data.0.payload.aisp.domain_name'
            ]);
        });

        it('leaves other transaction data types and their payloads open', () => {
            for (const payload of [undefined, 'opaque', { any: ['thing', 1] }]) {
                const spec = ts12('https://bank.example.com/transaction-types/transfer', payload);
                expect<unknown>(valid(presentationConfigKind, spec).transaction_data![0]!.payload).to.equal(payload);
            }
        });

        it('checks the credential ids of transaction data given elsewhere against a query', () => {
            const entries = [{ type: 'urn:eudi:sca:payment:1', credential_ids: ['card', 'pid'] }];
            expect(checkTransactionDataCredentialIds(entries, payment.dcql_query)).to.equal([{ path: '0.credential_ids.1', message: 'names no credential query of the DCQL query ("pid")' }]);
            expect(checkTransactionDataCredentialIds(entries, pid.dcql_query).map((p) => p.path)).to.equal(['0.credential_ids.0']);
        });
    });

    describe('registration certificate flat fields', () => {
        const flat = {
            registrationCertImportJwt: 'eyJhbGciOiJFUzI1NiJ9.e30.c2ln',
            registrationCertImportId: 'reg-42',
            registrationCertBodyPrivacyPolicy: 'https://shop.example.com/privacy',
            registrationCertBodySupportUri: 'https://shop.example.com/support',
            registrationCertBodyIntermediary: 'https://intermediary.example.com',
            registrationCertBodyPurpose: [{ lang: 'en', content: 'Age verification' }, {}, { lang: '', content: '' }]
        };

        it('are converted into registration_cert when it is absent, and not kept', () => {
            const spec = valid<PresentationConfigInput>(presentationConfigKind, { ...mdl, ...flat });
            expect(spec.registration_cert).to.equal({
                id: 'reg-42',
                jwt: 'eyJhbGciOiJFUzI1NiJ9.e30.c2ln',
                body: {
                    privacy_policy: 'https://shop.example.com/privacy',
                    support_uri: 'https://shop.example.com/support',
                    intermediary: 'https://intermediary.example.com',
                    purpose: [{ lang: 'en', content: 'Age verification' }]
                }
            });
            for (const field of Object.keys(flat)) {
                expect(spec).to.not.include(field);
            }
            expect(valid(presentationConfigKind, { ...mdl, registrationCertImportJwt: 'a.b.c' }).registration_cert).to.equal({ jwt: 'a.b.c' });
            expect(valid(presentationConfigKind, { ...mdl, registrationCertBodySupportUri: 'mailto:help@shop.example.com' }).registration_cert).to.equal({ body: { support_uri: 'mailto:help@shop.example.com' } });
        });

        it('are dropped, not stored, when registration_cert is given', () => {
            const spec = valid<PresentationConfigInput>(presentationConfigKind, { ...pid, ...flat });
            expect(spec.registration_cert).to.equal(pid.registration_cert);
            expect(Object.keys(spec).filter((k) => k.startsWith('registrationCert'))).to.equal([]);
            // null is given too: the flat fields do not overrule an explicit "no registration certificate".
            expect(valid(presentationConfigKind, { ...mdl, ...flat, registration_cert: null }).registration_cert).to.be.null();
        });

        it('make no registration_cert when all of them are empty or null', () => {
            const spec = valid<PresentationConfigInput>(presentationConfigKind, { ...mdl, registrationCertImportJwt: null, registrationCertImportId: '', registrationCertBodyPurpose: [{}], registrationCertBodyIntermediary: null });
            expect<unknown>(spec).to.equal(valid(presentationConfigKind, mdl));
        });

        it('reject a half-filled purpose row, and values of the wrong type', () => {
            expect(problems(presentationConfigKind, { ...mdl, registrationCertBodyPurpose: [{ lang: 'en', content: 'ok' }, { lang: 'de' }] })).to.equal([{
                path: 'registrationCertBodyPurpose.1.content',
                message: '"registrationCertBodyPurpose[1].content" is required to convert the purpose into registration_cert'
            }]);
            expect(paths(presentationConfigKind, { ...mdl, registrationCertBodyPurpose: [{ content: 'only text' }] })).to.equal(['registrationCertBodyPurpose.0.lang']);
            expect(paths(presentationConfigKind, { ...mdl, registrationCertImportJwt: 42 })).to.equal(['registrationCertImportJwt']);
            expect(paths(presentationConfigKind, { ...mdl, registrationCertBodyPurpose: [{ lang: 'en', content: 'x', extra: 1 }] })).to.equal(['registrationCertBodyPurpose.0.extra']);
        });
    });

    describe('versions', () => {
        const v1Body = { privacy_policy: 'https://shop.example.com/privacy', purpose: [{ lang: 'en', content: 'Age verification' }], provided_attestations: [{ format: 'dc+sd-jwt', meta: { vct_values: ['urn:eudi:pid:1'] } }] };

        it('is version 3 and rejects newer documents', () => {
            expect(registry.schemaUrl(presentationConfigKind)).to.equal(schemaOf(3));
            expect(() => registry.parseDocument({ $schema: schemaOf(4), spec: mdl })).to.throw(/newer than this service supports/);
        });

        it('upgrades a v1 document with provided_attestations to v3, dropping the field with PROVIDED_ATTESTATIONS_REMOVED', () => {
            const doc = { $schema: schemaOf(1), spec: { ...mdl, registration_cert: { id: 'reg-1', body: v1Body } } };
            const parsed = registry.parseDocument(doc);
            expect(parsed.kind).to.shallow.equal(presentationConfigKind);
            expect(parsed.version).to.equal(1);
            const { spec, warnings } = registry.validate(presentationConfigKind, parsed.spec, parsed.version) as { spec: PresentationConfig; warnings: unknown[] };
            expect(spec.registration_cert).to.equal({ id: 'reg-1', body: { privacy_policy: 'https://shop.example.com/privacy', purpose: [{ lang: 'en', content: 'Age verification' }] } });
            expect(warnings).to.have.length(1);
            expect(warnings[0]).to.contain({ code: 'PROVIDED_ATTESTATIONS_REMOVED' });
            // The document itself is not changed.
            expect(doc.spec.registration_cert.body.provided_attestations).to.have.length(1);
        });

        it('upgrades a v1 document without provided_attestations without a warning', () => {
            expect<unknown>(registry.validate(presentationConfigKind, pid, 1)).to.equal({ spec: valid(presentationConfigKind, pid), warnings: [] });
            expect(registry.upgrade(presentationConfigKind, { ...mdl, registration_cert: null }, 1).warnings).to.equal([]);
        });

        it('rejects provided_attestations in a v3 document', () => {
            expect(paths(presentationConfigKind, { ...mdl, registration_cert: { body: v1Body } })).to.equal(['registration_cert.body.provided_attestations']);
        });

        it('migrates a v2 document with integer values unchanged, values kept', () => {
            const v2 = variant(mdl, (c) => c.dcql_query.credentials[0].claims.push({ id: 'age', path: ['org.iso.18013.5.1', 'age_in_years'], values: [18, 21] }));
            const parsed = registry.parseDocument({ $schema: schemaOf(2), spec: v2 });
            expect(registry.upgrade(presentationConfigKind, parsed.spec, parsed.version)).to.equal({ spec: v2, warnings: [] });
            const { spec, warnings } = registry.validate(presentationConfigKind, parsed.spec, parsed.version) as { spec: PresentationConfig; warnings: unknown[] };
            expect(warnings).to.equal([]);
            expect(spec.dcql_query.credentials[0]!.claims![4]!.values).to.equal([18, 21]);
        });

        it('stops the migration of a v2 document with an empty values array with a validation error', () => {
            const v2 = variant(pid, (c) => (c.dcql_query.credentials[0].claims[4].values = []));
            let error: any;
            try {
                registry.upgrade(presentationConfigKind, v2, 2);
            }
            catch (err) {
                error = err;
            }
            expect(error).to.exist();
            expect(error.status).to.equal(400);
            expect(error.message).to.contain('version 2');
            expect(error.details.map((d: ErrorDetail) => d.path)).to.equal(['dcql_query.credentials.0.claims.4.values']);
            // The same through validate, and from v1.
            expect(paths(presentationConfigKind, v2, 2)).to.equal(['dcql_query.credentials.0.claims.4.values']);
            expect(paths(presentationConfigKind, v2, 1)).to.equal(['dcql_query.credentials.0.claims.4.values']);
        });
    });

    describe('withTenantUrl', () => {
        it('replaces <TENANT_URL> in every string of a deep copy of dcql_query, and nowhere else', () => {
            const tenantUrl = 'https://hallmark.example.com/issuers/acme';
            const config = variant(pid, (c) => {
                const query = c.dcql_query.credentials[0];
                query.meta.vct_values.push('<TENANT_URL>#<TENANT_URL>');
                query.trusted_authorities[0].values[1].url = '<TENANT_URL>/trust-list.xml';
                query.trusted_authorities[0].values[3].verifierKey.x5u = '<TENANT_URL>/jwks';
                query.trusted_authorities[1].values = ['<TENANT_URL>'];
                query.claims[4].values = ['<TENANT_URL>', 'DE'];
                query.claims[0].path = ['iss', '<TENANT_URL>'];
                c.redirectUri = '<TENANT_URL>/done';
            });
            const before = structuredClone(config);
            const query = withTenantUrl(config, tenantUrl);
            const credential = query.credentials[0]!;
            expect(credential.meta).to.equal({ vct_values: ['urn:eudi:pid:1', `${tenantUrl}/credentials/pid`, `${tenantUrl}#${tenantUrl}`] });
            expect(credential.trusted_authorities![0]!.values[1]).to.equal({ url: `${tenantUrl}/trust-list.xml` });
            expect((credential.trusted_authorities![0]!.values[3] as { verifierKey: Record<string, unknown> }).verifierKey.x5u).to.equal(`${tenantUrl}/jwks`);
            expect(credential.trusted_authorities![1]!.values).to.equal([tenantUrl]);
            expect(credential.claims![4]!.values).to.equal([tenantUrl, 'DE']);
            expect(credential.claims![0]!.path).to.equal(['iss', tenantUrl]);
            // Everything else is as it was, types included.
            expect(credential.claims!.slice(5).map((c) => c.path)).to.equal([['age_birth_year'], ['nationalities', null], ['nationalities', 0]]);
            expect(credential.claims![3]!.values).to.equal([true]);
            expect(credential.claims![5]!.values).to.equal([1990, 1991, 1992]);
            expect(credential.multiple).to.equal(false);
            expect(query.credential_sets).to.equal(config.dcql_query.credential_sets);
            // A copy: the stored configuration keeps the placeholder.
            expect<unknown>(config).to.equal(before);
            expect(query).to.not.shallow.equal(config.dcql_query);
            expect(query.credentials[0]!.claims).to.not.shallow.equal(config.dcql_query.credentials[0]!.claims);
        });
    });

    it('declares kind, file, references, dependencies and location', () => {
        expect(presentationConfigKind).to.contain({ kind: 'PresentationConfig', file: 'PresentationConfigFile', version: 3, location: { dir: 'presentation' } });
        expect(Object.keys(presentationConfigKind.upgrades!)).to.equal(['1', '2']);
        expect(presentationConfigKind.references).to.equal({ webhookEndpointId: 'WebhookEndpoint', accessKeyChainId: 'KeyChain', 'dcql_query.credentials.*.trusted_authorities.*.values.*.trustListId': 'TrustList' });
        expect(presentationConfigKind.dependsOn).to.equal(['Tenant', 'KeyChain', 'WebhookEndpoint', 'TrustList']);
        const order = registry.ordered().map((k) => k.kind);
        for (const dep of presentationConfigKind.dependsOn!) {
            expect(order.indexOf(dep)).to.be.below(order.indexOf('PresentationConfig'));
        }
    });
});

describe('TrustList', () => {
    let pem: string;
    let other: string;

    before(async () => {
        const make = async (cn: string) => {
            const keys = await Crypto.webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, ['sign', 'verify']);
            const cert = await X509.X509CertificateGenerator.createSelfSigned({ name: `CN=${cn}`, keys, signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' } }, Crypto.webcrypto as any);
            return cert.toString('pem');
        };
        pem = await make('PID Provider Test CA');
        other = await make('Trust List Signer');
    });

    const withEntities = (): TrustList => ({
        id: 'eu-pid-providers',
        description: 'PID providers',
        entities: [
            { name: 'PID Provider', serviceType: 'pid-issuance', certificates: [pem] },
            { serviceType: 'wallet-provider', certificates: [pem, other] }
        ],
        signerCertificates: [other]
    });

    it('accepts a list with entities as given', () => {
        const list = withEntities();
        expect(valid(trustListKind, list)).to.equal(list);
        for (const serviceType of ['pid-issuance', 'eaa-issuance', 'wallet-provider', 'other'] as const) {
            expect(valid(trustListKind, { id: 'l', entities: [{ serviceType, certificates: [pem] }] }).entities![0]!.serviceType).to.equal(serviceType);
        }
        expect(trustListKind.id(list)).to.equal('eu-pid-providers');
    });

    it('accepts a list with a url and its signer certificates, and refuses a url without them', () => {
        const list = { id: 'eu-lote', url: 'https://tl.example.eu/lote.xml', signerCertificates: [pem] };
        expect(valid(trustListKind, list)).to.equal(list);
        expect(problems(trustListKind, { id: 'eu-lote', url: 'https://tl.example.eu/lote.xml' })).to.equal([{ path: 'signerCertificates', message: '"signerCertificates" is required with url: the certificates that may sign the list' }]);
        expect(paths(trustListKind, { ...list, signerCertificates: [] })).to.equal(['signerCertificates']);
        expect(valid(trustListKind, { ...list, url: 'http://localhost:8080/list.jwt', signerCertificates: [other] }).url).to.equal('http://localhost:8080/list.jwt');
    });

    it('rejects a list with neither entities nor url', () => {
        expect(problems(trustListKind, { id: 'empty' })).to.equal([{ path: '', message: '"TrustList" needs at least one entity or a url' }]);
        expect(paths(trustListKind, { id: 'empty', entities: [] })).to.equal(['']);
        expect(paths(trustListKind, { id: 'empty', signerCertificates: [pem] })).to.equal(['']);
    });

    it('rejects certificates that are not PEM or do not parse as X.509', () => {
        const withCert = (certificate: string) => variant(withEntities(), (c) => (c.entities[1].certificates[1] = certificate));
        expect(problems(trustListKind, withCert('MIIBkTCCATegAwIBAgIU'))).to.equal([{
            path: 'entities.1.certificates.1',
            message: '"entities[1].certificates[1]" must be one PEM certificate (-----BEGIN CERTIFICATE----- … -----END CERTIFICATE-----)'
        }]);
        expect(problems(trustListKind, withCert('-----BEGIN CERTIFICATE-----\nTm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n'))).to.equal([{
            path: 'entities.1.certificates.1',
            message: '"entities[1].certificates[1]" does not hold a parsable X.509 certificate'
        }]);
        // Two certificates in one string are two entries.
        expect(paths(trustListKind, withCert(`${pem}\n${other}`))).to.equal(['entities.1.certificates.1']);
        expect(paths(trustListKind, withCert(pem.replace('CERTIFICATE', 'PRIVATE KEY')))).to.equal(['entities.1.certificates.1']);
        expect(paths(trustListKind, variant(withEntities(), (c) => (c.entities[0].certificates = [])))).to.equal(['entities.0.certificates']);
        expect(paths(trustListKind, variant(withEntities(), (c) => (c.signerCertificates = ['nope'])))).to.equal(['signerCertificates.0']);
    });

    it('rejects an unknown serviceType', () => {
        expect(problems(trustListKind, variant(withEntities(), (c) => (c.entities[0].serviceType = 'qtsp')))).to.equal([{
            path: 'entities.0.serviceType',
            message: '"entities[0].serviceType" must be one of [pid-issuance, eaa-issuance, wallet-provider, other]'
        }]);
        expect(paths(trustListKind, variant(withEntities(), (c) => delete c.entities[0].serviceType))).to.equal(['entities.0.serviceType']);
    });

    it('rejects a url that is not http(s), a bad id and unknown fields', () => {
        expect(paths(trustListKind, { id: 'l', url: 'ftp://tl.example.eu/list.xml', signerCertificates: [pem] })).to.equal(['url']);
        expect(paths(trustListKind, { id: 'l', url: 'not a url', signerCertificates: [pem] })).to.equal(['url']);
        expect(paths(trustListKind, { id: 'has space', url: 'https://tl.example.eu', signerCertificates: [pem] })).to.equal(['id']);
        expect(paths(trustListKind, { id: 'l', url: 'https://tl.example.eu', signerCertificates: [pem], extra: 1 })).to.equal(['extra']);
        expect(paths(trustListKind, variant(withEntities(), (c) => (c.entities[0].extra = 1)))).to.equal(['entities.0.extra']);
    });

    it('declares kind, file, version and location', () => {
        expect(trustListKind).to.contain({ kind: 'TrustList', file: 'TrustListConfigFile', version: 1, dependsOn: ['Tenant'], location: { dir: 'trust-lists' } });
        expect(registry.schemaUrl(trustListKind)).to.equal('https://schemas.hallmark.dev/config/v1/TrustListConfigFile.schema.json');
    });
});
