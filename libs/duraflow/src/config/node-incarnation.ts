import { randomBytes } from 'node:crypto';

/**
 * The worker id of a process that runs as a node (`worker.nodeId`): `<nodeId>#<8 hex digits>`,
 * unique to this process (an incarnation of the node) and yet telling which node it belongs to,
 * so a later process of that node finds the tasks its earlier ones left running
 * (persistence/lifecycle/recover-node-tasks.ts matches exactly this shape).
 */
export const NODE_INCARNATION = { separator: '#', hexDigits: 8 } as const;

/** The longest node id: a worker id (agent_tasks.worker_id, 255 characters) with its incarnation suffix. */
export const MAX_NODE_ID_LENGTH = 255 - 1 - NODE_INCARNATION.hexDigits;

/** A new incarnation's worker id for `nodeId`. */
export function nodeIncarnationWorkerId(nodeId: string): string {
  return `${nodeId}${NODE_INCARNATION.separator}${randomBytes(NODE_INCARNATION.hexDigits / 2).toString('hex')}`;
}
