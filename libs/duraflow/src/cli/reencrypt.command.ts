import { AesGcmCodec } from '../codec/aes-gcm-codec';
import { codecFromEnv } from '../codec/codec-from-env';
import { decodeError, stepOutputOrigin } from '../codec/decoded-rows';
import { PayloadCoder } from '../codec/payload-coder';
import { PayloadUnreadableError } from '../domain/errors';
import {
  PAYLOAD_COLUMNS,
  PayloadColumn,
  reencryptBatch,
  reencryptHistoryBatch,
  StoredPayload,
  tableExists,
} from '../persistence/lifecycle/reencrypt-payloads';
import { CliUsageError } from './cli.errors';
import { openCliDatabase } from './cli-database';
import { describeDatabase } from './database-connection';
import { terminalText as shown } from './terminal-text';

export interface ReencryptOptions {
  batchSize?: string;
  json: boolean;
}

/** What one column's walk did. */
export interface ReencryptCount {
  column: string;
  /** Rewritten under the current key (they were plaintext, or under another key). */
  rewritten: number;
  /** Left as they are: no configured key opens them (each named in `unreadable`, at most 20). */
  unreadable: number;
}

export interface ReencryptReport {
  currentKey: string;
  columns: ReencryptCount[];
  rewritten: number;
  unreadable: number;
  /** A few of the values no key opened: where they are. */
  unreadableExamples: string[];
}

const DEFAULT_BATCH = 500;

/**
 * `duraflow reencrypt`: every payload column walked in batches (keyset, one short transaction
 * each, FOR UPDATE SKIP LOCKED), each value not sealed under the current key decoded with the
 * configured keys and sealed again with the current one. Idempotent: a second run rewrites
 * nothing. 0 when every value is now under the current key, 1 when some could not be read.
 */
export async function reencryptCommand(url: string, options: ReencryptOptions, env: NodeJS.ProcessEnv, print: (line: string) => void) {
  const codec = codecFromEnv(env);
  if (!codec) throw new CliUsageError('reencrypt needs the keys: DURAFLOW_CODEC_KEYS=id:base64,... and DURAFLOW_CODEC_CURRENT=id.');
  const batchSize = batchSizeOf(options.batchSize);
  const database = await openCliDatabase(url, codec);
  try {
    const report = await reencryptAll(database.db, new PayloadCoder({ codec }), codec, batchSize);
    if (options.json) print(JSON.stringify(report, null, 2));
    else formatReport(report, describeDatabase(url)).forEach((line) => print(line));
    return report.unreadable ? 1 : 0;
  } finally {
    await database.close().catch(() => undefined);
  }
}

type Database = Awaited<ReturnType<typeof openCliDatabase>>['db'];

async function reencryptAll(db: Database, coder: PayloadCoder, codec: AesGcmCodec, batchSize: number): Promise<ReencryptReport> {
  const report: ReencryptReport = { currentKey: codec.currentKeyId, columns: [], rewritten: 0, unreadable: 0, unreadableExamples: [] };
  const note = (column: string, rewritten: number, unreadable: number) => {
    report.columns.push({ column, rewritten, unreadable });
    report.rewritten += rewritten;
    report.unreadable += unreadable;
  };
  const unreadable = (where: string) => {
    if (report.unreadableExamples.length < 20) report.unreadableExamples.push(where);
  };
  for (const target of PAYLOAD_COLUMNS) {
    if (!(await tableExists(db, target.table))) continue;
    const recode = recoderOf(coder, target, unreadable);
    let after: unknown[] | null = null;
    let rewritten = 0;
    let left = 0;
    do {
      const batch = await db.transaction((tx) => reencryptBatch(tx, target, after, batchSize, codec.currentKeyId, recode));
      rewritten += batch.rewritten;
      left += batch.left;
      after = batch.last;
    } while (after);
    note(`${target.table}.${target.column}`, rewritten, left);
  }
  let after: string | null = null;
  let rewritten = 0;
  let left = 0;
  do {
    const batch = await db.transaction((tx) =>
      reencryptHistoryBatch(tx, after, batchSize, codec.currentKeyId, historyRecoder(coder, unreadable)),
    );
    rewritten += batch.rewritten;
    left += batch.left;
    after = batch.last;
  } while (after);
  note('agent_tasks.history (retried errors)', rewritten, left);
  return report;
}

/** A value decoded from where it was encoded and sealed again there; undefined when no key opens it. */
function recoderOf(coder: PayloadCoder, target: PayloadColumn, unreadable: (where: string) => void) {
  return (row: StoredPayload): string | undefined => {
    try {
      if (target.field === 'error') return JSON.stringify(coder.encode(row.taskId, 'error', decodeError(coder, row.taskId, row.stored)));
      const origin =
        target.field === 'step_output' ? stepOutputOrigin(row.taskId, row.extra.kind as string | null, row.extra.input) : undefined;
      const taskId = origin?.taskId ?? row.taskId;
      const field = origin?.field ?? target.field;
      return JSON.stringify(coder.encode(taskId, field, coder.decode(taskId, field, row.stored)));
    } catch (error) {
      if (!(error instanceof PayloadUnreadableError)) throw error;
      unreadable(`${target.table}.${target.column} (${target.key.join(', ')}) = (${row.key.map(String).join(', ')})`);
      return undefined;
    }
  };
}

function historyRecoder(coder: PayloadCoder, unreadable: (where: string) => void) {
  return (taskId: string, history: unknown[]): string | undefined => {
    try {
      return JSON.stringify(
        history.map((entry) => {
          const item = entry as Record<string, unknown>;
          if (item?.kind !== 'retried' || !item.error || typeof item.error !== 'object') return entry;
          return { ...item, error: coder.encode(taskId, 'error', decodeError(coder, taskId, item.error)) };
        }),
      );
    } catch (error) {
      if (!(error instanceof PayloadUnreadableError)) throw error;
      unreadable(`agent_tasks.history (id) = (${taskId})`);
      return undefined;
    }
  };
}

function batchSizeOf(value: string | undefined): number {
  if (value === undefined) return DEFAULT_BATCH;
  const size = Number(value);
  if (!Number.isSafeInteger(size) || size < 1 || size > 10_000) {
    throw new CliUsageError(`--batch-size must be a whole number from 1 to 10000, got "${value}".`);
  }
  return size;
}

function formatReport(report: ReencryptReport, source: string): string[] {
  const lines = [
    `Re-encrypted ${report.rewritten} value${report.rewritten === 1 ? '' : 's'} on ${shown(source)} under key ${shown(report.currentKey)}` +
      (report.unreadable ? `; ${report.unreadable} no configured key opens (left as they are)` : ''),
  ];
  for (const column of report.columns) {
    if (column.rewritten || column.unreadable) {
      lines.push(`  ${column.column}: ${column.rewritten} rewritten${column.unreadable ? `, ${column.unreadable} unreadable` : ''}`);
    }
  }
  for (const where of report.unreadableExamples) lines.push(`  cannot decrypt: ${shown(where)}`);
  return lines;
}
