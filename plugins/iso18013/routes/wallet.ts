import type { ServerRoute } from '@hapi/hapi';
import Joi from 'joi';
import { OAuthError } from '../../../lib/errors';
import type { LiveSession, SessionService } from '../../sessions/services/session-service';
import type { AnnexCPresentations } from '../services/annex-c';

const EXPIRED = 'The presentation session has expired';
const USED = 'The presentation offer has already been used';

/** Spec 7.3: what an ISO 18013-7 response that is refused or fails gets; `error` is the failure code, when there is one. */
const failure = (path: string, message: string, code?: string) => ({
    statusCode: 400,
    timestamp: new Date().toISOString(),
    path,
    ...(code ? { error: code } : {}),
    message
});

export const walletRoutes = (deps: { sessions: SessionService; annexC: AnnexCPresentations }): ServerRoute[] => [
    {
        method: 'POST',
        path: '/presentations/{session}/iso-18013-7',
        options: {
            auth: false,
            app: { protocol: true },
            tags: ['api', 'verification'],
            description: 'ISO 18013-7 Annex C response: the base64url EncryptedResponse (HPKE sealed DeviceResponse)',
            notes: 'Answers 200 {} (or {redirect_uri} with response_code when the configuration has a redirectUri); failures 400 {statusCode, timestamp, path, error, message}.',
            validate: {
                params: Joi.object({ session: Joi.string().max(64).required() }),
                payload: Joi.object({ data: Joi.string().min(1).max(1_000_000).required() }).label('IsoResponse')
            }
        },
        handler: async (request, h) => {
            const path = request.path;
            const session = await deps.sessions.get(request.params.session as string);
            if (session?.type !== 'presentation' || !session.data || (session.data as { protocol?: string }).protocol !== 'iso-18013-7') {
                return h.response({ statusCode: 404, error: 'Not Found', message: 'Unknown ISO 18013-7 presentation request' }).code(404);
            }
            if (session.expiresAt && Date.parse(session.expiresAt) <= Date.now()) {
                return h.response(failure(path, EXPIRED)).code(400);
            }
            if (session.status !== 'active' || session.consumedAt) {
                return h.response(failure(path, USED)).code(400);
            }
            let concluded;
            try {
                concluded = await deps.annexC.receive(session as LiveSession<'presentation'>, (request.payload as { data: string }).data);
            }
            catch (err) {
                // A concurrent response recorded its outcome first: this one is the replay, in the shape of spec 7.3.
                if (err instanceof OAuthError && err.status === 400) {
                    return h.response(failure(path, err.message)).code(400);
                }
                throw err;
            }
            if (concluded.ok) {
                return h.response(concluded.redirectUri ? { redirect_uri: concluded.redirectUri } : {}).header('Cache-Control', 'no-store');
            }
            return h.response(failure(path, concluded.message, concluded.code)).code(400).header('Cache-Control', 'no-store');
        }
    }
];
