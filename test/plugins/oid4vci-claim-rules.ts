import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import * as Jose from 'jose';
import { checkClaims } from '../../plugins/oid4vci/formats/constraints';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { startReceiver, type Receiver } from '../helpers/net';
import { ISSUER, PRE_AUTHORIZED } from '../helpers/pid-config';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';

export const lab = Lab.script();
const { describe, it, before, after } = lab;

/** One field per keyword and type, and nested ones (an array of strings, an object member). */
const FIELDS = [
    { path: ['name'], type: 'string', mandatory: true, constraints: { pattern: '^[A-Z]', minLength: 2, maxLength: 10 } },
    { path: ['code'], type: 'string', constraints: { enum: ['A', 'B'] } },
    { path: ['birth_date'], type: 'string', constraints: { format: 'date' } },
    { path: ['updated_at'], type: 'string', constraints: { format: 'date-time' } },
    { path: ['site'], type: 'string', constraints: { format: 'uri' } },
    { path: ['mail'], type: 'string', constraints: { format: 'email' } },
    { path: ['age'], type: 'integer', constraints: { minimum: 0, maximum: 150 } },
    { path: ['level'], type: 'number', constraints: { enum: [1.5, 2.5] } },
    { path: ['score'], type: 'number' },
    { path: ['adult'], type: 'boolean' },
    { path: ['tags'], type: 'array', children: [{ path: [null], type: 'string', constraints: { pattern: '^[a-z]+$' } }] },
    { path: ['address'], type: 'object', children: [{ path: ['zip'], type: 'string', constraints: { pattern: '^\\d{5}$' } }] }
];

const VALID = {
    name: 'Erika', code: 'A', birth_date: '1964-08-12', updated_at: '2024-02-29T23:59:60.5+01:00', site: 'https://example.com/x',
    mail: 'erika@example.com', age: 60, level: 2.5, score: -3.25, adult: true, tags: ['one', 'two'], address: { zip: '10115' }
};

/** Claims that break one rule each, with the path the error must name. */
const BROKEN: Array<[string, Record<string, unknown>, string]> = [
    ['pattern', { name: 'erika' }, 'name'],
    ['minLength', { name: 'E' }, 'name'],
    ['maxLength', { name: 'Erikaerikaerika' }, 'name'],
    ['enum (string)', { code: 'C' }, 'code'],
    ['enum (number)', { level: 2 }, 'level'],
    ['format date', { birth_date: '1964-02-30' }, 'birth_date'],
    ['format date (shape)', { birth_date: '12.08.1964' }, 'birth_date'],
    ['format date-time', { updated_at: '2024-02-29 12:00' }, 'updated_at'],
    ['format uri', { site: 'not a uri' }, 'site'],
    ['format email', { mail: 'erika.example.com' }, 'mail'],
    ['minimum', { age: -1 }, 'age'],
    ['maximum', { age: 151 }, 'age'],
    ['type string', { name: 42 }, 'name'],
    ['type integer', { age: 1.5 }, 'age'],
    ['type number', { score: '3' }, 'score'],
    ['type boolean', { adult: 'yes' }, 'adult'],
    ['type array', { tags: 'one' }, 'tags'],
    ['type object', { address: ['10115'] }, 'address'],
    ['type null', { score: null }, 'score'],
    ['array element pattern', { tags: ['one', 'Two'] }, 'tags.[]'],
    ['array element type', { tags: ['one', 2] }, 'tags.[]'],
    ['nested pattern', { address: { zip: '1011' } }, 'address.zip']
];

