import { Client } from 'pg';
import { clientExecutor, DuraflowDatabase } from '@duraflow/nestjs/persistence/duraflow-database';
import { StepStore } from '@duraflow/nestjs/persistence/step.store';
import { TaskTransitions } from '@duraflow/nestjs/persistence/lifecycle/task-transitions';
import { NOOP_WORKFLOW } from './workflows';

export interface Statement {
  text: string;
  values: unknown[];
  name?: string;
}

/**
 * A stand-in for DuraflowDatabase that records the statements a store sends and answers
 * each with no rows: the bench runs exactly the library's SQL, whatever it becomes.
 */
export function recordingDatabase(captured: Statement[]): DuraflowDatabase {
  const recorder = {
    query: async (text: string, values: unknown[] = [], name?: string) => {
      captured.push({ text, values, name });
      return { rows: [], rowCount: 0 };
    },
    transaction: async <T>(work: (executor: unknown) => Promise<T>) => work(recorder),
  };
  return recorder as unknown as DuraflowDatabase;
}

/** `tasks`: the moves of the task lifecycle (TaskTransitions); `steps`: the checkpoints (StepStore). */
export type StoreKind = 'tasks' | 'steps';

/**
 * Calls `store.method(...args)` on a store built over a recording database and returns what it
 * sent, or undefined when the store has no such method. The stores are internals the library
 * is free to reshape, so they are reached by name: a renamed method makes a probe report
 * "not measured" instead of breaking the project's type-check.
 */
export async function captureStoreCall(kind: StoreKind, method: string, args: unknown[]): Promise<Statement[] | undefined> {
  const captured: Statement[] = [];
  const Store = (kind === 'tasks' ? TaskTransitions : StepStore) as unknown as new (db: DuraflowDatabase) => Record<string, unknown>;
  const store = new Store(recordingDatabase(captured));
  const fn = store[method];
  if (typeof fn !== 'function') return undefined;
  await (fn as (...args: unknown[]) => Promise<unknown>).apply(store, args);
  return captured;
}

/** The statement(s) the claim (TaskTransitions.claim) sends for a batch of `batch`. */
export async function captureClaimStatements(batch: number): Promise<Statement[]> {
  const captured = await captureStoreCall('tasks', 'claim', ['bench-claimer', [NOOP_WORKFLOW], batch]);
  if (!captured) throw new Error('TaskTransitions has no claim method any more: update bench/sql-capture.ts');
  if (!captured.length) throw new Error('TaskTransitions.claim sent no statement to the recording executor');
  return captured;
}

/**
 * Sends a captured statement the way the library sends it (DuraflowDatabase's executor over
 * this connection): named and prepared when it has a name (under `prefix`_name here, so each
 * scenario keeps its own), else as it is, several statements in one round trip included.
 */
export function sendAsLibrary(client: Client, statement: Statement, prefix?: string): Promise<{ rows: any[]; rowCount: number }> {
  const name = statement.name && prefix ? `${prefix}_${statement.name}` : statement.name;
  return clientExecutor(client).query(statement.text, statement.values, name);
}

/**
 * A captured text cut into its statements: the ones that set up its transaction, and the last
 * one, the statement proper (what EXPLAIN can take). Cuts at semicolons outside quoted strings,
 * which is enough for the library's SQL (its literals are quoted strings).
 */
export function splitStatements(statement: Statement): { setup: string[]; last: Statement } {
  const parts: string[] = [];
  let current = '';
  let quoted = false;
  for (const char of statement.text) {
    if (char === "'") quoted = !quoted;
    if (char === ';' && !quoted) {
      parts.push(current);
      current = '';
    } else {
      current += char;
    }
  }
  parts.push(current);
  const statements = parts.map((part) => part.trim()).filter(Boolean);
  const last = statements.pop() ?? '';
  return { setup: statements, last: { ...statement, text: last } };
}
