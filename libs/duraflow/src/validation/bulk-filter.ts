import { BulkCancelOptions, BulkSelection, BulkTaskFilter } from '../domain/bulk-operations';
import { InvalidBulkFilterError, InvalidBulkOptionsError } from '../domain/errors';
import { TaskStatus } from '../domain/task-status';
import { hasNul } from './storable-text';
import { checkTags } from './tags';

const FILTER_FIELDS = new Set(['workflow', 'version', 'status', 'createdAfter', 'createdBefore', 'tags', 'all']);
const STATUSES = new Set<string>(Object.values(TaskStatus));

/**
 * A bulk operation's filter, checked before anything is read or written: `applies` are the
 * statuses the operation can change, `operation` its name for the messages.
 *
 * @throws InvalidBulkFilterError
 */
export function checkBulkFilter(filter: unknown, applies: readonly TaskStatus[], operation: string): BulkSelection {
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter))
    throw new InvalidBulkFilterError(
      'filter',
      `must be an object such as { workflow: 'export', status: 'failed' }, got ${String(filter)}.`,
    );
  const given = filter as BulkTaskFilter;
  const unknown = Object.keys(given).find((key) => !FILTER_FIELDS.has(key));
  if (unknown) throw new InvalidBulkFilterError(unknown, `is not a filter field (${[...FILTER_FIELDS].join(', ')}).`);
  if (given.all !== undefined && typeof given.all !== 'boolean')
    throw new InvalidBulkFilterError('all', `must be a boolean, got ${String(given.all)}.`);
  const selection: BulkSelection = {
    workflow: workflowName(given.workflow),
    version: version(given.version),
    statuses: statuses(given.status, applies, operation),
    createdAfter: time('createdAfter', given.createdAfter),
    createdBefore: time('createdBefore', given.createdBefore),
    tags: checkTags(given.tags, (reason) => new InvalidBulkFilterError('tags', reason)),
  };
  const tagged = selection.tags !== undefined && Object.keys(selection.tags).length > 0;
  const narrowed = selection.workflow !== undefined || selection.version !== undefined || given.status !== undefined || tagged;
  if (!narrowed && !selection.createdAfter && !selection.createdBefore && given.all !== true)
    throw new InvalidBulkFilterError(
      'filter',
      `is empty: ${operation} would change every task. Name a workflow, version, status, creation time or tags, or pass { all: true } to mean every task.`,
    );
  return selection;
}

/** A bulk operation's options, checked. @throws InvalidBulkOptionsError */
export function checkBulkOptions(options: unknown): { limit: number; dryRun: boolean; compensate: boolean } {
  if (options === undefined || options === null) return { limit: Number.POSITIVE_INFINITY, dryRun: false, compensate: false };
  if (typeof options !== 'object' || Array.isArray(options))
    throw new InvalidBulkOptionsError('options', `must be an object, got ${String(options)}.`);
  const { limit, dryRun, compensate } = options as BulkCancelOptions;
  if (limit !== undefined && limit !== null && (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1))
    throw new InvalidBulkOptionsError('limit', `must be a whole number from 1, got ${String(limit)}.`);
  for (const [name, value] of Object.entries({ dryRun, compensate }))
    if (value !== undefined && value !== null && typeof value !== 'boolean')
      throw new InvalidBulkOptionsError(name, `must be a boolean, got ${String(value)}.`);
  return { limit: limit ?? Number.POSITIVE_INFINITY, dryRun: dryRun === true, compensate: compensate === true };
}

function workflowName(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || value === '' || value.length > 255 || hasNul(value))
    throw new InvalidBulkFilterError('workflow', `must be a workflow name (1 to 255 characters, no NUL), got ${String(value)}.`);
  return value;
}

function version(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1 || value > 2_147_483_647)
    throw new InvalidBulkFilterError('version', `must be a whole number from 1, got ${String(value)}.`);
  return value;
}

/** The statuses asked for that the operation can change; all of those when none is asked for. */
function statuses(value: unknown, applies: readonly TaskStatus[], operation: string): TaskStatus[] {
  if (value === undefined || value === null) return [...applies];
  const asked = Array.isArray(value) ? value : [value];
  if (!asked.length)
    throw new InvalidBulkFilterError('status', 'is an empty list: leave it out for every status the operation applies to.');
  for (const status of asked) {
    if (typeof status !== 'string' || !STATUSES.has(status))
      throw new InvalidBulkFilterError('status', `"${String(status)}" is not a task status (${[...STATUSES].join(', ')}).`);
    if (!applies.includes(status as TaskStatus))
      throw new InvalidBulkFilterError(
        'status',
        `${operation} never changes a "${status}" task: it applies to ${applies.join(', ')} tasks.`,
      );
  }
  return [...new Set(asked as TaskStatus[])];
}

function time(field: string, value: unknown): Date | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const at = value instanceof Date ? value : typeof value === 'string' ? new Date(value) : new Date(NaN);
  if (Number.isNaN(at.getTime()) || at.getUTCFullYear() < 1 || at.getUTCFullYear() > 9999)
    throw new InvalidBulkFilterError(field, `must be a Date or an ISO-8601 string of a year from 1 to 9999, got ${String(value)}.`);
  return at;
}