describe('claim rules, unit', () => {
    const fields = [
        { path: ['d'], type: 'string' as const, constraints: { format: 'date' as const } },
        { path: ['t'], type: 'string' as const, constraints: { format: 'date-time' as const } },
        { path: ['p'], type: 'string' as const, constraints: { pattern: 'a' } }
    ];
    it('accepts RFC 3339 dates and date-times, refuses impossible ones', () => {
        for (const d of ['2024-02-29', '2000-01-01', '1999-12-31']) {
            expect(() => checkClaims({ d }, fields), d).to.not.throw();
        }
        for (const d of ['2023-02-29', '2024-13-01', '2024-00-10', '2024-1-1', '2024-01-01T00:00:00Z', ' 2024-01-01']) {
            expect(() => checkClaims({ d }, fields), d).to.throw(/d must be a valid date/);
        }
        for (const t of ['2024-01-01T00:00:00Z', '2024-01-01t23:59:59.123456-12:30', '2016-12-31T23:59:60Z']) {
            expect(() => checkClaims({ t }, fields), t).to.not.throw();
        }
        for (const t of ['2024-01-01T24:00:00Z', '2024-01-01T00:60:00Z', '2024-01-01T00:00:00', '2024-01-01T00:00:00+25:00', '2024-01-01']) {
            expect(() => checkClaims({ t }, fields), t).to.throw(/t must be a valid date-time/);
        }
    });

    it('stops a pattern that backtracks too long and refuses the value', () => {
        // Overlapping alternatives: exponential, and not a shape the save-time check knows.
        const slow = [{ path: ['s'], type: 'string' as const, constraints: { pattern: '^(a|a)*$' } }];
        expect(() => checkClaims({ s: `${'a'.repeat(40)}b` }, slow)).to.throw(/s could not be checked against the pattern \^\(a\|a\)\*\$ within 50 ms/);
        expect(() => checkClaims({ s: 'aaaa' }, slow)).to.not.throw();
    });

    it('runs a pattern on at most 4096 characters, and names every broken path', () => {
        expect(() => checkClaims({ p: `${'b'.repeat(4095)}a` }, fields)).to.not.throw();
        expect(() => checkClaims({ p: `${'b'.repeat(4096)}a` }, fields)).to.throw(/longer than the 4096 characters/);
        const err = (() => {
            try {
                checkClaims({ d: 'x', t: 'y', p: 'b' }, fields);
            }
            catch (e) {
                return e as { details: unknown };
            }
            return undefined;
        })();
        expect(err?.details).to.equal([
            { path: 'd', message: 'd must be a valid date' },
            { path: 't', message: 't must be a valid date-time' },
            { path: 'p', message: 'p must match the pattern a' }
        ]);
    });
});

