import type { ClaimableWorkflow } from '../discovery/workflow.registry';
import { countLiteral, varcharArrayLiteral } from './literals';

/** What a claim may take: a workflow name alone means its version 1 (a workflow that declares no version). */
export type ClaimableWorkflows = ReadonlyArray<string | ClaimableWorkflow>;

/**
 * The claim's filter on the tasks it walks past: of a (workflow_name, version) pair this worker
 * registers, and not held by the determinism guard. It is an extra condition on the ordered walk
 * of idx_agent_tasks_claim, evaluated on each row the walk reads, never a join or a sort: the
 * plan stays the walk whatever the versions. `coalesce(workflow_version, 1)`: NULL is version 1
 * (tasks of workflows that declare no version, and every task older than versions). The common
 * case (every workflow at version 1) is one comparison more than a claim by name alone.
 */
export function claimableCondition(workflows: ClaimableWorkflows): string {
  const byVersions = new Map<string, { names: string[]; versions: number[] }>();
  for (const workflow of workflows) {
    const { name, versions } = typeof workflow === 'string' ? { name: workflow, versions: [1] } : workflow;
    const sorted = [...new Set(versions)].sort((a, b) => a - b);
    const key = sorted.join(',');
    const group = byVersions.get(key) ?? { names: [], versions: sorted };
    group.names.push(name);
    byVersions.set(key, group);
  }
  const names = [...byVersions.values()].flatMap((group) => group.names);
  const conditions = [`workflow_name = ANY(${varcharArrayLiteral(names)})`, 'held_at IS NULL'];
  const groups = [...byVersions.values()];
  if (groups.length === 1) {
    conditions.push(versionCondition(groups[0].versions));
  } else if (groups.length > 1) {
    const alternatives = groups.map(
      (group) => `(workflow_name = ANY(${varcharArrayLiteral(group.names)}) AND ${versionCondition(group.versions)})`,
    );
    conditions.push(`(${alternatives.join(' OR ')})`);
  }
  return conditions.join(' AND ');
}

function versionCondition(versions: number[]): string {
  if (versions.length === 1) return `coalesce(workflow_version, 1) = ${countLiteral(versions[0])}`;
  return `coalesce(workflow_version, 1) = ANY(ARRAY[${versions.map(countLiteral).join(', ')}]::int[])`;
}
