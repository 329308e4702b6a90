import { DuraflowError } from './duraflow.error';

/** Who holds a node id's lock, as PostgreSQL sees that session (all unknown when it could not be read). */
export interface NodeIdHolder {
  /** The holder's server process (`pg_stat_activity.pid`). */
  pid?: number;
  /** Its `application_name`: `duraflow-node <worker id>`. */
  applicationName?: string;
  /** Where it connects from (`client_addr`); empty for a Unix socket. */
  clientAddress?: string;
  /** When its session started. */
  since?: Date;
}

/**
 * `worker.nodeId` is taken: another live process runs as this node (it holds the node's lock in
 * PostgreSQL). Two processes of one node would each take the other's tasks back, so the second
 * one's worker refuses to start.
 */
export class NodeIdInUseError extends DuraflowError {
  readonly code = 'NODE_ID_IN_USE';
  constructor(
    readonly nodeId: string,
    readonly holder: NodeIdHolder = {},
  ) {
    super(
      `Node id "${nodeId}" (worker.nodeId) is in use: another live process runs as this node` +
        `${describeHolder(holder)}. Each process needs a node id of its own, stable across its restarts: ` +
        'stop the other process first (a restart must not start the new process before the old one has exited), ' +
        "or give this one another id (a StatefulSet's pod name, a systemd instance name).",
    );
  }
}

function describeHolder(holder: NodeIdHolder): string {
  const parts = [
    holder.applicationName ? `"${holder.applicationName}"` : undefined,
    holder.pid !== undefined ? `PostgreSQL backend pid ${holder.pid}` : undefined,
    holder.clientAddress ? `from ${holder.clientAddress}` : undefined,
    holder.since ? `since ${holder.since.toISOString()}` : undefined,
  ].filter(Boolean);
  return parts.length ? ` (${parts.join(', ')})` : '';
}
