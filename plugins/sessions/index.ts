import type Hapi from '@hapi/hapi';
import { requirePlugins } from '../../lib/compose';
import { SingleUseStore } from '../../lib/db/single-use';
import { SessionSearch } from '../../lib/sessions/search';
import { SessionService } from '../../lib/sessions/session-service';
import { sessionMaintenanceJob } from './jobs/maintenance';
import { registerSessionEvents } from './routes/events';
import { sessionListRoutes } from './routes/list';
import { registerSessionLogs } from './routes/logs';
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
        server.route([...sessionRoutes(sessions), ...sessionListRoutes(new SessionSearch(server.db))]);
        registerSessionEvents(server, sessions);
        registerSessionLogs(server, sessions);
        const { ttl, cleanupMode, tidyUpInterval } = server.app.config.sessions;
        server.registerJob(sessionMaintenanceJob({ db: server.db, singleUse: server.singleUse, sessions: { ttl, cleanupMode }, tidyUpInterval }));
    }
};
