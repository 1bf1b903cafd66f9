import type Hapi from '@hapi/hapi';
import Joi from 'joi';
import { pluginOptions } from '../../lib/compose';
import { defineStatusListKind } from '../../resources/status-list';
import * as statusTables from './migrations/20261126_0008_status_lists';
import * as statusAllocations from './migrations/20261126_0009_status_allocations';
import * as statusTokenForms from './migrations/20261126_0010_status_token_forms';
import { statusListPublishJob } from './jobs/publish';
import { statusListConfigRoutes } from './routes/config';
import { statusListRoutes } from './routes/status-lists';
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
 * Accept) and the job that publishes changed or due tokens. Allocation into credentials, entry changes and
 * verification are not here yet.
 */
export const plugin: Hapi.Plugin<StatusOptions> = {
    name: 'hallmark-status',
    dependencies: ['hallmark-core', 'hallmark-oauth2', 'hallmark-kms', 'hallmark-oid4vci'],
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
        server.route(statusListConfigRoutes);
        server.registerJob(statusListPublishJob(lists, options.publishIntervalSeconds!));
    }
};
