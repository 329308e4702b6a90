import { ValidationError, ValidationPipe } from '@nestjs/common';
import { InputViolation } from '@duraflow/nestjs';
import { InvalidRequestError } from '../api/request.errors';

/**
 * The global pipe: DTOs transformed and checked, unknown properties refused, and an
 * InvalidRequestError (400 `INVALID_REQUEST`) whose message says what is wrong and whose
 * `violations` list it, in the shape of the library's input violations.
 */
export function createValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    transform: true,
    whitelist: true,
    forbidNonWhitelisted: true,
    stopAtFirstError: true,
    exceptionFactory: (errors) => {
      const violations = flatten(errors);
      return new InvalidRequestError(`Invalid request: ${violations.flatMap((v) => Object.values(v.constraints)).join('; ')}.`, violations);
    },
  });
}

function flatten(errors: ValidationError[], prefix = ''): InputViolation[] {
  return errors.flatMap((error) => {
    const property = prefix ? `${prefix}.${error.property}` : error.property;
    const own = error.constraints ? [{ property, constraints: error.constraints }] : [];
    return [...own, ...flatten(error.children ?? [], property)];
  });
}
