import type Hapi from '@hapi/hapi';
import Joi from 'joi';
import { pluginOptions } from '../../lib/compose';
import { defineStatusListKind } from '../../resources/status-list';
import * as statusTables from './migrations/20261126_0008_status_lists';
import * as statusAllocations from './migrations/20261126_0009_status_allocations';
import { statusEntryRoutes } from './routes/entries';
import { statusListRoutes } from './routes/status-lists';
import { StatusAllocationService } from './services/allocation';
import { StatusEntryService } from './services/entries';
import { StatusListService, statusListStore } from './services/status-lists';

export interface StatusOptions {
    /** Base of the list URIs: `{publicUrl}/issuers/{tenant}/status-management/status-list/{listId}`. */
    publicUrl: string;
}

const statusOptionsSchema = Joi.object<StatusOptions, true>({ publicUrl: Joi.string().uri().required() });

/**
 * Token status lists (IETF draft-ietf-oauth-status-list). Registers: the StatusList kind with its entry storage
 * (status_list_states), /api/status-lists, the public JWT token of each list, the credential status provider of
 * oid4vci (index allocation, activeCredentials), entry changes (PATCH …/entry/{index}, POST /api/session/revoke).
 * The CWT form, publishing and verification are not here yet.
 */
export const plugin: Hapi.Plugin<StatusOptions> = {
    name: 'hallmark-status',
    dependencies: ['hallmark-core', 'hallmark-oauth2', 'hallmark-kms', 'hallmark-sessions', 'hallmark-oid4vci'],
    register(server, rawOptions) {
        const options = pluginOptions('hallmark-status', statusOptionsSchema, rawOptions);
        server.registerMigrations([
            { name: '20261126_0008_status_lists', ...statusTables },
            { name: '20261126_0009_status_allocations', ...statusAllocations }
        ]);
        server.registerResource(defineStatusListKind(statusListStore));
        const lists = new StatusListService({ db: server.db, registry: server.registry, signing: server.signing, publicUrl: options.publicUrl });
        server.route(statusListRoutes(lists));
        const entries = new StatusEntryService({ db: server.db, registry: server.registry });
        server.registerCredentialStatusProvider(new StatusAllocationService({ db: server.db, registry: server.registry, lists, entries }));
        server.route(statusEntryRoutes(entries, server.sessions));
    }
};
