import type Cluster from 'node:cluster';

/**
 * The cluster primary's half of the change bus (lib/change-bus.ts): kept apart so that the primary, which only
 * forks and relays, loads neither pg nor knex.
 */

/** The key of a cluster IPC message that carries a change-bus envelope (the primary relays exactly these). */
export const IPC_KEY = 'hallmarkBus';

/** In the cluster primary: every envelope a worker sends goes on to the other workers. */
export const relayClusterBus = (cluster: typeof Cluster): void => {
    cluster.on('message', (from, message: unknown) => {
        if (!message || typeof message !== 'object' || !(IPC_KEY in message)) {
            return;
        }
        for (const worker of Object.values(cluster.workers ?? {})) {
            if (worker && worker !== from && worker.isConnected()) {
                worker.send(message as object, undefined, () => undefined);
            }
        }
    });
};
