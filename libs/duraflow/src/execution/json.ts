import { NotSerializableError } from '../errors';

/**
 * JSON.stringify that refuses what JSON would silently drop or change: functions, symbols,
 * bigints, non-finite numbers, invalid Dates, `undefined` (or holes) in arrays, Maps and Sets,
 * and cycles. Objects with `toJSON` (Date, Buffer) are taken as JSON takes them. `undefined`
 * at the top gives `undefined` (stored as SQL NULL).
 */
export function toJson(value: unknown, what: string): string | undefined {
  checkJsonValue(value, what, '$', new Set());
  return JSON.stringify(value);
}

function checkJsonValue(value: unknown, what: string, path: string, ancestors: Set<object>): void {
  switch (typeof value) {
    case 'string':
    case 'boolean':
    case 'undefined':
      return;
    case 'number':
      if (!Number.isFinite(value)) throw new NotSerializableError(what, path, `${value} is not a finite number`);
      return;
    case 'bigint':
      throw new NotSerializableError(what, path, 'a BigInt has no JSON form (pass it as a string)');
    case 'function':
      throw new NotSerializableError(what, path, 'a function has no JSON form');
    case 'symbol':
      throw new NotSerializableError(what, path, 'a symbol has no JSON form');
  }
  if (value === null) return;
  const object = value as Record<string, unknown>;
  if (value instanceof Date && Number.isNaN(value.getTime())) {
    throw new NotSerializableError(what, path, 'an invalid Date would be stored as null');
  }
  if (typeof object.toJSON === 'function') {
    checkJsonValue(object.toJSON(), what, path, ancestors);
    return;
  }
  if (value instanceof Map || value instanceof Set || value instanceof WeakMap || value instanceof WeakSet) {
    throw new NotSerializableError(what, path, `a ${value.constructor.name} would be stored as {} (convert it to an object or array)`);
  }
  if (value instanceof Promise) throw new NotSerializableError(what, path, 'a Promise has no JSON form (await it first)');
  if (ancestors.has(object)) throw new NotSerializableError(what, path, 'the value refers to itself (a cycle)');
  ancestors.add(object);
  if (Array.isArray(value)) {
    // An index loop, not forEach: forEach skips the holes of a sparse array, which JSON turns into null.
    for (let index = 0; index < value.length; index++) {
      const item: unknown = value[index];
      const itemPath = `${path}[${index}]`;
      if (item === undefined || typeof item === 'function' || typeof item === 'symbol') {
        throw new NotSerializableError(what, itemPath, `${typeof item} in an array would become null`);
      }
      checkJsonValue(item, what, itemPath, ancestors);
    }
  } else {
    for (const key of Object.keys(object)) {
      const item = object[key];
      // JSON drops undefined properties: an optional field left unset, not data lost.
      if (item === undefined) continue;
      checkJsonValue(item, what, `${path}.${key}`, ancestors);
    }
  }
  ancestors.delete(object);
}

/** What a failure looks like in `agent_tasks.error`, `step_runs.error` and the DLQ. */
export function describeError(error: unknown): { message: string; name: string; stack?: string; code?: string } {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return {
      message: error.message,
      name: error.name,
      stack: error.stack,
      ...(typeof code === 'string' ? { code } : {}),
    };
  }
  return { message: typeof error === 'string' ? error : safeString(error), name: 'NonError' };
}

function safeString(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
