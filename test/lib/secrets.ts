import { expect } from '@hapi/code';
import * as Lab from '@hapi/lab';
import { redactSecrets, restoreRedacted } from '../../lib/registry/secrets';
import { httpKmsProvider } from '../../plugins/kms-http/provider';
import { defineKmsConfigKind } from '../../resources/kms-config';

export const lab = Lab.script();
const { describe, it } = lab;

describe('secret redaction', () => {
    const paths = ['auth.config.value', 'providers.*.pin', 'providers.*.auth.token'];
    const layout = { secrets: paths, secretDestinations: ['url', 'providers.*.baseUrl'] };

    it('redacts secret paths, arrays included', () => {
        expect(redactSecrets({ auth: { type: 'apiKey', config: { headerName: 'X', value: 's' } } }, paths)).to.equal({ auth: { type: 'apiKey', config: { headerName: 'X', value: '[redacted]' } } });
        expect(redactSecrets({ providers: [{ id: 'a', pin: '1234' }, { id: 'b' }] }, paths)).to.equal({ providers: [{ id: 'a', pin: '[redacted]' }, { id: 'b' }] });
    });

    it('restores redacted secrets from the stored document, matching list entries by id', () => {
        const stored = { providers: [{ id: 'hsm', pin: '1234' }, { id: 'remote', auth: { type: 'bearer', token: 't0k' } }] };
        const sentBack = { providers: [{ id: 'remote', auth: { type: 'bearer', token: '[redacted]' } }, { id: 'hsm', pin: '[redacted]' }, { id: 'new', pin: '[redacted]' }] };
        // A redacted secret with nothing stored behind it is dropped, so validation asks for the real value.
        expect(restoreRedacted(sentBack, stored, layout)).to.equal({ providers: [{ id: 'remote', auth: { type: 'bearer', token: 't0k' } }, { id: 'hsm', pin: '1234' }, { id: 'new', pin: undefined }] });
        // A new value is kept; "[redacted]" outside a secret path is ordinary text.
        expect(restoreRedacted({ auth: { config: { value: 'new-secret' } }, name: '[redacted]' }, { auth: { config: { value: 'old' } }, name: 'x' }, layout))
            .to.equal({ auth: { config: { value: 'new-secret' } }, name: '[redacted]' });
    });

    it('never keeps a stored secret when a URL on its way changed', () => {
        const webhook = { url: 'https://hooks.example/in', auth: { type: 'apiKey', config: { headerName: 'X', value: 's3cret' } } };
        const redirected = { url: 'https://attacker.example/in', auth: { type: 'apiKey', config: { headerName: 'X', value: '[redacted]' } } };
        expect(restoreRedacted(redirected, webhook, layout).auth.config.value).to.be.undefined();
        expect(restoreRedacted({ ...redirected, url: webhook.url }, webhook, layout).auth.config.value).to.equal('s3cret');
        // Per list entry: a moved KMS provider loses its token, an unmoved one keeps its own.
        const stored = { providers: [{ id: 'a', baseUrl: 'https://kms-a.example', auth: { type: 'bearer', token: 'ta' } }, { id: 'b', baseUrl: 'https://kms-b.example', auth: { type: 'bearer', token: 'tb' } }] };
        const sent = { providers: [{ id: 'a', baseUrl: 'https://evil.example', auth: { type: 'bearer', token: '[redacted]' } }, { id: 'b', baseUrl: 'https://kms-b.example', auth: { type: 'bearer', token: '[redacted]' } }] };
        expect(restoreRedacted(sent, stored, layout).providers.map((p) => p.auth.token)).to.equal([undefined, 'tb']);
    });

    it('takes the destinations of KMS configurations from the registered provider types', () => {
        const kind = defineKmsConfigKind(new Map([[httpKmsProvider.type, httpKmsProvider]]), async () => undefined);
        expect(kind.secretDestinations).to.equal(['providers.*.baseUrl', 'providers.*.auth.tokenUrl']);
        const provider = { id: 'remote', type: 'http', baseUrl: 'https://kms.example', auth: { type: 'oauth2-client-credentials', tokenUrl: 'https://idp.example/token', clientId: 'c', clientSecret: 'cs' } };
        const sentBack = { providers: [{ ...provider, auth: { ...provider.auth, tokenUrl: 'https://evil.example/token', clientSecret: '[redacted]' } }] };
        expect(restoreRedacted(sentBack, { providers: [provider] }, kind).providers[0]!.auth.clientSecret).to.be.undefined();
        expect(restoreRedacted({ providers: [{ ...provider, auth: { ...provider.auth, clientSecret: '[redacted]' } }] }, { providers: [provider] }, kind).providers[0]!.auth.clientSecret).to.equal('cs');
    });

    it('keeps the secrets of every spec-defined KMS provider type secret when no plugin of that type is loaded', () => {
        const kind = defineKmsConfigKind(new Map(), async () => undefined);
        const stored = {
            providers: [
                { id: 'remote', type: 'http', baseUrl: 'https://kms.example', auth: { type: 'bearer', token: 'SUPER-SECRET-BEARER' } },
                { id: 'hsm', type: 'pkcs11', library: '/lib/x.so', slot: 0, pin: '1234' },
                { id: 'sig', type: 'csc', baseUrl: 'https://csc.example', tokenUrl: 'https://csc.example/t', clientId: 'c', clientSecret: 'cs', authorizeAuthData: [{ id: 'otp', value: '000000' }] }
            ]
        };
        const redacted = JSON.stringify(redactSecrets(stored, kind.secrets));
        for (const secret of ['SUPER-SECRET-BEARER', '1234', 'cs', '000000']) {
            expect(redacted).to.not.contain(`"${secret}"`);
        }
    });
});
