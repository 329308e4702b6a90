/** Longest message or stack kept of an error (in characters), so a stored error stays small. */
export const MAX_ERROR_TEXT = 8_192;

/**
 * What a failure looks like in `agent_tasks.error`, `step_runs.error` and the DLQ: its message
 * and stack cut to MAX_ERROR_TEXT characters, its name and code to 255.
 */
export function describeError(error: unknown): { message: string; name: string; stack?: string; code?: string } {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return {
      message: cut(String(error.message), MAX_ERROR_TEXT),
      name: cut(String(error.name), 255),
      stack: error.stack === undefined ? undefined : cut(String(error.stack), MAX_ERROR_TEXT),
      ...(typeof code === 'string' ? { code: cut(code, 255) } : {}),
    };
  }
  return { message: cut(typeof error === 'string' ? error : safeString(error), MAX_ERROR_TEXT), name: 'NonError' };
}

function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more characters cut)`;
}

function safeString(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
