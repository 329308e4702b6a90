import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { DuraflowDatabase } from '../persistence/duraflow-database';
import { isReplayBoot } from '../replay/replay-boot';

/**
 * Refuses the boot of a node with a worker on a database that lacks Duraflow's migrations:
 * `init()` fails with one SchemaNotReadyError before the worker, the reaper, the leader election
 * and the schedules start (they start at bootstrap, after every module's init). A node without
 * a worker (`worker.enabled: false`, a submit-only node) boots: its first call that needs the
 * tables gets the error instead (DuraflowDatabase checks on first use), and its reaper, if on,
 * stands for election only once the migrations are there (ReaperLoop).
 */
@Injectable()
export class SchemaBootCheck implements OnModuleInit {
  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    private readonly db: DuraflowDatabase,
  ) {}

  async onModuleInit(): Promise<void> {
    // The replay check boots the host's module with neither, on a database that may be a deploy behind its code.
    if (isReplayBoot()) return;
    if (this.options.worker.enabled) await this.db.ensureSchemaReady();
  }
}
