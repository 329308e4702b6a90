import { ArgumentMetadata, ValidationError, ValidationPipe } from '@nestjs/common';
import { DURAFLOW_DEFAULTS, InputViolation, jsonPathDeeperThan } from '@duraflow/nestjs';
import { InvalidRequestError } from '../api/request.errors';

/**
 * How deep a request value may nest before class-transformer walks it: a submit's `input`
 * (one level down in the body) as deep as the library accepts it. Thousands of levels would
 * overflow the stack in class-transformer, a 500 instead of a 400.
 */
const MAX_REQUEST_DEPTH = DURAFLOW_DEFAULTS.maxJsonDepth + 1;

/** Refuses a value nested too deep before anything recurses into it, and a NUL character anywhere. */
class DuraflowValidationPipe extends ValidationPipe {
  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    const tooDeep = jsonPathDeeperThan(value, MAX_REQUEST_DEPTH);
    if (tooDeep !== undefined) {
      const property = /^\$\.([^.[]+)/.exec(tooDeep)?.[1] ?? '$';
      const levels = property === '$' ? MAX_REQUEST_DEPTH : MAX_REQUEST_DEPTH - 1;
      throw invalidRequest([
        { property, constraints: { maxDepth: `${property} must not nest objects and arrays deeper than ${levels} levels` } },
      ]);
    }
    const nul = metadata.type === 'custom' ? undefined : pathWithNul(value, metadata.data ?? '');
    if (nul !== undefined) {
      const message = `${nul || metadata.type} must not contain a NUL character (\\u0000): PostgreSQL cannot store it in text`;
      throw invalidRequest([{ property: nul || metadata.type, constraints: { noNul: message } }]);
    }
    return super.transform(value, metadata);
  }
}

/**
 * Where a request value holds a NUL character, in a string or a property name: `input.customer`,
 * `workflowName`, `name` (a path parameter). PostgreSQL refuses it in text and JSON, so a NUL
 * that reached a statement would be a 500 carrying the database's message.
 */
function pathWithNul(value: unknown, path: string): string | undefined {
  if (typeof value === 'string') return value.includes('\u0000') ? path : undefined;
  if (value === null || typeof value !== 'object') return undefined;
  for (const [key, child] of Object.entries(value)) {
    const childPath = path ? `${path}.${key}` : key;
    if (key.includes('\u0000')) return childPath.split('\u0000').join('\\u0000');
    const found = pathWithNul(child, childPath);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * The global pipe: DTOs transformed and checked, unknown properties refused, and an
 * InvalidRequestError (400 `INVALID_REQUEST`) whose message says what is wrong and whose
 * `violations` list it, in the shape of the library's input violations.
 */
export function createValidationPipe(): ValidationPipe {
  return new DuraflowValidationPipe({
    transform: true,
    whitelist: true,
    forbidNonWhitelisted: true,
    stopAtFirstError: true,
    exceptionFactory: (errors) => invalidRequest(flatten(errors)),
  });
}

function invalidRequest(violations: InputViolation[]): InvalidRequestError {
  return new InvalidRequestError(`Invalid request: ${violations.flatMap((v) => Object.values(v.constraints)).join('; ')}.`, violations);
}

function flatten(errors: ValidationError[], prefix = ''): InputViolation[] {
  return errors.flatMap((error) => {
    const property = prefix ? `${prefix}.${error.property}` : error.property;
    const own = error.constraints ? [{ property, constraints: error.constraints }] : [];
    return [...own, ...flatten(error.children ?? [], property)];
  });
}
