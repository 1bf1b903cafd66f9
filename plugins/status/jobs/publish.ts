import type { JobDefinition } from '../../../lib/jobs';
import type { StatusListService } from '../services/status-lists';

export const STATUS_LIST_PUBLISH_JOB = 'status.publish';

/**
 * Re-signs the cached tokens whose entries changed or that are due (contract: without immediateUpdate the publishing
 * job re-signs; a GET does not). On PostgreSQL graphile-worker runs each interval run once across replicas.
 */
export const statusListPublishJob = (lists: StatusListService, everySeconds: number): JobDefinition => ({
    name: STATUS_LIST_PUBLISH_JOB,
    schedule: { everySeconds },
    async run({ log }) {
        const signed = await lists.publishStale(log);
        if (signed) {
            log.info({ signed }, 'Status list tokens published');
        }
    }
});
