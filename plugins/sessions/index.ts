import type Hapi from '@hapi/hapi';
import { requirePlugins } from '../../lib/compose';
import { SingleUseStore } from '../../lib/db/single-use';
import { SessionService } from '../../lib/sessions/session-service';
import { sessionRoutes } from './routes/sessions';

declare module '@hapi/hapi' {
    interface Server {
        sessions: SessionService;
        singleUse: SingleUseStore;
    }
}

/** Sessions of issuance and presentation flows. Registers: the session service, single-use values, /api/session. */
export const plugin: Hapi.Plugin<Record<string, never>> = {
    name: 'hallmark-sessions',
    register(server) {
        requirePlugins(server, 'hallmark-sessions', ['hallmark-core', 'hallmark-oauth2']);
        const sessions = new SessionService(server.db);
        server.decorate('server', 'sessions', sessions);
        server.decorate('server', 'singleUse', new SingleUseStore(server.db));
        server.route(sessionRoutes(sessions));
    }
};
