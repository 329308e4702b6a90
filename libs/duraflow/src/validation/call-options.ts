import { Type } from '@nestjs/common';
import { MAX_IDEMPOTENCY_KEY_LENGTH } from '../domain/duraflow.constants';
import {
  InputTooLargeError,
  InputValidationError,
  InvalidListOptionsError,
  InvalidSubmitOptionsError,
  InvalidWaitOptionsError,
} from '../domain/errors';
import { RESERVED_IDEMPOTENCY_KEY_PREFIXES, reservedIdempotencyKeyPrefix } from '../domain/reserved-keys';
import { jsonPathDeeperThan, toJson } from '../util/json';
import { UnknownInputProperties } from '../domain/workflow-definition';
import { validateDtoInput } from './dto-input';
import { DUE_TIME_RANGE, isAcceptedDueTime } from './due-time';
import { checkStorableJson, hasNul, NUL_REASON } from './storable-text';
import { checkTags } from './tags';

/**
 * The checks of what a caller passes to WorkflowService, each made before anything is read or
 * written: a bad value throws its typed error naming the option.
 */

const INT32_MAX = 2_147_483_647;
const DEFAULT_PREVIEW_CHARS = 2048;
const MAX_PREVIEW_CHARS = 1024 * 1024;
const MAX_SUBMIT_MANY = 10_000;
/** waitFor polls no more often than this: a tighter loop would only load the database. */
const MIN_WAIT_POLL_MS = 10;
/** The longest delay a Node timer takes (about 24.8 days); a longer one fires at once. */
const MAX_TIMER_MS = INT32_MAX;

/** A submit's options as the caller may pass them. */
interface SubmitOptionValues {
  priority?: number;
  scheduledAt?: Date | string;
  maxRetries?: number;
  idempotencyKey?: string;
  tags?: Record<string, string>;
}

/** A submit's options, checked. */
export interface CheckedSubmitOptions {
  priority: number;
  scheduledAt: Date | null;
  maxRetries: number | undefined;
  idempotencyKey: string | null;
  /** The task's tags; undefined when the call gave none (a child then takes its parent's). */
  tags: Record<string, string> | undefined;
}

/** @throws InvalidSubmitOptionsError */
export function checkSubmitOptions(options: SubmitOptionValues): CheckedSubmitOptions {
  const priority = options.priority ?? 0;
  if (!Number.isInteger(priority) || priority < -INT32_MAX - 1 || priority > INT32_MAX) {
    throw new InvalidSubmitOptionsError('priority', `must be an integer (32-bit), got ${String(options.priority)}.`);
  }
  let scheduledAt: Date | null = null;
  if (options.scheduledAt !== undefined && options.scheduledAt !== null) {
    scheduledAt = options.scheduledAt instanceof Date ? options.scheduledAt : new Date(options.scheduledAt);
    if (!isAcceptedDueTime(scheduledAt)) {
      throw new InvalidSubmitOptionsError(
        'scheduledAt',
        `must be a Date or an ISO-8601 string ${DUE_TIME_RANGE}, got ${String(options.scheduledAt)}.`,
      );
    }
  }
  const maxRetries = options.maxRetries;
  if (maxRetries !== undefined && (!Number.isInteger(maxRetries) || maxRetries < 0 || maxRetries > INT32_MAX)) {
    throw new InvalidSubmitOptionsError('maxRetries', `must be an integer >= 0, got ${String(maxRetries)}.`);
  }
  const tags = checkTags(options.tags, (reason) => new InvalidSubmitOptionsError('tags', reason));
  return { priority, scheduledAt, maxRetries, idempotencyKey: checkIdempotencyKey(options.idempotencyKey), tags };
}

/** A caller's idempotency key: 1 to 255 characters, no NUL, none of the library's own prefixes. @throws InvalidSubmitOptionsError */
function checkIdempotencyKey(key: unknown): string | null {
  if (key === undefined || key === null) return null;
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
    throw new InvalidSubmitOptionsError(
      'idempotencyKey',
      `must be a non-empty string of at most ${MAX_IDEMPOTENCY_KEY_LENGTH} characters.`,
    );
  }
  if (hasNul(key)) throw new InvalidSubmitOptionsError('idempotencyKey', NUL_REASON);
  const reserved = reservedIdempotencyKeyPrefix(key);
  if (reserved !== undefined) {
    throw new InvalidSubmitOptionsError(
      'idempotencyKey',
      `must not start with "${reserved}": keys starting with ${RESERVED_IDEMPOTENCY_KEY_PREFIXES.map((p) => `"${p}"`).join(' or ')} ` +
        `are the library's own (a child's, a schedule tick's). Choose another prefix.`,
    );
  }
  return key;
}

/** submitMany's inputs (an array of at most 10,000) and options (no idempotency key). @throws InvalidSubmitOptionsError */
export function checkSubmitManyOptions(inputs: unknown, options: SubmitOptionValues): CheckedSubmitOptions {
  if (!Array.isArray(inputs) || inputs.length > MAX_SUBMIT_MANY) {
    throw new InvalidSubmitOptionsError('inputs', `must be an array of at most ${MAX_SUBMIT_MANY} inputs.`);
  }
  if (options?.idempotencyKey !== undefined) {
    throw new InvalidSubmitOptionsError('idempotencyKey', 'is not accepted by submitMany: submit those tasks one by one.');
  }
  return checkSubmitOptions(options);
}

