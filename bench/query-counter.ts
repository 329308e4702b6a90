import { Client } from 'pg';

/**
 * Counts every statement this process sends through node-postgres, by prepared-statement
 * name (the library names its hot statements, or opens their text with the name as a
 * comment) or else by the start of the SQL text: the round trips per task and per step, as
 * the database sees them. One Map increment a query.
 */
const counts = new Map<string, number>();
let installed = false;

/** A statement's name, the one its text opens with as a comment (`/* duraflow_claim_tasks *\/ …`), or the start of its text. */
function keyOfText(text: string): string {
  return /^\s*\/\*\s*(\w+)\s*\*\//.exec(text)?.[1] ?? text.replace(/\s+/g, ' ').trim().slice(0, 60);
}

function keyOf(config: unknown): string {
  if (typeof config === 'string') return keyOfText(config);
  if (config && typeof config === 'object') {
    const { name, text } = config as { name?: unknown; text?: unknown };
    if (typeof name === 'string' && name) return name;
    if (typeof text === 'string') return keyOfText(text);
  }
  return '(other)';
}

export function installQueryCounter(): void {
  if (installed) return;
  installed = true;
  const query = Client.prototype.query as (...args: unknown[]) => unknown;
  (Client.prototype as unknown as { query: (...args: unknown[]) => unknown }).query = function countedQuery(
    this: Client,
    ...args: unknown[]
  ) {
    const key = keyOf(args[0]);
    counts.set(key, (counts.get(key) ?? 0) + 1);
    return query.apply(this, args);
  };
}

export function queryCounts(): Record<string, number> {
  return Object.fromEntries(counts);
}

/** after - before, by statement, without the zeros. */
export function countDelta(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const delta: Record<string, number> = {};
  for (const [key, value] of Object.entries(after)) {
    const d = value - (before[key] ?? 0);
    if (d) delta[key] = d;
  }
  return delta;
}
