import { ArgumentMetadata, ValidationError, ValidationPipe } from '@nestjs/common';
import { DURAFLOW_DEFAULTS, InputViolation, jsonPathDeeperThan } from '@duraflow/nestjs';
import { InvalidRequestError } from '../api/request.errors';

/**
 * How deep a request value may nest before class-transformer walks it: a submit's `input`
 * (one level down in the body) as deep as the library accepts it. Thousands of levels would
 * overflow the stack in class-transformer, a 500 instead of a 400.
 */
const MAX_REQUEST_DEPTH = DURAFLOW_DEFAULTS.maxJsonDepth + 1;

/** Refuses a value nested too deep before anything recurses into it. */
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
    return super.transform(value, metadata);
  }
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
