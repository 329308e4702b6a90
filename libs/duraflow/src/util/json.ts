import { MAX_JSON_DEPTH } from '../domain/duraflow.constants';
import { NotSerializableError, OutputTooLargeError } from '../domain/errors';

/**
 * JSON.stringify that refuses what JSON would silently drop or change: functions, symbols,
 * bigints, non-finite numbers, invalid Dates, `undefined` (or holes) in arrays, Maps and Sets,
 * and cycles; and objects or arrays nested deeper than `maxDepth` (JSON.stringify itself
 * overflows the stack a few thousand levels down). Objects with `toJSON` (Date, Buffer) are
 * taken as JSON takes them. `undefined` at the top gives `undefined` (stored as SQL NULL).
 */
export function toJson(value: unknown, what: string, maxDepth = MAX_JSON_DEPTH): string | undefined {
  checkJsonValue(value, what, '$', new Set(), maxDepth);
  return JSON.stringify(value);
}

/** The bounds of what a step or a workflow may return (`maxOutputBytes`, `maxJsonDepth`). */
export interface OutputLimits {
  maxBytes: number;
  maxDepth: number;
}

/**
 * A step's (with `stepKey`) or a workflow's output as the JSON to store, checked as toJson
 * checks it and refused with OutputTooLargeError over `limits.maxBytes`: nothing larger is
 * ever written.
 */
export function outputToJson(value: unknown, limits: OutputLimits, workflowName: string, stepKey?: string): string | undefined {
  const what = stepKey === undefined ? `The output of workflow "${workflowName}"` : `The output of step "${stepKey}"`;
  const json = toJson(value, what, limits.maxDepth);
  const bytes = json === undefined ? 0 : Buffer.byteLength(json, 'utf8');
  if (bytes > limits.maxBytes) throw new OutputTooLargeError(workflowName, stepKey, bytes, limits.maxBytes);
  return json;
}

/**
 * The path of the first object or array nested deeper than `maxDepth` (`{}` is 1 deep,
 * `{ "a": [] }` 2), or undefined. It walks with a stack of its own, never by recursion, so a
 * value of any depth is safe to check; it does not follow cycles (toJson names those) or
 * values with `toJSON` (toJson checks what they turn into).
 */
export function jsonPathDeeperThan(value: unknown, maxDepth: number): string | undefined {
  if (!isContainer(value)) return undefined;
  // The containers from the top down to the one being walked; `next` is the index of the entry to
  // visit (an array's own index, or one in `keys`); arrays get no key list, as they can be long.
  const open: ContainerWalk[] = [walk(value)];
  const onPath = new Set<object>([value]);
  while (open.length) {
    const frame = open[open.length - 1];
    if (frame.next === frame.size) {
      onPath.delete(frame.container);
      open.pop();
      continue;
    }
    const child = (frame.container as Record<string, unknown>)[keyAt(frame, frame.next++)];
    if (!isContainer(child) || onPath.has(child)) continue;
    if (open.length >= maxDepth) {
      return open.reduce((path, frame) => {
        const key = keyAt(frame, frame.next - 1);
        return path + (frame.keys ? `.${key}` : `[${key}]`);
      }, '$');
    }
    open.push(walk(child));
    onPath.add(child);
  }
  return undefined;
}

interface ContainerWalk {
  container: object;
  /** An object's keys; null for an array. */
  keys: string[] | null;
  size: number;
  next: number;
}

function walk(container: object): ContainerWalk {
  const keys = Array.isArray(container) ? null : Object.keys(container);
  return { container, keys, size: keys ? keys.length : (container as unknown[]).length, next: 0 };
}

function keyAt(frame: ContainerWalk, index: number): string | number {
  return frame.keys ? frame.keys[index] : index;
}

function isContainer(value: unknown): value is object {
  return typeof value === 'object' && value !== null && typeof (value as { toJSON?: unknown }).toJSON !== 'function';
}

function checkJsonValue(value: unknown, what: string, path: string, ancestors: Set<object>, depthLeft: number): void {
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
    checkJsonValue(object.toJSON(), what, path, ancestors, depthLeft);
    return;
  }
  if (value instanceof Map || value instanceof Set || value instanceof WeakMap || value instanceof WeakSet) {
    throw new NotSerializableError(what, path, `a ${value.constructor.name} would be stored as {} (convert it to an object or array)`);
  }
  if (value instanceof Promise) throw new NotSerializableError(what, path, 'a Promise has no JSON form (await it first)');
  if (ancestors.has(object)) throw new NotSerializableError(what, path, 'the value refers to itself (a cycle)');
  if (depthLeft < 1)
    throw new NotSerializableError(what, path, `objects and arrays are nested deeper than ${ancestors.size} levels (maxJsonDepth)`);
  ancestors.add(object);
  if (Array.isArray(value)) {
    // An index loop, not forEach: forEach skips the holes of a sparse array, which JSON turns into null.
    for (let index = 0; index < value.length; index++) {
      const item: unknown = value[index];
      const itemPath = `${path}[${index}]`;
      if (item === undefined || typeof item === 'function' || typeof item === 'symbol') {
        throw new NotSerializableError(what, itemPath, `${typeof item} in an array would become null`);
      }
      checkJsonValue(item, what, itemPath, ancestors, depthLeft - 1);
    }
  } else {
    for (const key of Object.keys(object)) {
      const item = object[key];
      // JSON drops undefined properties: an optional field left unset, not data lost.
      if (item === undefined) continue;
      checkJsonValue(item, what, `${path}.${key}`, ancestors, depthLeft - 1);
    }
  }
  ancestors.delete(object);
}
