import { ResolvedRunLogOptions } from '../config/run-log.options';
import { runScopeStorage } from '../decorators/run-scope';
import { RunLogger } from '../domain/workflow-context';
import { DuraflowLogger } from '../observability/duraflow-logger';
import { LogBatch, linesJson, PendingLogLine, RunLogLevel, RunLogStore } from '../persistence/run-log.store';
import { storableJson } from '../validation/storable-text';

/** What a run's log needs of the run: whether it replays its recorded path, and its claim. */
export interface RunLogOwner {
  taskId: string;
  workflowName: string;
  claimToken: string;
  /** True while the run replays recorded steps: a body line then was kept by the run that logged it. */
  replaying(): boolean;
}

/**
 * The `ctx.log` of one live run. Each line goes to Nest's Logger at once (with the task id) and
 * is kept in memory until the run's next checkpoint: a step's completion takes the pending lines
 * into its own statement (`take`); a failed attempt, a wait and the run's end write them with one
 * statement just before theirs (`flush`). None costs a statement per line. A body line logged
 * while the run replays recorded steps is not kept again (the run that logged it wrote it with
 * the checkpoint that followed it); a completed step's lines are never lost.
 */
export class RunLog {
  private pending: PendingLogLine[] = [];
  private readonly logger = new DuraflowLogger('DuraflowRun');

  constructor(
    private readonly owner: RunLogOwner,
    private readonly store: RunLogStore,
    private readonly limits: ResolvedRunLogOptions,
  ) {}

  /** The `ctx.log` the workflow's code calls. */
  get api(): RunLogger {
    const line = (level: RunLogLevel) => (message: string, metadata?: Record<string, unknown>) => this.line(level, message, metadata);
    return { debug: line('debug'), info: line('info'), warn: line('warn'), error: line('error') };
  }

  /** Takes the pending lines, to be written with a step's checkpoint (its statement); undefined when there is none. */
  take(): LogBatch | undefined {
    if (!this.pending.length) return undefined;
    const lines = this.pending;
    this.pending = [];
    return { json: linesJson(lines), maxPerTask: this.limits.maxPerTask };
  }

  /** Writes the pending lines, fenced on the run's claim: false when the claim no longer owns the task. */
  async flush(): Promise<boolean> {
    if (!this.pending.length) return true;
    const lines = this.pending;
    const written = await this.store.append(this.owner.taskId, this.owner.claimToken, lines, this.limits.maxPerTask);
    if (this.pending === lines) this.pending = [];
    else this.pending = this.pending.slice(lines.length);
    return written;
  }

  private line(level: RunLogLevel, message: unknown, metadata: unknown): void {
    const step = runScopeStorage.getStore()?.step;
    if (!step && this.owner.replaying()) return;
    const text = cut(String(message), this.limits.maxMessageChars);
    const { taskId, workflowName } = this.owner;
    const metadataJson = this.store.encodeMetadata(taskId, this.metadataJson(metadata));
    const fields = { taskId, workflow: workflowName, stepKey: step?.key };
    if (level === 'info') this.logger.log(text, fields);
    else this.logger[level](text, fields);
    this.pending.push({
      level,
      message: text,
      metadataJson,
      stepKey: step?.key ?? null,
      attempt: step?.context.attempt ?? null,
      at: new Date(),
    });
  }

  private metadataJson(metadata: unknown): string | null {
    if (metadata === undefined || metadata === null) return null;
    let json: string | undefined;
    try {
      json = JSON.stringify(metadata);
    } catch {
      return JSON.stringify({ unserializable: true });
    }
    if (json === undefined) return null;
    const bytes = Buffer.byteLength(json);
    if (bytes > this.limits.maxMetadataBytes) return JSON.stringify({ truncated: true, bytes });
    return storableJson(json);
  }
}

function cut(text: string, max: number): string {
  const clean = text.split('\0').join('');
  return clean.length > max ? `${clean.slice(0, max)}…` : clean;
}
