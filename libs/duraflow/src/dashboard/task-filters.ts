import { UUID_PATTERN } from '../domain/duraflow.constants';
import { TaskStatus } from '../domain/task-status';
import { parseTagPairs } from '../validation/tags';

/** The task list's filters, as its form and links carry them in the query string. */
export interface TaskFilters {
  status?: TaskStatus;
  workflow?: string;
  /** Created at or after (UTC). */
  from?: Date;
  /** Created before (UTC). */
  to?: Date;
  /** Only the tasks the determinism guard holds (`held=true`). */
  held?: boolean;
  /** Only the tasks holding every one of these tags (`tag=tenant:acme region:eu`: pairs separated by spaces). */
  tags?: Record<string, string>;
  /** Go straight to this task. */
  id?: string;
  cursor?: string;
}

/** `datetime-local` gives no zone: the dashboard shows and reads every time in UTC. */
const LOCAL_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?$/;
const ZONED_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;

/** The filters of a list request; what cannot be read is left out and named in `problems`. */
export function parseTaskFilters(query: Record<string, unknown>): { filters: TaskFilters; problems: string[] } {
  const problems: string[] = [];
  const text = (name: string) => {
    const value = query[name];
    return typeof value === 'string' && value.trim() !== '' ? value.trim() : undefined;
  };
  const filters: TaskFilters = {};
  const status = text('status');
  if (status !== undefined) {
    if ((Object.values(TaskStatus) as string[]).includes(status)) filters.status = status as TaskStatus;
    else problems.push(`Unknown status "${status}": choose one of ${Object.values(TaskStatus).join(', ')}.`);
  }
  const workflow = text('workflow');
  if (workflow !== undefined) {
    if (workflow.length <= 255) filters.workflow = workflow;
    else problems.push('A workflow name has at most 255 characters.');
  }
  for (const name of ['from', 'to'] as const) {
    const value = text(name);
    if (value === undefined) continue;
    const time = LOCAL_TIME.test(value) ? new Date(`${value}Z`) : ZONED_TIME.test(value) ? new Date(value) : undefined;
    if (time && !Number.isNaN(time.getTime())) filters[name] = time;
    else problems.push(`"${value}" is not a time: use YYYY-MM-DDTHH:MM (UTC) for "${name}".`);
  }
  const held = text('held');
  if (held !== undefined) {
    if (held === 'true') filters.held = true;
    else problems.push(`"held=${held}" is not a filter: use held=true for the tasks the determinism guard holds, or leave it out.`);
  }
  const tag = text('tag');
  if (tag !== undefined) {
    try {
      filters.tags = parseTagPairs(tag.split(/\s+/), (reason) => new Error(`Tag ${reason}`));
    } catch (error) {
      problems.push((error as Error).message);
    }
  }
  const id = text('id');
  if (id !== undefined) {
    if (UUID_PATTERN.test(id)) filters.id = id.toLowerCase();
    else problems.push(`"${id}" is not a task id: a task id is a UUID such as 7c9e6679-7425-40de-944b-e07fc1f90ae7.`);
  }
  filters.cursor = text('cursor');
  return { filters, problems };
}

/** The query string of these filters (for links that keep them), minus what `except` names. */
export function filterQuery(filters: TaskFilters, except: Array<keyof TaskFilters> = []): Record<string, string | undefined> {
  const query: Record<string, string | undefined> = {
    status: filters.status,
    workflow: filters.workflow,
    held: filters.held ? 'true' : undefined,
    tag: filters.tags ? tagText(filters.tags) : undefined,
    from: filters.from?.toISOString(),
    to: filters.to?.toISOString(),
    cursor: filters.cursor,
  };
  for (const key of except) delete query[key === 'tags' ? 'tag' : key];
  return query;
}

/** Tags as the `tag` field writes them: `tenant:acme region:eu`. */
export function tagText(tags: Record<string, string>): string {
  return Object.entries(tags)
    .map(([key, value]) => `${key}:${value}`)
    .join(' ');
}