for (const dialect of DIALECTS) {
    describe(`claim rules at the credential endpoint (${dialect})`, () => {
        let t: TestServer;
        let admin: string;
        let provider: Receiver;
        let providerClaims: Record<string, unknown> = VALID;
        const holder = Jose.generateKeyPair('ES256', { extractable: true });

        const proof = async (nonce: string) => {
            const { privateKey, publicKey } = await holder;
            return new Jose.SignJWT({ nonce, aud: ISSUER }).setProtectedHeader({ alg: 'ES256', typ: 'openid4vci-proof+jwt', jwk: await Jose.exportJWK(publicKey) }).setIssuedAt().sign(privateKey);
        };

        /** Offer (inline claims, or the configuration's attribute provider), token, nonce and credential request. */
        const request = async (configurationId: string, claims?: Record<string, unknown>) => {
            const offer = await t.server.inject({
                method: 'POST', url: '/api/issuer/offer', headers: bearer(admin),
                payload: { credentialConfigurationIds: [configurationId], ...(claims ? { credentialClaims: { [configurationId]: { type: 'inline', claims } } } : {}), byReference: false }
            });
            expect(offer.statusCode, offer.payload).to.equal(201);
            const offered = JSON.parse(new URL((offer.result as any).uri.replace('openid-credential-offer://', 'https://x/')).searchParams.get('credential_offer')!);
            const token = await t.server.inject({ method: 'POST', url: '/issuers/acme/authorize/token', payload: new URLSearchParams({ grant_type: PRE_AUTHORIZED, 'pre-authorized_code': offered.grants[PRE_AUTHORIZED]['pre-authorized_code'] }).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
            expect(token.statusCode, token.payload).to.equal(200);
            const nonce = ((await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/nonce' })).result as any).c_nonce;
            const res = await t.server.inject({ method: 'POST', url: '/issuers/acme/vci/credential', headers: { authorization: `Bearer ${(token.result as any).access_token}` }, payload: { credential_configuration_id: configurationId, proof: { proof_type: 'jwt', jwt: await proof(nonce) } } });
            const session = (await t.server.inject({ url: `/api/session/${(offer.result as any).session}`, headers: bearer(admin) })).result as any;
            return { res, session };
        };

        const expectRefused = async (configurationId: string, claims: Record<string, unknown> | undefined, path: string, label: string) => {
            const { res, session } = await request(configurationId, claims);
            expect(res.statusCode, `${label}: ${res.payload}`).to.equal(400);
            const body = res.result as any;
            expect(body.error, label).to.equal('invalid_credential_request');
            expect(body.error_description, label).to.contain(`${path} `);
            expect(body.credentials, label).to.not.exist();
            // Nothing was issued: the session stays active and records no credential.
            expect(session.status, label).to.equal('active');
            expect(JSON.stringify(session), label).to.not.contain('notificationId');
        };

        before(async () => {
            provider = await startReceiver(() => ({ status: 200, body: { claims: providerClaims } }));
            t = await startTestServer(dialect, {
                manifest: manifestFor('hallmark-oid4vci', 'hallmark-kms-db', 'hallmark-tenancy'),
                env: { OUTBOUND_URL_ALLOW_HTTP: 'true', OUTBOUND_URL_ALLOW_PRIVATE_NETWORK: 'true' }
            });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            expect((await t.server.inject({ method: 'POST', url: '/api/key-chain', headers: bearer(admin), payload: { id: 'issuer', usageType: 'attestation', subject: { commonName: 'Acme', country: 'DE' } } })).statusCode).to.equal(201);
            const base = { config: { format: 'dc+sd-jwt', display: [{ locale: 'en', name: 'Rules' }] }, vct: 'urn:example:rules', fields: FIELDS, keyChainId: 'issuer' };
            const inline = await t.server.inject({ method: 'POST', url: '/api/issuer/credentials', headers: bearer(admin), payload: { ...base, id: 'rules' } });
            expect(inline.statusCode, inline.payload).to.equal(201);
            const registered = await t.server.inject({ method: 'POST', url: '/api/issuer/attribute-providers', headers: bearer(admin), payload: { id: 'register', url: `${provider.url}/claims`, auth: { type: 'none' } } });
            expect(registered.statusCode, registered.payload).to.equal(201);
            const provided = await t.server.inject({ method: 'POST', url: '/api/issuer/credentials', headers: bearer(admin), payload: { ...base, id: 'rules-provided', attributeProviderId: 'register' } });
            expect(provided.statusCode, provided.payload).to.equal(201);
            const mdl = {
                id: 'mdl-rules', keyChainId: 'issuer',
                config: { format: 'mso_mdoc', docType: 'org.iso.18013.5.1.mDL', display: [{ locale: 'en', name: 'mDL' }] },
                fields: [
                    { path: ['org.iso.18013.5.1', 'birth_date'], type: 'string', mandatory: true, constraints: { format: 'date' } },
                    { path: ['age_in_years'], namespace: 'org.iso.18013.5.1', type: 'integer', constraints: { minimum: 0 } }
                ]
            };
            const mdoc = await t.server.inject({ method: 'POST', url: '/api/issuer/credentials', headers: bearer(admin), payload: mdl });
            expect(mdoc.statusCode, mdoc.payload).to.equal(201);
        });
        after(async () => {
            await t.stop();
            await provider.close();
        });

        it('issues claims that keep every rule, inline and from the attribute provider', async () => {
            const inline = await request('rules', VALID);
            expect(inline.res.statusCode, inline.res.payload).to.equal(200);
            expect(inline.session.status).to.equal('fetched');
            providerClaims = VALID;
            const provided = await request('rules-provided');
            expect(provided.res.statusCode, provided.res.payload).to.equal(200);
            const mdoc = await request('mdl-rules', { 'org.iso.18013.5.1': { birth_date: '1964-08-12', age_in_years: 60 } });
            expect(mdoc.res.statusCode, mdoc.res.payload).to.equal(200);
        });

        it('refuses inline claims that break a rule: invalid_credential_request naming the path, no credential', async () => {
            for (const [label, change, path] of BROKEN) {
                await expectRefused('rules', { ...VALID, ...change }, path, label);
            }
        });

        it('refuses attribute provider answers that break a rule the same way', async () => {
            for (const [label, change, path] of BROKEN) {
                providerClaims = { ...VALID, ...change };
                await expectRefused('rules-provided', undefined, path, `provider ${label}`);
            }
            providerClaims = VALID;
            expect(provider.deliveries.length).to.be.at.least(BROKEN.length);
        });

        it('checks mso_mdoc elements by [namespace, element]', async () => {
            await expectRefused('mdl-rules', { 'org.iso.18013.5.1': { birth_date: '1964-08-32' } }, 'org.iso.18013.5.1.birth_date', 'mdoc date');
            await expectRefused('mdl-rules', { 'org.iso.18013.5.1': { birth_date: '1964-08-12', age_in_years: '60' } }, 'org.iso.18013.5.1.age_in_years', 'mdoc type');
        });

        it('refuses at save constraints that would have no effect or cannot run (400 naming the keyword)', async () => {
            const refused = async (field: object, message: RegExp) => {
                const payload = { id: 'bad-rules', config: { format: 'dc+sd-jwt', display: [{ locale: 'en', name: 'Bad' }] }, vct: 'urn:example:bad', fields: [field] };
                const res = await t.server.inject({ method: 'POST', url: '/api/issuer/credentials', headers: bearer(admin), payload });
                expect(res.statusCode, `${JSON.stringify(field)}: ${res.payload}`).to.equal(400);
                expect(JSON.stringify((res.result as any).details ?? res.result), JSON.stringify(field)).to.match(message);
            };
            await refused({ path: ['a'], type: 'string', constraints: { foo: 1 } }, /constraints.foo.*is not a constraint of string fields \(supported: pattern, minLength, maxLength, format, enum\)/);
            await refused({ path: ['a'], type: 'string', constraints: { minimum: 1 } }, /constraints.minimum.*is not a constraint of string fields/);
            await refused({ path: ['a'], type: 'integer', constraints: { pattern: '^1' } }, /constraints.pattern.*is not a constraint of integer fields \(supported: minimum, maximum, enum\)/);
            await refused({ path: ['a'], type: 'boolean', constraints: { minLength: 1 } }, /is not a constraint of boolean fields \(supported: enum\)/);
            await refused({ path: ['a'], type: 'object', constraints: { enum: [1] } }, /is not a constraint of object fields \(they take none\)/);
            await refused({ path: ['a'], type: 'array', constraints: { minLength: 1 } }, /is not a constraint of array fields \(they take none\)/);
            await refused({ path: ['a'], type: 'string', constraints: { pattern: '([a-z]' } }, /constraints.pattern.*is not a valid regular expression/);
            await refused({ path: ['a'], type: 'string', constraints: { pattern: '\\p{Nope}' } }, /is not a valid regular expression/);
            for (const pattern of ['^(a+)+$', '(\\w*)*x', '((ab)+c)*', '(x{1,5})+', '(?:a|b+){2,}']) {
                await refused({ path: ['a'], type: 'string', constraints: { pattern } }, /nested quantifiers/);
            }
            await refused({ path: ['a'], type: 'string', constraints: { pattern: 'a'.repeat(1025) } }, /constraints.pattern.*1024/);
            await refused({ path: ['a'], type: 'string', constraints: { format: 'ipv4' } }, /constraints.format.*must be one of \[date, date-time, uri, email\]/);
            await refused({ path: ['a'], type: 'string', constraints: { enum: [1] } }, /constraints.enum\[0\].*must be a string/);
            await refused({ path: ['a'], type: 'string', constraints: { enum: [] } }, /constraints.enum.*at least 1/);
            await refused({ path: ['a'], type: 'string', constraints: { enum: ['x', 'x'] } }, /constraints.enum\[1\].*repeats the value of entry 0/);
            await refused({ path: ['a'], type: 'integer', constraints: { enum: [1.5] } }, /constraints.enum\[0\].*must be an integer/);
            await refused({ path: ['a'], type: 'number', constraints: { minimum: '1' } }, /constraints.minimum.*must be a number/);
            await refused({ path: ['a'], type: 'number', constraints: { minimum: 5, maximum: 1 } }, /constraints.maximum.*greater than or equal to ref:minimum/);
            await refused({ path: ['a'], type: 'string', constraints: { minLength: 5, maxLength: 1 } }, /constraints.maxLength.*greater than or equal to ref:minLength/);
            await refused({ path: ['a'], type: 'string', constraints: { minLength: -1 } }, /constraints.minLength/);
            await refused({ path: ['a'], type: 'string', constraints: 'pattern' }, /constraints.*must be of type object/);
            await refused({ path: ['a'], type: 'string', defaultValue: 'x', constraints: { minLength: 2 } }, /"path":"fields.0.defaultValue","message":"\\"fields\[0\].defaultValue\\" must be at least 2 characters long"/);
            await refused({ path: ['a'], type: 'integer', defaultValue: 200, constraints: { maximum: 150 } }, /fields.0.defaultValue.*must be at most 150/);
            await refused({ path: ['a'], type: 'string', defaultValue: 'C', constraints: { enum: ['A', 'B'] } }, /fields.0.defaultValue.*must be one of/);
            await refused({ path: ['o'], type: 'object', children: [{ path: ['d'], type: 'string', defaultValue: '2024-02-30', constraints: { format: 'date' } }] }, /fields.0.children.0.defaultValue.*must be a valid date/);
            // Safe repetitions are kept, and defaults that keep the rules.
            const saved = await t.server.inject({
                method: 'POST', url: '/api/issuer/credentials', headers: bearer(admin),
                payload: { id: 'fine-rules', config: { format: 'dc+sd-jwt', display: [{ locale: 'en', name: 'Fine' }] }, vct: 'urn:example:fine', fields: [{ path: ['a'], type: 'string', defaultValue: 'abc', constraints: { pattern: '^(\\d{3}-)*\\d{4}$|^[a-z]+(?:-[a-z]{2})*$' } }] }
            });
            expect(saved.statusCode, saved.payload).to.equal(201);
        });
    });
}
