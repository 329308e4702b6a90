import { Type } from '@nestjs/common';
import type { ValidationError } from 'class-validator';
import { loadDtoValidation } from '../dependencies/optional-dependencies';
import { InputValidationError, InputViolation } from '../domain/errors';
import { UnknownInputProperties } from '../domain/workflow-definition';

/**
 * Checks `input` (already JSON) against the workflow's class-validator DTO and returns what is to be
 * stored: the DTO instance as validated, so a property the DTO does not declare (no validation
 * decorator; nested objects only under @ValidateNested) is removed with 'strip' or refused with
 * 'reject', never stored unchecked. `where` prefixes property paths (`[3]` in submitMany).
 *
 * @throws InputValidationError, MissingDependencyError
 */
export async function validateDtoInput(
  workflowName: string,
  dto: Type<object>,
  input: unknown,
  unknownProperties: UnknownInputProperties,
  where = '',
): Promise<object> {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new InputValidationError(workflowName, [
      { property: where || '$', constraints: { isObject: `input must be an object matching ${dto.name}` } },
    ]);
  }
  const { validator, transformer } = loadDtoValidation(workflowName);
  const instance = transformer.plainToInstance(dto, input);
  const errors = await validator.validate(instance, {
    forbidUnknownValues: false,
    whitelist: true,
    forbidNonWhitelisted: unknownProperties === 'reject',
  });
  if (errors.length) throw new InputValidationError(workflowName, flattenViolations(errors, where));
  return instance;
}

function flattenViolations(errors: ValidationError[], prefix = ''): InputViolation[] {
  return errors.flatMap((error) => {
    const property = prefix ? `${prefix}.${error.property}` : error.property;
    const own = error.constraints ? [{ property, constraints: error.constraints }] : [];
    return [...own, ...flattenViolations(error.children ?? [], property)];
  });
}
