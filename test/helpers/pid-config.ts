/** The issuer URL of tenant `acme` in tests that run the service without a public URL. */
export const ISSUER = 'http://hallmark.test/issuers/acme';
export const PRE_AUTHORIZED = 'urn:ietf:params:oauth:grant-type:pre-authorized_code';

/** A small SD-JWT PID credential configuration (given_name mandatory, family_name optional), plus `extraFields`. */
export const pidConfig = (...extraFields: object[]) => ({
    id: 'pid',
    config: { format: 'dc+sd-jwt', display: [{ locale: 'en', name: 'PID' }], scope: 'pid' },
    vct: 'urn:eudi:pid:1',
    fields: [
        { path: ['given_name'], type: 'string', mandatory: true, disclosable: true },
        { path: ['family_name'], type: 'string', disclosable: true },
        ...extraFields
    ],
    lifeTime: 3600
});
