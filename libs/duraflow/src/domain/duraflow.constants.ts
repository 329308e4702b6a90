export const WORKFLOW_METADATA = 'duraflow:workflow';
export const STEP_METADATA = 'duraflow:step';
export const COMPENSATE_METADATA = 'duraflow:compensate';

/** Injection token of the options with every default applied. */
export const RESOLVED_DURAFLOW_OPTIONS = Symbol('DURAFLOW_RESOLVED_OPTIONS');

/**
 * The key (Redis) or lease row name (PostgreSQL, duraflow_leader) the reaper's leader holds, unless
 * `reaper.leaderKey` names another: nodes that share it elect one leader between them.
 */
export const REAPER_LEADER_KEY = 'duraflow:reaper:leader';

/** The name of the reaper's interval in @nestjs/schedule's SchedulerRegistry. */
export const REAPER_INTERVAL_NAME = 'duraflow-reaper';

/** NOTIFY channel: a task became claimable (payload: workflow name). */
export const TASK_SUBMITTED_CHANNEL = 'duraflow_task_submitted';
/** NOTIFY channel: tasks reached a terminal status or were cancelled (payload: task ids, comma-separated). */
export const TASK_FINISHED_CHANNEL = 'duraflow_task_finished';
/** NOTIFY channel: a run set an event or wrote to (or closed) a stream (payload: the task id). */
export const TASK_TALK_CHANNEL = 'duraflow_task_talk';

/**
 * Workflow names: letters, digits, `-` and `_`, 1 to 255 of them (the column's length), so a name
 * is safe in a URL path, a NOTIFY payload and a log line without quoting.
 */
export const WORKFLOW_NAME_PATTERN = /^[A-Za-z0-9_-]{1,255}$/;

/** Signal names: what a URL path segment, a gRPC field and a step key all hold without quoting. */
export const SIGNAL_NAME_PATTERN = /^[A-Za-z0-9_.:-]{1,200}$/;

/** A task or dead-letter id: the UUID PostgreSQL generates (any case). */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The longest idempotency key (the column's length). */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/** The `limit` of a `list` / `listDeadLetters` page when none is given. */
export const DEFAULT_LIST_LIMIT = 50;
/** The most a `list` / `listDeadLetters` page may hold. */
export const MAX_LIST_LIMIT = 1000;

/** The default of the `maxJsonDepth` option. */
export const DEFAULT_MAX_JSON_DEPTH = 100;
/** The most `maxJsonDepth` may be: a few thousand levels down, class-transformer and JSON.stringify overflow the stack. */
export const MAX_JSON_DEPTH = 1000;
