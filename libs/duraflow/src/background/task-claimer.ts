import { Injectable, Logger } from '@nestjs/common';
import { ClaimableWorkflow, WorkflowRegistry } from '../discovery/workflow.registry';
import { FlowLimitStats } from '../domain/flow-control';
import { FlowLimitsStore } from '../persistence/flow-limits.store';
import { ClaimedTask } from '../persistence/lifecycle/claim-tasks';
import { TaskTransitions } from '../persistence/lifecycle/task-transitions';
import { describeError } from '../util/describe-error';
import { FlowLimits } from '../validation/flow-limits';

/** How often `stats().limits` is read again, at most. */
const LIMITS_REFRESH_MS = 1_000;

/**
 * Which claim takes which of this process's workflows. Workflows without flow control go
 * through `TaskTransitions.claim` (the plain claim: a process that registers no limited workflow
 * sends exactly that one statement); each limited workflow through its own limited claim
 * (`FlowLimitsStore.claimLimitedTasks`). With both, every call starts with the next of them in
 * turn, so neither starves the other, and claims the rest of the batch from the ones after it.
 */
@Injectable()
export class TaskClaimer {
  private readonly logger = new Logger('Duraflow');
  private unlimited: ClaimableWorkflow[] = [];
  /** The versions this process registers, by limited workflow. */
  private limitedVersions = new Map<string, number[]>();
  private limited: FlowLimits[] = [];
  private turn = 0;
  private registered = false;
  private lastLimits: FlowLimitStats[] = [];
  private limitsReadAt = 0;
  private reading: Promise<void> | undefined;
  /**
   * Limited workflows whose last claim returned fewer tasks than asked (a limit is full, or
   * nothing is left): not claimed again until something may have changed (`mayHaveRoom`: a task
   * ended here or anywhere, a task was submitted, a poll), so a slot freed here before its
   * completion committed does not cost a claim that can only find the limit still full.
   */
  private readonly saturated = new Set<string>();
  /**
   * A poll came: the saturated limited workflows may have work again. With a plain claim to send,
   * they are probed in its round trip (`claimProbing`) rather than each claimed: an idle poll is
   * one transaction, whatever the number of limited workflows.
   */
  private probeSaturated = false;

  constructor(
    private readonly registry: WorkflowRegistry,
    private readonly transitions: TaskTransitions,
    private readonly flows: FlowLimitsStore,
  ) {}

  /** A limited workflow waits for a slot or a task: a task that ended anywhere may let it claim. */
  get heldBack(): boolean {
    return this.saturated.size > 0;
  }

  /** A task ended or was submitted (here or anywhere), or a poll came: every limited workflow may be claimed again. */
  mayHaveRoom(): void {
    this.saturated.clear();
  }

  /** A poll: what `mayHaveRoom` does, the saturated limited workflows asked about in the next plain claim's round trip when there is one. */
  polled(): void {
    if (this.unlimited.length) this.probeSaturated = true;
    else this.mayHaveRoom();
  }

  /** Sorts the registered workflows by claim, and registers the limits in the database (retried on the next claim if it fails). */
  async prepare(): Promise<void> {
    this.sortWorkflows();
    this.registered = false;
    await this.register();
  }

  private sortWorkflows(): void {
    const claimable = this.registry.claimable();
    // A workflow's limits are those of its newest registered version.
    this.limited = claimable.map(({ name }) => this.registry.get(name).flow).filter((flow): flow is FlowLimits => !!flow);
    const limitedNames = new Set(this.limited.map((flow) => flow.workflowName));
    this.limitedVersions = new Map(claimable.filter(({ name }) => limitedNames.has(name)).map(({ name, versions }) => [name, versions]));
    this.unlimited = claimable.filter(({ name }) => !limitedNames.has(name));
  }

  /** Up to `limit` tasks of this process's workflows, none beyond a limit. Throws what the claim throws. */
  async claim(workerId: string, limit: number): Promise<ClaimedTask[]> {
    if (!this.limited.length) return this.transitions.claim(workerId, this.unlimited, limit);
    if (!this.registered) await this.register();
    const claimed: ClaimedTask[] = [];
    const probing = this.probeSaturated && this.saturated.size > 0;
    this.probeSaturated = false;
    if (probing) {
      const probed = this.limited.filter((flow) => this.saturated.has(flow.workflowName));
      const versions = probed.map(({ workflowName: name }) => ({ name, versions: this.limitedVersions.get(name) ?? [1] }));
      const plain = await this.transitions.claimProbing(workerId, this.unlimited, limit, versions);
      for (const name of plain.runnable) this.saturated.delete(name);
      claimed.push(...plain.claimed);
    }
    const groups: Array<FlowLimits | ClaimableWorkflow[]> = this.unlimited.length ? [this.unlimited, ...this.limited] : [...this.limited];
    const first = this.turn++ % groups.length;
    for (let i = 0; i < groups.length && claimed.length < limit; i++) {
      const group = groups[(first + i) % groups.length];
      const want = limit - claimed.length;
      if (Array.isArray(group)) {
        // Already claimed, with the probe.
        if (probing) continue;
        claimed.push(...(await this.transitions.claim(workerId, group, want)));
      } else if (!this.saturated.has(group.workflowName)) {
        const got = await this.flows.claimLimitedTasks(workerId, group, this.limitedVersions.get(group.workflowName) ?? [1], want);
        if (got.length < want) this.saturated.add(group.workflowName);
        claimed.push(...got);
      }
    }
    return claimed;
  }

  /** What waits on the limits of this process's workflows, as last read (at most every second, when asked for). */
  limitStats(): FlowLimitStats[] {
    if (this.limited.length && !this.reading && Date.now() - this.limitsReadAt >= LIMITS_REFRESH_MS) {
      this.limitsReadAt = Date.now();
      this.reading = this.flows
        .readLimits(this.limited.map((flow) => flow.workflowName))
        .then((limits) => void (this.lastLimits = limits))
        .catch(() => undefined)
        .finally(() => (this.reading = undefined));
    }
    return this.lastLimits;
  }

  /** Reads the limits now (what `stats().limits` then shows). */
  async readLimitStats(): Promise<FlowLimitStats[]> {
    // Also on a node whose worker never started (it never sorted its workflows).
    if (!this.limited.length) this.sortWorkflows();
    if (!this.limited.length) return [];
    this.lastLimits = await this.flows.readLimits(this.limited.map((flow) => flow.workflowName));
    this.limitsReadAt = Date.now();
    return this.lastLimits;
  }

  private async register(): Promise<void> {
    if (!this.limited.length) return;
    try {
      await this.flows.registerLimits(this.limited);
      this.registered = true;
    } catch (error) {
      this.logger.warn(`Could not register the flow limits (${describeError(error).message}); retrying on the next claim`);
    }
  }
}
