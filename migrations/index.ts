import type { Knex } from 'knex';
import * as foundation from './20261125_0001_foundation';
import * as auth from './20261125_0002_auth';
import * as kms from './20261125_0003_kms';
import * as sessions from './20261125_0004_sessions';
import * as sessionLogs from './20261125_0005_session_logs';
import * as sessionSearch from './20261125_0006_session_search';
import * as clientLockout from './20261125_0007_client_lockout_in_memory';

export interface Migration {
    name: string;
    up(knex: Knex): Promise<void>;
    down(knex: Knex): Promise<void>;
}

/** Ordered: knex applies them in this order and records each by name. Append, never reorder. */
export const migrations: Migration[] = [
    { name: '20261125_0001_foundation', ...foundation },
    { name: '20261125_0002_auth', ...auth },
    { name: '20261125_0003_kms', ...kms },
    { name: '20261125_0004_sessions', ...sessions },
    { name: '20261125_0005_session_logs', ...sessionLogs },
    { name: '20261125_0006_session_search', ...sessionSearch },
    { name: '20261125_0007_client_lockout_in_memory', ...clientLockout }
];
