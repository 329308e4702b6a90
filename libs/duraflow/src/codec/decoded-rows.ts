import { AgentTask } from '../domain/entities/agent-task.entity';
import { StepRun } from '../domain/entities/step-run.entity';
import { PayloadField } from '../domain/payload-codec';
import { PayloadUnreadableError } from '../domain/errors/codec.errors';
import { CANNOT_DECRYPT, type PayloadCoder } from './payload-coder';
import { readableErrorParts } from './readable-error';

/** The stored values behind the getters decodeLazily made, for `viewable`. */
const storedValues = new WeakMap<object, Record<string, unknown>>();

/**
 * Replaces `object[key]` with a getter that decodes the stored value on first read (and keeps
 * it): a value no key opens throws PayloadUnreadableError where it is read (the run that needs
 * the input, the API that returns it), not where the row was fetched (a claim of many tasks).
 */
export function decodeLazily(object: object, key: string, decode: (stored: unknown) => unknown): void {
  const stored = (object as Record<string, unknown>)[key];
  if (stored === null || stored === undefined) return;
  let decoded: { value: unknown } | undefined;
  const kept = storedValues.get(object) ?? {};
  kept[key] = stored;
  storedValues.set(object, kept);
  Object.defineProperty(object, key, {
    enumerable: true,
    configurable: true,
    get: () => (decoded ??= { value: decode(stored) }).value,
    set: (value: unknown) => {
      decoded = { value };
    },
  });
}

/** The task with its input, output, error (and its history's errors) decoded when read. */
export function decodedTask<T extends AgentTask | null | undefined>(coder: PayloadCoder, task: T): T {
  if (!coder.encoding || !task) return task;
  const id = task.id;
  decodeLazily(task, 'input', (stored) => coder.decode(id, 'input', stored));
  decodeLazily(task, 'output', (stored) => coder.decode(id, 'output', stored));
  decodeLazily(task, 'error', (stored) => decodeError(coder, id, stored));
  for (const entry of task.history ?? []) {
    if (entry.kind === 'retried') decodeLazily(entry, 'error', (stored) => decodeError(coder, id, stored));
  }
  return task;
}

/** A task's error or a step's: its own part decoded, and a failed child's error (`childError`) with the child's id. */
export function decodeError(coder: PayloadCoder, taskId: string, stored: unknown): any {
  const error = coder.decode(taskId, 'error', stored) as Record<string, unknown> | null;
  if (error && typeof error === 'object' && typeof error.childTaskId === 'string' && error.childError) {
    return { ...error, childError: decodeError(coder, error.childTaskId, error.childError) };
  }
  return error;
}

/**
 * Where a step row's output was encoded: an ordinary step's under (task, step_output); a
 * signal wait's is the signal's payload as it was sent (task, signal); a child's is the child
 * task's output (child, output), copied by the statement that settled the wait.
 */
export function stepOutputOrigin(taskId: string, kind: string | null | undefined, input: unknown): { taskId: string; field: PayloadField } {
  if (kind === 'signal') return { taskId, field: 'signal' };
  const childTaskId = kind === 'child' && input && typeof input === 'object' ? (input as Record<string, unknown>).childTaskId : undefined;
  if (typeof childTaskId === 'string') return { taskId: childTaskId, field: 'output' };
  return { taskId, field: 'step_output' };
}

/** A step's output as its row stores it, decoded from where it was encoded. */
export function decodeStepOutput(coder: PayloadCoder, taskId: string, kind: string | null | undefined, input: unknown, stored: unknown) {
  const origin = stepOutputOrigin(taskId, kind, input);
  return coder.decode(origin.taskId, origin.field, stored);
}

/** `object.output` and `object.error` of a step row decoded when read (a run's memos, a rollback's steps). */
export function decodeStepFieldsLazily<T extends object>(
  coder: PayloadCoder | undefined,
  taskId: string,
  kind: string | null | undefined,
  input: unknown,
  object: T,
): T {
  if (!coder?.encoding) return object;
  decodeLazily(object, 'output', (stored) => decodeStepOutput(coder, taskId, kind, input, stored));
  decodeLazily(object, 'error', (stored) => decodeError(coder, taskId, stored));
  return object;
}

/** The step with its output and error decoded when read. */
export function decodedStep<T extends StepRun | null | undefined>(coder: PayloadCoder | undefined, step: T): T {
  if (!coder?.encoding || !step) return step;
  return decodeStepFieldsLazily(coder, step.taskId, step.kind, step.input, step);
}

/**
 * For a view (the dashboard, the CLI): each of `keys` of `object` decoded now, or, when no key
 * opens it, `[cannot decrypt]` (an error keeps its readable parts: its code, name, step key).
 */
export function viewable<T extends object | null | undefined>(object: T, keys: string[] = ['input', 'output', 'error']): T {
  if (!object) return object;
  for (const key of keys) {
    try {
      void (object as Record<string, unknown>)[key];
    } catch (error) {
      if (!(error instanceof PayloadUnreadableError)) throw error;
      const stored = storedValues.get(object)?.[key];
      const shown = key === 'error' ? { ...readableErrorParts(stored), message: CANNOT_DECRYPT } : CANNOT_DECRYPT;
      Object.defineProperty(object, key, { value: shown, enumerable: true, configurable: true, writable: true });
    }
  }
  return object;
}
