import type Hapi from '@hapi/hapi';
import Joi from 'joi';
import { pluginOptions } from '../../lib/compose';
import { defineStatusListKind } from '../../resources/status-list';
import * as statusTables from './migrations/20261126_0008_status_lists';
import * as statusAllocations from './migrations/20261126_0009_status_allocations';
import * as statusTokenForms from './migrations/20261126_0010_status_token_forms';
import { statusListPublishJob } from './jobs/publish';
import { statusListConfigRoutes } from './routes/config';
import { statusEntryRoutes } from './routes/entries';
import { statusListRoutes } from './routes/status-lists';
import { StatusAllocationService } from './services/allocation';
import { StatusEntryService } from './services/entries';
import { StatusListService, statusListStore } from './services/status-lists';

export interface StatusOptions {
    /** Base of the list URIs: `{publicUrl}/issuers/{tenant}/status-management/status-list/{listId}`. */
    publicUrl: string;
    /** How often the publishing job re-signs changed or due tokens (lists without immediateUpdate), default 30 s. */
    publishIntervalSeconds?: number;
}

const statusOptionsSchema = Joi.object<StatusOptions, true>({
    publicUrl: Joi.string().uri().required(),
    publishIntervalSeconds: Joi.number().integer().min(1).default(30)
});

/**
 * Token status lists (IETF draft-ietf-oauth-status-list). Registers: the StatusList kind with its entry storage
 * (status_list_states), /api/status-lists, /api/status-list-config, the public token of each list (JWT, or CWT by
 * Accept), the job that publishes changed or due tokens, the credential status provider of oid4vci (index
 * allocation, activeCredentials) and entry changes (PATCH …/entry/{index}, POST /api/session/revoke). Presented
 * credentials' lists are checked by the OpenID4VP verifier (lib/verify/status-list.ts).
 */
export const plugin: Hapi.Plugin<StatusOptions> = {
    name: 'hallmark-status',
    dependencies: ['hallmark-core', 'hallmark-oauth2', 'hallmark-kms', 'hallmark-sessions', 'hallmark-oid4vci'],
    register(server, rawOptions) {
        const options = pluginOptions('hallmark-status', statusOptionsSchema, rawOptions);
        server.registerMigrations([
            { name: '20261126_0008_status_lists', ...statusTables },
            { name: '20261126_0009_status_allocations', ...statusAllocations },
            { name: '20261126_0010_status_token_forms', ...statusTokenForms }
        ]);
        server.registerResource(defineStatusListKind(statusListStore));
        const lists = new StatusListService({ db: server.db, registry: server.registry, signing: server.signing, publicUrl: options.publicUrl });
        server.route(statusListRoutes(lists));
        const entries = new StatusEntryService({ db: server.db, registry: server.registry });
        server.registerCredentialStatusProvider(new StatusAllocationService({ db: server.db, registry: server.registry, lists, entries }));
        server.route(statusEntryRoutes(entries, server.sessions));
        server.route(statusListConfigRoutes);
        server.registerJob(statusListPublishJob(lists, options.publishIntervalSeconds!));
    }
};
