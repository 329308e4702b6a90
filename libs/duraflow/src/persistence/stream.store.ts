import { Injectable } from '@nestjs/common';
import { TASK_TALK_CHANNEL } from '../domain/duraflow.constants';
import { DuraflowDatabase } from './duraflow-database';
import { ownedTaskRow } from './lifecycle/fencing';
import { CompletedStep, completedStepParams, UPSERT_COMPLETED_STEP } from './step.store';

/** A chunk to write: its stream, its value as stored (JSON text, through the codec) and its origin in the run. */
export interface PendingChunk {
  key: string;
  chunkJson: string;
  /** `b:<position>` for a chunk of the run's body, `s:<step key>#<n>` for the n-th chunk of a step: written once. */
  origin: string;
}

/** A chunk as stored (its value as the codec stored it). */
export interface StoredChunk {
  seq: number;
  chunk: unknown;
  createdAt: Date;
}

/** A stream's head with its task's status, read in one snapshot. */
export interface StreamState {
  taskStatus: string | null;
  lastSeq: number;
  closed: boolean;
}

/** What a run knows of its task's chunks when it first writes one: how many, and which body positions wrote theirs. */
export interface KnownChunks {
  total: number;
  bodyOrigins: Set<string>;
}

/** A step's chunks written with its checkpoint. */
export interface ChunkBatch {
  json: string;
  count: number;
}

export interface StreamHead {
  key: string;
  lastSeq: number;
  closedAt: Date | null;
}

/**
 * The CTEs that write the chunks of the JSON array `json` ({ key, chunk, origin }) of task `task`
 * when the CTE `gate` has a row, each origin once. A stream's seq is taken from its head row
 * (INSERT … ON CONFLICT DO UPDATE locks it until commit), so two statements of one stream number
 * their chunks apart and commit in seq order: a reader past seq n never misses a later commit
 * of a lower seq. Placed after other CTEs (`, ` before it is the caller's).
 */
function appendChunksCtes(task: string, gate: string, json: string): string {
  return `input AS (
         SELECT t.e->>'key' AS key, t.e->'chunk' AS chunk, t.e->>'origin' AS origin, t.ord
         FROM jsonb_array_elements(${json}::jsonb) WITH ORDINALITY AS t(e, ord)
         WHERE EXISTS (SELECT 1 FROM ${gate})
           AND NOT EXISTS (SELECT 1 FROM task_stream_chunks c WHERE c.task_id = ${task} AND c.origin = t.e->>'origin')
       ),
       counts AS (SELECT key, count(*)::int AS n FROM input GROUP BY key),
       heads AS (
         INSERT INTO task_streams (task_id, key, last_seq) SELECT ${task}, key, n FROM counts
         ON CONFLICT (task_id, key) DO UPDATE SET last_seq = task_streams.last_seq + EXCLUDED.last_seq
         RETURNING key, last_seq
       ),
       chunks AS (
         INSERT INTO task_stream_chunks (task_id, key, seq, chunk, origin, created_at)
         SELECT ${task}, i.key, h.last_seq - c.n + row_number() OVER (PARTITION BY i.key ORDER BY i.ord), i.chunk, i.origin, clock_timestamp()
         FROM input i JOIN counts c USING (key) JOIN heads h USING (key)
         RETURNING 1
       )`;
}

/** The NOTIFY of readers when `written` (a CTE) has a row; sent at commit. */
function notifyTalk(task: string, written: string): string {
  return `(SELECT count(pg_notify('${TASK_TALK_CHANNEL}', ${task}::text)::text) FROM (SELECT 1 FROM ${written} LIMIT 1) w)`;
}

/**
 * The statements of `task_streams` and `task_stream_chunks`. Chunks are written only by the
 * claim that owns the running task: a body chunk in a statement of its own, a step's chunks
 * in the statement of the step's checkpoint (they land if and only if the step's row does).
 */
@Injectable()
export class StreamStore {
  constructor(private readonly db: DuraflowDatabase) {}

  /** Chunks of the run's body, in order, while the claim owns the task (each origin once): false when it no longer does. */
  async appendBodyChunks(taskId: string, claimToken: string, chunks: PendingChunk[]): Promise<boolean> {
    const { rows } = await this.db.query<{ owned: boolean }>(
      `WITH owner AS (${ownedTaskRow('$1', '$2')}),
       ${appendChunksCtes('$1', 'owner', '$3')}
       SELECT EXISTS (SELECT 1 FROM owner) AS owned, ${notifyTalk('$1', 'chunks')} AS notified`,
      [taskId, claimToken, chunksJson(chunks)],
      'duraflow_stream_body_chunks',
    );
    return rows[0]?.owned === true;
  }

  /** The chunks the task keeps, and the origins of those its runs' bodies wrote (a replay writes them not again). */
  async known(taskId: string): Promise<KnownChunks> {
    const { rows } = await this.db.query(
      `SELECT (SELECT coalesce(sum(last_seq), 0)::int FROM task_streams WHERE task_id = $1) AS total,
              (SELECT coalesce(array_agg(origin), '{}') FROM task_stream_chunks WHERE task_id = $1 AND origin LIKE 'b:%') AS origins`,
      [taskId],
      'duraflow_stream_known',
    );
    return { total: rows[0].total, bodyOrigins: new Set(rows[0].origins) };
  }

