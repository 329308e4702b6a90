import { INestApplicationContext } from '@nestjs/common';
import { AgentTask, WorkflowService } from '@duraflow/nestjs';

/** Submits a task in `app` and waits for its terminal status (its worker, or another, runs it). */
export async function runToEnd(
  app: INestApplicationContext,
  workflowName: string,
  input: unknown = {},
  timeoutMs = 15_000,
): Promise<AgentTask> {
  const workflows = app.get(WorkflowService);
  const task = await workflows.submit(workflowName, input);
  return workflows.waitFor(task.id, { timeoutMs });
}
