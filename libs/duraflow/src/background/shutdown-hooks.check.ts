import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { ResolvedDuraflowOptions } from '../config/resolved-options';

/**
 * How long after bootstrap the check looks: `app.enableShutdownHooks()` is often called just
 * after `await app.listen()`, which resolves a few milliseconds after bootstrap.
 */
export const SHUTDOWN_HOOKS_CHECK_DELAY_MS = 1_000;

/**
 * Warns once when nothing in the process handles SIGTERM: without `app.enableShutdownHooks()`
 * (or a handler of the host's own that closes the app), `docker stop`, Kubernetes and systemd end
 * the process at once, the worker hands nothing back, and its running tasks wait for the reaper.
 * Judged by the listeners on `process`, since Nest registers its own there; not checked under
 * NODE_ENV=test, where the test closes the app.
 */
@Injectable()
export class ShutdownHooksCheck implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Duraflow');
  private timer: NodeJS.Timeout | undefined;

  constructor(@Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions) {}

  onApplicationBootstrap(): void {
    if (!this.options.worker.enabled || process.env.NODE_ENV === 'test') return;
    this.timer = setTimeout(() => this.warnWithoutSigtermHandler(), SHUTDOWN_HOOKS_CHECK_DELAY_MS);
    this.timer.unref();
  }

  onApplicationShutdown(): void {
    clearTimeout(this.timer);
  }

  private warnWithoutSigtermHandler(): void {
    if (process.listenerCount('SIGTERM') > 0) return;
    this.logger.warn(
      'Shutdown hooks are not enabled: call app.enableShutdownHooks() in main.ts. Without it SIGTERM ' +
        '(docker stop, Kubernetes, systemd) ends the process before the worker hands its running tasks back, ' +
        `and they wait for the reaper (reaper.staleAfterMs, ${this.options.reaper.staleAfterMs} ms here) to run again.`,
    );
  }
}