  /** A step's checkpoint (as `upsertCompletedStep`) with its chunks, in one statement: the chunks land if and only if the row does. */
  async upsertCompletedStepWithChunks(step: CompletedStep, chunks: ChunkBatch): Promise<boolean> {
    const { rows } = await this.db.query<{ written: boolean }>(
      `WITH s AS (${UPSERT_COMPLETED_STEP} RETURNING id),
       ${appendChunksCtes('$1', 's', '$9')}
       SELECT EXISTS (SELECT 1 FROM s) AS written, ${notifyTalk('$1', 'chunks')} AS notified`,
      [...completedStepParams(step), chunks.json],
      'duraflow_step_completed_chunks',
    );
    return rows[0]?.written === true;
  }

  /** Closes the stream (once; closing again changes nothing) while the claim owns the task: false when it no longer does. */
  async close(taskId: string, claimToken: string, key: string): Promise<boolean> {
    const { rows } = await this.db.query<{ owned: boolean }>(
      `WITH owner AS (${ownedTaskRow('$1', '$2')}),
       closed AS (
         INSERT INTO task_streams (task_id, key, last_seq, closed_at) SELECT $1, $3, 0, clock_timestamp() FROM owner
         ON CONFLICT (task_id, key) DO UPDATE SET closed_at = coalesce(task_streams.closed_at, EXCLUDED.closed_at)
         RETURNING 1
       )
       SELECT EXISTS (SELECT 1 FROM owner) AS owned, ${notifyTalk('$1', 'closed')} AS notified`,
      [taskId, claimToken, key],
      'duraflow_stream_close',
    );
    return rows[0]?.owned === true;
  }

  /** The stream's chunks after `after`, in order, at most `limit`. */
  async page(taskId: string, key: string, after: number, limit: number): Promise<StoredChunk[]> {
    const { rows } = await this.db.query(
      `SELECT seq, chunk, created_at FROM task_stream_chunks WHERE task_id = $1 AND key = $2 AND seq > $3 ORDER BY seq LIMIT $4`,
      [taskId, key, after, limit],
      'duraflow_stream_page',
    );
    return rows.map((row) => ({ seq: row.seq, chunk: row.chunk, createdAt: row.created_at }));
  }

  /** The task's status and the stream's head in one snapshot (a terminal task writes no chunk after it). */
  async state(taskId: string, key: string): Promise<StreamState> {
    const { rows } = await this.db.query(
      `SELECT (SELECT status FROM agent_tasks WHERE id = $1) AS status, h.last_seq, h.closed_at
       FROM (SELECT 1) one LEFT JOIN task_streams h ON h.task_id = $1 AND h.key = $2`,
      [taskId, key],
      'duraflow_stream_state',
    );
    const row = rows[0];
    return { taskStatus: row.status ?? null, lastSeq: row.last_seq ?? 0, closed: row.closed_at != null };
  }

  /** The last `limit` chunks of the stream, oldest first (the dashboard's tail). */
  async tail(taskId: string, key: string, limit: number): Promise<StoredChunk[]> {
    const { rows } = await this.db.query(
      `SELECT seq, chunk, created_at FROM (
         SELECT seq, chunk, created_at FROM task_stream_chunks WHERE task_id = $1 AND key = $2 ORDER BY seq DESC LIMIT $3
       ) last ORDER BY seq`,
      [taskId, key, limit],
      'duraflow_stream_tail',
    );
    return rows.map((row) => ({ seq: row.seq, chunk: row.chunk, createdAt: row.created_at }));
  }

  /** What changes whenever the run sets an event or writes to (or closes) a stream: live pages compare it. */
  async talkStamp(taskId: string): Promise<string> {
    const { rows } = await this.db.query(
      `SELECT (SELECT coalesce(sum(last_seq), 0) || ':' || count(closed_at) FROM task_streams WHERE task_id = $1)
              || ':' || (SELECT coalesce(sum(position), 0) FROM task_events WHERE task_id = $1) AS stamp`,
      [taskId],
      'duraflow_talk_stamp',
    );
    return rows[0].stamp;
  }

  /** The task's streams, by key (the dashboard's list). */
  async heads(taskId: string, limit: number): Promise<StreamHead[]> {
    const { rows } = await this.db.query(
      `SELECT key, last_seq, closed_at FROM task_streams WHERE task_id = $1 ORDER BY key LIMIT $2`,
      [taskId, limit],
      'duraflow_stream_heads',
    );
    return rows.map((row) => ({ key: row.key, lastSeq: row.last_seq, closedAt: row.closed_at }));
  }
}

/** The chunks as one JSON array (each chunk inlined as JSON). */
export function chunksJson(chunks: PendingChunk[]): string {
  return `[${chunks.map((c) => `{"key":${JSON.stringify(c.key)},"origin":${JSON.stringify(c.origin)},"chunk":${c.chunkJson}}`).join(',')}]`;
}
