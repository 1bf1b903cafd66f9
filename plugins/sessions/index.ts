import type Hapi from '@hapi/hapi';
import { pluginOptions } from '../../lib/compose';
import { SingleUseStore } from '../../lib/db/single-use';
import * as sessionTables from './migrations/20261125_0004_sessions';
import * as sessionLogs from './migrations/20261125_0005_session_logs';
import * as sessionSearch from './migrations/20261125_0006_session_search';
import * as sessionIndexBudget from './migrations/20261126_0013_session_index_budget';
import * as sessionLateUpdates from './migrations/20261128_0016_session_late_updates';
import * as sessionOffClockIds from './migrations/20261128_0017_session_off_clock_ids';
import { SessionSearch } from './services/search';
import { SessionService } from './services/session-service';
import { sessionMaintenanceJob } from './jobs/maintenance';
import { registerSessionEvents } from './routes/events';
import { sessionListRoutes } from './routes/list';
import { registerSessionLogs } from './routes/logs';
import { sessionRoutes } from './routes/sessions';
import { sessionsOptionsSchema, type SessionsOptions } from './options';

declare module '@hapi/hapi' {
    interface Server {
        sessions: SessionService;
        singleUse: SingleUseStore;
    }
    interface PluginProperties {
        'hallmark-sessions': {
            /** Seconds a session of a tenant without a session configuration lives. */
            defaultTtl: number;
        };
    }
}

/**
 * Sessions of issuance and presentation flows. Registers: the session service, single-use values, /api/session.
 * Owns the sessions, session_logs and single_use_values tables.
 */
export const plugin: Hapi.Plugin<SessionsOptions> = {
    name: 'hallmark-sessions',
    dependencies: ['hallmark-core', 'hallmark-oauth2'],
    register(server, rawOptions) {
        const { ttl, cleanupMode, tidyUpInterval, sessionLog } = pluginOptions('hallmark-sessions', sessionsOptionsSchema, rawOptions);
        server.registerMigrations([
            { name: '20261125_0004_sessions', ...sessionTables },
            { name: '20261125_0005_session_logs', ...sessionLogs },
            { name: '20261125_0006_session_search', ...sessionSearch },
            { name: '20261126_0013_session_index_budget', ...sessionIndexBudget },
            { name: '20261128_0016_session_late_updates', ...sessionLateUpdates },
            { name: '20261128_0017_session_off_clock_ids', ...sessionOffClockIds }
        ]);
        server.expose('defaultTtl', ttl);
        const sessions = new SessionService(server.db);
        server.decorate('server', 'sessions', sessions);
        server.decorate('server', 'singleUse', new SingleUseStore(server.db));
        server.route([...sessionRoutes(sessions), ...sessionListRoutes(new SessionSearch(server.db))]);
        registerSessionEvents(server, sessions);
        registerSessionLogs(server, sessions, sessionLog);
        server.registerJob(sessionMaintenanceJob({ db: server.db, singleUse: server.singleUse, sessions: { ttl, cleanupMode }, tidyUpInterval }));
    }
};
