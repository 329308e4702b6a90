import { Injectable } from '@nestjs/common';
import { AgentTask } from '../../domain/entities/agent-task.entity';
import { TaskNotFoundError, WaitForTimeoutError } from '../../domain/errors';
import { isTerminalStatus } from '../../domain/task-status';
import { TaskNotifications } from '../../notifications/task-notifications';
import { checkWaitOptions } from '../../validation/call-options';
import { TaskReader } from './task-reader';

export interface WaitForOptions {
  /** 0 to 2,147,483,647 ms (about 24.8 days). Default 30 s. */
  timeoutMs?: number;
  /** Fallback poll while no notification arrives: 10 to 2,147,483,647 ms. Default 200 ms. */
  pollIntervalMs?: number;
}

/** WorkflowService's `waitFor`: woken by the finished NOTIFY, with a poll as the fallback. */
@Injectable()
export class TaskWaiter {
  constructor(
    private readonly notifications: TaskNotifications,
    private readonly reader: TaskReader,
  ) {}

  async waitFor(id: string, options: WaitForOptions = {}): Promise<AgentTask> {
    const { timeoutMs, pollIntervalMs } = checkWaitOptions(options ?? {});
    const deadline = Date.now() + timeoutMs;
    let notified: boolean | undefined;
    let wake: () => void = () => undefined;
    const unsubscribe = this.notifications.onFinished((taskId) => {
      if (taskId !== id) return;
      notified = true;
      wake();
    });
    try {
      for (;;) {
        notified = false;
        const task = await this.reader.get(id);
        if (!task) throw new TaskNotFoundError(id);
        if (isTerminalStatus(task.status)) return task;
        const remaining = deadline - Date.now();
        if (remaining <= 0) throw new WaitForTimeoutError(id, timeoutMs, task.status);
        // A notification that came while the task was read is not waited for again.
        if (notified) continue;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(pollIntervalMs, remaining));
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = () => undefined;
      }
    } finally {
      unsubscribe();
    }
  }
}
