import { randomUUID } from 'node:crypto';
import { decodedTask, decodeError, decodeStepOutput } from '../../codec/decoded-rows';
import { PayloadCoder } from '../../codec/payload-coder';
import { AgentTask } from '../../domain/entities/agent-task.entity';
import { SqlExecutor } from '../duraflow-database';
import type { ClaimedTask } from './claim-tasks';
import type { CreatedTask, NewTask, NewTasks } from './create-tasks';
import type { StepRecoder } from './fork-task';
import type { WaitSettlement, WaitToSettle } from './settle-wait';

const IDENTITY = new PayloadCoder({ codec: undefined });

/**
 * The payloads of the lifecycle's moves through the codec (codec/payload-coder.ts): a new
 * task's input bound to the id it is given here, outputs, errors and signals encoded on the
 * way in; tasks and settled waits decoded when read. Without a codec every call is the identity.
 */
export class TaskCoding {
  readonly coder: PayloadCoder;

  constructor(coder: PayloadCoder | undefined) {
    this.coder = coder ?? IDENTITY;
  }

  newTask<T extends NewTask>(task: T): T {
    if (!this.coder.encoding) return task;
    const id = task.id ?? randomUUID();
    return { ...task, id, inputJson: this.coder.encodeJson(id, 'input', task.inputJson) };
  }

  newTasks(batch: NewTasks): NewTasks {
    if (!this.coder.encoding) return batch;
    const ids = batch.inputsJson.map(() => randomUUID());
    return { ...batch, ids, inputsJson: batch.inputsJson.map((json, index) => this.coder.encodeJson(ids[index], 'input', json)) };
  }

  /**
   * A create's result decoded. With a codec, the input of a task found by its idempotency key is
   * compared decoded (as jsonb, key order and number spelling aside): ciphertexts never compare.
   */
  async created(created: CreatedTask, inputJson: string, executor: SqlExecutor): Promise<CreatedTask> {
    this.task(created.task);
    if (!this.coder.encoding || created.created) return created;
    const { rows } = await executor.query(`SELECT $1::jsonb = $2::jsonb AS same`, [JSON.stringify(created.task.input ?? null), inputJson]);
    return { ...created, sameInput: rows[0].same === true };
  }

  task<T extends AgentTask | null | undefined>(task: T): T {
    return decodedTask(this.coder, task);
  }

  tasks(tasks: AgentTask[]): AgentTask[] {
    for (const task of tasks) this.task(task);
    return tasks;
  }

  claimed(claimed: ClaimedTask[]): ClaimedTask[] {
    for (const { task } of claimed) this.task(task);
    return claimed;
  }

  outputs(ids: string[], outputs: Array<string | null>): Array<string | null> {
    return this.coder.encoding ? outputs.map((json, index) => this.coder.encodeJson(ids[index], 'output', json)) : outputs;
  }

  error<T extends string | null>(taskId: string, errorJson: T): T {
    return this.coder.encodeJson(taskId, 'error', errorJson) as T;
  }

  signal(taskId: string, payloadJson: string | null): string | null {
    return this.coder.encodeJson(taskId, 'signal', payloadJson);
  }

  /** A settled wait's output (a signal's payload, a child's output) or error, decoded from where it was encoded. */
  settlement(wait: WaitToSettle, settled: WaitSettlement): WaitSettlement {
    if (!this.coder.encoding) return settled;
    const input = wait.kind === 'child' ? { childTaskId: wait.childTaskId } : null;
    if (settled.outcome === 'completed') {
      return { ...settled, output: decodeStepOutput(this.coder, wait.taskId, wait.kind, input, settled.output) };
    }
    if (settled.outcome === 'failed') return { ...settled, error: decodeError(this.coder, wait.taskId, settled.error) };
    return settled;
  }

  /** With a codec, what re-encodes a fork's copied rows (read under the original's id) under the fork's id. */
  forkRecoder(originalId: string): ((forkId: string) => StepRecoder) | undefined {
    if (!this.coder.encoding) return undefined;
    const coder = this.coder;
    return (forkId) => (row) => {
      const encode = (field: 'signal' | 'step_output', value: unknown) =>
        value === null || value === undefined ? null : JSON.stringify(coder.encode(forkId, field, value));
      const output =
        row.kind === 'child'
          ? JSON.stringify(row.output)
          : encode(row.kind === 'signal' ? 'signal' : 'step_output', decodeStepOutput(coder, originalId, row.kind, row.input, row.output));
      const error =
        row.error === null || row.error === undefined
          ? null
          : JSON.stringify(coder.encode(forkId, 'error', decodeError(coder, originalId, row.error)));
      return { outputJson: row.output === null ? null : output, errorJson: error };
    };
  }
}
