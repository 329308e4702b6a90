import path from 'node:path';
import { WorkerStats } from '@duraflow/nestjs';
import { WorkerExit, WorkerProcess } from '../test/support/worker-process';
import { BenchDuraflowOptions, BenchRequest, BenchWorkerConfig, FlowBenchWorkflow } from './protocol';

const ENTRY = path.join(__dirname, 'worker-main.ts');

/**
 * A bench worker process (bench/worker-main.ts): a Nest app with DuraflowModule running the bench
 * workflows, forked and driven over IPC as the chaos tests' workers are (test/support/worker-process.ts).
 */
export class BenchWorkerProcess extends WorkerProcess<BenchRequest> {
  static start(options: {
    databaseUrl: string;
    label: string;
    duraflow: BenchDuraflowOptions;
    exposeGc?: boolean;
    flowWorkflow?: FlowBenchWorkflow;
    /** A command to run node under (e.g. `ip netns exec <ns>`): see WorkerProcessOptions.launcher. */
    launcher?: string[];
  }): BenchWorkerProcess {
    const config: BenchWorkerConfig = { databaseUrl: options.databaseUrl, duraflow: options.duraflow, flowWorkflow: options.flowWorkflow };
    return new BenchWorkerProcess({
      entry: ENTRY,
      config,
      label: options.label,
      launcher: options.launcher,
      execArgv: options.exposeGc ? ['--expose-gc'] : [],
      readyTimeoutMs: 60_000,
      // A drain keeps the worker busy: an answer may wait behind it.
      requestTimeoutMs: 120_000,
    });
  }

  startWorker(): Promise<void> {
    return this.call('WorkerService', 'start');
  }

  stopWorker(): Promise<void> {
    return this.call('WorkerService', 'stop');
  }

  stats(): Promise<WorkerStats> {
    return this.call('WorkerService', 'stats');
  }

  isLeader(): Promise<boolean> {
    return this.call('ReaperService', 'isLeader');
  }

  memory(gc = false): Promise<NodeJS.MemoryUsage> {
    return this.request({ type: 'memory', gc });
  }

  queryCounts(): Promise<Record<string, number>> {
    return this.request({ type: 'query-counts' });
  }

  cpuUsage(): Promise<NodeJS.CpuUsage> {
    return this.request({ type: 'cpu' });
  }

  /** SIGTERM (Nest's shutdown hooks run: the worker hands its runs back), SIGKILL after `timeoutMs`. */
  override stop(timeoutMs = 15_000): Promise<WorkerExit> {
    return super.stop(timeoutMs);
  }
}
