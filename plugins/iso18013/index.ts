import type Hapi from '@hapi/hapi';
import { pluginOptions } from '../../lib/compose';
import { iso18013OptionsSchema, type Iso18013Options } from './options';
import { walletRoutes } from './routes/wallet';
import { AnnexCPresentations } from './services/annex-c';

/**
 * ISO/IEC TS 18013-7 Annex C (mdoc over the Digital Credentials API, HPKE sealed responses). Registers: the
 * `iso-18013-7` response type of POST /api/verifier/offer (through oid4vp's registerPresentationResponseType) and
 * POST /presentations/{session}/iso-18013-7. Without this plugin that response type answers 400.
 */
export const plugin: Hapi.Plugin<Iso18013Options> = {
    name: 'hallmark-iso18013',
    dependencies: ['hallmark-kms', 'hallmark-sessions', 'hallmark-oid4vp'],
    register(server, rawOptions) {
        const { publicUrl } = pluginOptions('hallmark-iso18013', iso18013OptionsSchema, rawOptions);
        const { requests, responses } = server.presentations;
        const annexC = new AnnexCPresentations({ publicUrl, signing: server.signing, requests, responses, log: server.app.log });
        server.registerPresentationResponseType('iso-18013-7', annexC);
        server.route(walletRoutes({ sessions: server.sessions, annexC }));
    }
};
export type { Iso18013Options } from './options';
