import { Injectable, Optional } from '@nestjs/common';
import { decodedTask } from '../codec/decoded-rows';
import { PayloadCoder } from '../codec/payload-coder';
import { FlowLimitStats } from '../domain/flow-control';
import { FlowLimits } from '../validation/flow-limits';
import { DuraflowDatabase } from './duraflow-database';
import { ClientBase, QueryResultRow } from 'pg';
import {
  claimLimitedTasksSql,
  keyPendingTasks,
  claimPreparedLimitedTasks,
  PreparedLimitedClaim,
  preparedLimitedClaim,
} from './lifecycle/claim-limited-tasks';
import { readFlowLimits } from './sql/read-flow-limits';
import { CLAIM_SETTINGS, ClaimedTask, toClaimedTasks } from './lifecycle/claim-tasks';

/**
 * Flow control's statements: the limited claim (sql/claim-limited-tasks.ts), the limits the
 * workers register (flow_limits), and what waits on them (sql/read-flow-limits.ts).
 */
@Injectable()
export class FlowLimitsStore {
  /** The statement names each pooled connection has prepared (the limited claims). */
  private readonly prepared = new WeakMap<ClientBase, Set<string>>();
  /** Each limited workflow's prepared claim, by its limits and then its versions. */
  private readonly statements = new WeakMap<FlowLimits, Map<string, PreparedLimitedClaim>>();

  constructor(
    private readonly db: DuraflowDatabase,
    @Optional() private readonly coder?: PayloadCoder,
  ) {}

  /**
   * Claims up to `limit` tasks of a limited workflow, within its limits (see the statement's
   * header): as a statement each connection prepares once, or, behind a transaction-mode pooler
   * (no session state), as its full text planned on each call.
   */
  async claimLimitedTasks(workerId: string, flow: FlowLimits, versions: number[], limit: number): Promise<ClaimedTask[]> {
    let rows: QueryResultRow[];
    if (this.db.pooled) {
      rows = (await this.db.query(claimLimitedTasksSql(CLAIM_SETTINGS, workerId, flow, versions, limit))).rows;
    } else {
      const statement = this.statementOf(flow, versions);
      const claim = () =>
        this.db.onConnection((client) => {
          let prepared = this.prepared.get(client);
          if (!prepared) this.prepared.set(client, (prepared = new Set()));
          return claimPreparedLimitedTasks(client, prepared, CLAIM_SETTINGS, statement, workerId, limit);
        });
      // 26000: the connection lost its prepared statements (someone ran DEALLOCATE ALL or DISCARD
      // ALL on it). Nothing was claimed and that connection is destroyed: once more on another.
      rows = await claim().catch((error: unknown) => {
        if ((error as { code?: string }).code !== '26000') throw error;
        return claim();
      });
    }
    const claimed = toClaimedTasks(rows);
    if (this.coder) for (const { task } of claimed) decodedTask(this.coder, task);
    return claimed;
  }

  private statementOf(flow: FlowLimits, versions: number[]): PreparedLimitedClaim {
    let byVersions = this.statements.get(flow);
    if (!byVersions) this.statements.set(flow, (byVersions = new Map()));
    const key = versions.join(',');
    let statement = byVersions.get(key);
    if (!statement) byVersions.set(key, (statement = preparedLimitedClaim(flow, versions)));
    return statement;
  }

  /**
   * Writes the limits this process declares (what `duraflow status` reports against; the claim
   * itself uses the process's own), and gives the workflow's pending tasks submitted without a
   * key (before it had limits, or by a node that did not declare them) the key `''`, so the
   * limited claim sees them.
   */
  async registerLimits(flows: FlowLimits[]): Promise<void> {
    for (const flow of flows) {
      await this.db.query(
        `INSERT INTO flow_limits AS f (workflow_name, concurrency, keyed, key_concurrency, rate_limit, rate_period_ms, rate_per_key)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (workflow_name) DO UPDATE SET
           concurrency = EXCLUDED.concurrency, keyed = EXCLUDED.keyed, key_concurrency = EXCLUDED.key_concurrency,
           rate_limit = EXCLUDED.rate_limit, rate_period_ms = EXCLUDED.rate_period_ms,
           rate_per_key = EXCLUDED.rate_per_key, updated_at = now()`,
        [
          flow.workflowName,
          flow.concurrency,
          flow.concurrencyKey !== null,
          flow.keyConcurrency,
          flow.rateLimit?.limit ?? null,
          flow.rateLimit?.periodMs ?? null,
          flow.rateLimit?.perKey ?? false,
        ],
      );
      await keyPendingTasks(this.db, flow);
    }
  }

  /** What waits on which limit, for these workflows (every registered one when omitted). */
  readLimits(workflowNames?: string[]): Promise<FlowLimitStats[]> {
    return readFlowLimits(this.db, workflowNames);
  }
}