/** What an input is checked against: its workflow's DTO and the module's limits. */
interface InputRules {
  name: string;
  inputType?: Type<object>;
  unknownInputProperties: UnknownInputProperties;
}

/**
 * The input as the JSON that will be stored, once it is serializable, within `maxInputBytes`
 * and valid for the workflow's DTO, as that DTO validated it (`index`: its place in a
 * submitMany call).
 *
 * @throws InputValidationError, NotSerializableError, InputTooLargeError
 */
export async function checkSubmitInput(
  workflow: InputRules,
  input: unknown,
  limits: { maxJsonDepth: number; maxInputBytes: number },
  index?: number,
): Promise<string> {
  const { name } = workflow;
  const where = index === undefined ? `The input of workflow "${name}"` : `The input at index ${index} of workflow "${name}"`;
  const value = input === undefined ? {} : input;
  const prefix = index === undefined ? '' : `[${index}]`;
  // Before anything recurses into the input: past a few thousand levels that overflows the stack.
  const tooDeep = jsonPathDeeperThan(value, limits.maxJsonDepth);
  if (tooDeep !== undefined) {
    const property = `${prefix}${tooDeep.slice(1)}`.replace(/^\./, '') || '$';
    const message = `input must not nest objects and arrays deeper than ${limits.maxJsonDepth} levels (DuraflowModule's maxJsonDepth)`;
    throw new InputValidationError(name, [{ property, constraints: { maxDepth: message } }]);
  }
  const submittedJson = checkInput(name, toJson(value, where, limits.maxJsonDepth)!, where, limits.maxInputBytes);
  if (!workflow.inputType) return submittedJson;
  const validated = await validateDtoInput(name, workflow.inputType, JSON.parse(submittedJson), workflow.unknownInputProperties, prefix);
  // Property defaults of the DTO class may have made it larger than what was submitted.
  return checkInput(name, toJson(validated, where, limits.maxJsonDepth)!, where, limits.maxInputBytes);
}

/** The input's JSON within `maxInputBytes` and storable as jsonb. */
function checkInput(name: string, inputJson: string, where: string, maxInputBytes: number): string {
  const bytes = Buffer.byteLength(inputJson, 'utf8');
  if (bytes > maxInputBytes) throw new InputTooLargeError(name, bytes, maxInputBytes);
  checkStorableJson(inputJson, where);
  return inputJson;
}

/** waitFor's options: `timeoutMs` 0.. (default 30 s), `pollIntervalMs` 10.. (default 200 ms). @throws InvalidWaitOptionsError */
export function checkWaitOptions(options: { timeoutMs?: number; pollIntervalMs?: number }): { timeoutMs: number; pollIntervalMs: number } {
  return {
    timeoutMs: waitOption('timeoutMs', options.timeoutMs, 30_000, 0),
    pollIntervalMs: waitOption('pollIntervalMs', options.pollIntervalMs, 200, MIN_WAIT_POLL_MS),
  };
}

/** A waitFor option: unset takes its default; else a whole number of ms from `min` to MAX_TIMER_MS. */
function waitOption(option: string, value: unknown, defaultMs: number, min: number): number {
  if (value === undefined) return defaultMs;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > MAX_TIMER_MS) {
    throw new InvalidWaitOptionsError(
      option,
      `must be a whole number of milliseconds from ${min} to ${MAX_TIMER_MS}, got ${String(value)}.`,
    );
  }
  return value;
}

/** getStepSummaries' `previewChars`: 1 to 1,048,576, default 2,048. @throws InvalidListOptionsError */
export function checkPreviewChars(value: number | undefined): number {
  const previewChars = value ?? DEFAULT_PREVIEW_CHARS;
  if (!Number.isSafeInteger(previewChars) || previewChars < 1 || previewChars > MAX_PREVIEW_CHARS) {
    throw new InvalidListOptionsError('previewChars', `must be an integer from 1 to ${MAX_PREVIEW_CHARS}, got ${String(value)}.`);
  }
  return previewChars;
}

/** The workflow filter of a list or count: a string without NUL, or left out. @throws InvalidListOptionsError */
export function checkWorkflowFilter(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new InvalidListOptionsError('workflowName', `must be a string, got ${typeof value}.`);
  if (hasNul(value)) throw new InvalidListOptionsError('workflowName', NUL_REASON);
  return value;
}

/** The tags filter of a list or count (an AND of its pairs), checked. @throws InvalidListOptionsError */
export function checkTagsFilter(value: unknown): Record<string, string> | undefined {
  return checkTags(value, (reason) => new InvalidListOptionsError('tags', reason));
}

/** The creation-time bounds of a list or count, checked. @throws InvalidListOptionsError */
export function createdRange(options: { createdAfter?: Date | string; createdBefore?: Date | string }): {
  createdAfter?: Date;
  createdBefore?: Date;
} {
  return { createdAfter: listTime('createdAfter', options.createdAfter), createdBefore: listTime('createdBefore', options.createdBefore) };
}

function listTime(option: string, value: Date | string | undefined): Date | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const time = value instanceof Date ? value : typeof value === 'string' ? new Date(value) : new Date(NaN);
  // PostgreSQL's timestamps stop at 4713 BC: a time outside years 1..9999 would be a database error.
  if (Number.isNaN(time.getTime()) || time.getUTCFullYear() < 1 || time.getUTCFullYear() > 9999) {
    throw new InvalidListOptionsError(option, `must be a Date or an ISO-8601 string of a year from 1 to 9999, got ${String(value)}.`);
  }
  return time;
}
