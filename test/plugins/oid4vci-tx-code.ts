import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { bearer, clientWithToken, createTenant, rootToken } from '../helpers/auth';
import { DIALECTS } from '../helpers/databases';
import { PRE_AUTHORIZED, pidConfig } from '../helpers/pid-config';
import { manifestFor, startTestServer, type TestServer } from '../helpers/server';

/**
 * The tx_code limit under concurrent guesses (issue 10 item 1): however many guesses race, at most
 * txCodeMaxAttempts are evaluated, and a right code that loses answers exactly as a wrong one.
 */

export const lab = Lab.script();
const { describe, it, before, after } = lab;

const MAX_ATTEMPTS = 5;
const TX_CODE = '482915';
const LOCKED = 'The pre-authorized code is locked after too many wrong transaction codes';
const USED = 'The pre-authorized code has already been used';

interface Answer {
    status: number;
    body: { error?: string; error_description?: string; access_token?: string };
    right: boolean;
}

for (const dialect of DIALECTS) {
    describe(`OID4VCI tx_code under concurrent guesses (${dialect})`, () => {
        let t: TestServer;
        let admin: string;

        before(async () => {
            t = await startTestServer(dialect, { manifest: manifestFor('hallmark-oid4vci', 'hallmark-kms-db', 'hallmark-tenancy') });
            const root = await rootToken(t.server);
            await createTenant(t.server, root, 'acme');
            admin = (await clientWithToken(t.server, root, { clientId: 'acme-admin', roles: ['tenant:admin'], tenantId: 'acme' })).token;
            for (const [url, method, payload] of [
                ['/api/key-chain', 'POST', { id: 'issuer', usageType: 'attestation', subject: { commonName: 'Acme', country: 'DE' } }],
                ['/api/issuer/credentials', 'POST', pidConfig()],
                ['/api/issuer/config', 'PUT', { txCodeMaxAttempts: MAX_ATTEMPTS }]
            ] as const) {
                const res = await t.server.inject({ method, url, headers: bearer(admin), payload });
                expect(res.statusCode, res.payload).to.be.within(200, 201);
            }
        });
        after(() => t.stop());

        /** A by-value offer with the tx_code; answers its session id and pre-authorized code. */
        const offer = async (): Promise<{ session: string; code: string }> => {
            const res = await t.server.inject({ method: 'POST', url: '/api/issuer/offer', headers: bearer(admin), payload: { credentialConfigurationIds: ['pid'], credentialClaims: { pid: { type: 'inline', claims: { given_name: 'Erika' } } }, byReference: false, tx_code: TX_CODE } });
            expect(res.statusCode, res.payload).to.equal(201);
            const { session, uri } = res.result as { session: string; uri: string };
            const offerObject = JSON.parse(new URL(uri.replace('openid-credential-offer://', 'https://wallet.invalid/')).searchParams.get('credential_offer')!);
            return { session, code: offerObject.grants[PRE_AUTHORIZED]['pre-authorized_code'] };
        };

        const guess = async (code: string, txCode: string): Promise<Answer> => {
            const res = await t.server.inject({
                method: 'POST',
                url: '/issuers/acme/authorize/token',
                payload: new URLSearchParams({ grant_type: PRE_AUTHORIZED, 'pre-authorized_code': code, tx_code: txCode }).toString(),
                headers: { 'content-type': 'application/x-www-form-urlencoded' }
            });
            return { status: res.statusCode, body: res.result as Answer['body'], right: txCode === TX_CODE };
        };

        /** All guesses at once: `wrong` wrong codes and `right` right ones, the right ones at random places. */
        const race = (code: string, wrong: number, right: number): Promise<Answer[]> => {
            const codes = Array.from({ length: wrong }, (_, i) => String(100000 + i));
            for (let i = 0; i < right; i++) {
                codes.splice(Math.floor(Math.random() * (codes.length + 1)), 0, TX_CODE);
            }
            return Promise.all(codes.map((txCode) => guess(code, txCode)));
        };

        const counted = async (session: string): Promise<number> =>
            Number((await t.server.db.knex('sessions').where({ id: session }).first()).txCodeFailures);

        /** Answers that compared the tx_code: every one but those refused as locked or used before looking at it. */
        const evaluated = (answers: Answer[]) => answers.filter((a) => ![LOCKED, USED].includes(a.body.error_description!));

        it('evaluates at most txCodeMaxAttempts of 200 concurrent wrong codes', async () => {
            const { session, code } = await offer();
            const answers = await race(code, 200, 0);
            expect(answers.every((a) => a.status === 400 && a.body.error === 'invalid_grant'), JSON.stringify(answers.filter((a) => a.status !== 400))).to.be.true();
            expect(evaluated(answers).length).to.equal(MAX_ATTEMPTS);
            expect(await counted(session)).to.equal(MAX_ATTEMPTS);
        });

        it('evaluates at most txCodeMaxAttempts of 31 concurrent guesses with the right one among them, and a losing right code answers as a wrong one', async () => {
            for (let round = 0; round < 5; round++) {
                const { session, code } = await offer();
                const answers = await race(code, 30, 1);
                expect(evaluated(answers).length, JSON.stringify(answers)).to.be.at.most(MAX_ATTEMPTS);
                expect(await counted(session)).to.be.at.most(MAX_ATTEMPTS);
                const right = answers.find((a) => a.right)!;
                if (right.status !== 200) {
                    const wrongBodies = answers.filter((a) => !a.right).map((a) => JSON.stringify(a.body));
                    expect(wrongBodies, JSON.stringify(answers)).to.include(JSON.stringify(right.body));
                }
            }
        });

        it('answers a right code that lost to a concurrent right one only as a wrong code or a used code is answered', async () => {
            const { code } = await offer();
            const answers = await race(code, 2, 10);
            expect(answers.filter((a) => a.status === 200)).to.have.length(1);
            const { code: other } = await offer();
            const wrong = (await guess(other, '000000')).body;
            const losers = new Set(answers.filter((a) => a.right && a.status !== 200).map((a) => a.body.error_description));
            for (const description of losers) {
                expect([wrong.error_description, USED, LOCKED]).to.include(description);
            }
            expect(evaluated(answers).length).to.be.at.most(MAX_ATTEMPTS);
        });

        it('answers the right code after the limit exactly as a wrong one', async () => {
            const { session, code } = await offer();
            const first = await guess(code, '000000');
            expect(first.status).to.equal(400);
            for (let i = 1; i < MAX_ATTEMPTS; i++) {
                expect((await guess(code, '000000')).body).to.equal(first.body);
            }
            const wrongAfter = await guess(code, '111111');
            const rightAfter = await guess(code, TX_CODE);
            expect(rightAfter.status).to.equal(400);
            expect(rightAfter.body).to.equal(wrongAfter.body);
            expect(rightAfter.body).to.equal({ error: 'invalid_grant', error_description: LOCKED });
            expect(await counted(session)).to.equal(MAX_ATTEMPTS);
        });

        it('accepts the right code on the last allowed attempt', async () => {
            const { code } = await offer();
            for (let i = 1; i < MAX_ATTEMPTS; i++) {
                expect((await guess(code, '000000')).status).to.equal(400);
            }
            const right = await guess(code, TX_CODE);
            expect(right.status, JSON.stringify(right.body)).to.equal(200);
        });
    });
}
