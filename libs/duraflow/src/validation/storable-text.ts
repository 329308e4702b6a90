import { NotSerializableError } from '../domain/errors';

/**
 * What PostgreSQL refuses to store although JavaScript holds it: the NUL character (U+0000) in
 * any text or JSON string, and in jsonb a lone UTF-16 surrogate (half of a pair). Both are
 * refused here, with a typed error, before any statement is sent: the database's own error would
 * be a 500 for the caller's bad value.
 */

/** The reason a string holding NUL is refused, for the errors that name the option. */
export const NUL_REASON = 'must not contain the NUL character (U+0000), which PostgreSQL cannot store.';

/**
 * The escapes JSON.stringify writes for what jsonb refuses: `\u0000`, and a lone surrogate
 * (`\ud800`..`\udfff`; a well-formed pair is written as the characters themselves).
 */
const UNSTORABLE_ESCAPE = /\\u(?:0000|d[89a-f][0-9a-f]{2})/g;

/**
 * Refuses JSON, as toJson wrote it, holding a string or a key that jsonb cannot store. The common
 * case is one native scan of the text; the value is walked only when the scan finds something, to
 * name where it is.
 *
 * @throws NotSerializableError
 */
export function checkStorableJson(json: string | undefined, what: string): void {
  if (json === undefined || !hasUnstorableEscape(json)) return;
  const found = unstorablePath(JSON.parse(json));
  if (!found) return;
  const reason = found.nul ? 'a string holds the NUL character (U+0000)' : 'a string holds half of a UTF-16 surrogate pair';
  throw new NotSerializableError(what, found.path, `${reason}, which PostgreSQL cannot store`);
}

/**
 * JSON the library writes about a failure (an error's message and stack, as thrown by any code),
 * made storable: each escape jsonb refuses becomes U+FFFD. A failure is recorded whatever it says.
 */
export function storableJson(json: string): string {
  if (!hasUnstorableEscape(json)) return json;
  return json.replace(/\\+u(?:0000|d[89a-f][0-9a-f]{2})/g, (escape) => {
    const backslashes = escape.length - 5;
    return backslashes % 2 === 1 ? `${escape.slice(0, backslashes - 1)}\\ufffd` : escape;
  });
}

/** Whether a string (a name, a key, a filter) holds NUL. */
export function hasNul(value: string): boolean {
  return value.includes('\0');
}

function hasUnstorableEscape(json: string): boolean {
  UNSTORABLE_ESCAPE.lastIndex = 0;
  for (let match = UNSTORABLE_ESCAPE.exec(json); match; match = UNSTORABLE_ESCAPE.exec(json)) {
    // An escape only when its backslash is not itself escaped: an even number of backslashes before it.
    let backslashes = 0;
    for (let i = match.index - 1; i >= 0 && json.charCodeAt(i) === 0x5c; i--) backslashes++;
    if (backslashes % 2 === 0) return true;
  }
  return false;
}

/** The path of the first string (value or key) jsonb refuses, in a value parsed from JSON (no cycles, no toJSON). */
function unstorablePath(value: unknown): { path: string; nul: boolean } | undefined {
  const pending: Array<{ value: unknown; path: string }> = [{ value, path: '$' }];
  while (pending.length) {
    const { value: current, path } = pending.pop()!;
    if (typeof current === 'string') {
      const problem = unstorable(current);
      if (problem) return { path, nul: problem === 'nul' };
    } else if (Array.isArray(current)) {
      for (let i = current.length - 1; i >= 0; i--) pending.push({ value: current[i], path: `${path}[${i}]` });
    } else if (current !== null && typeof current === 'object') {
      const entries = Object.entries(current);
      for (const [key] of entries) {
        const problem = unstorable(key);
        if (problem) return { path: `${path}[${JSON.stringify(key)}] (its key)`, nul: problem === 'nul' };
      }
      for (let i = entries.length - 1; i >= 0; i--) pending.push({ value: entries[i][1], path: `${path}.${entries[i][0]}` });
    }
  }
  return undefined;
}

function unstorable(text: string): 'nul' | 'surrogate' | undefined {
  if (text.includes('\0')) return 'nul';
  // A lone surrogate: a high one not followed by a low one, or a low one not after a high one.
  return /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(text) ? 'surrogate' : undefined;
}
