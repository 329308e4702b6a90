import { BadRequestException, HttpStatus, ValidationError, ValidationPipe } from '@nestjs/common';

/**
 * The global pipe: DTOs transformed and checked, unknown properties refused, and a 400
 * shaped like the Duraflow errors (`message` says what is wrong, `violations` lists it).
 */
export function createValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    transform: true,
    whitelist: true,
    forbidNonWhitelisted: true,
    stopAtFirstError: true,
    exceptionFactory: (errors) => {
      const violations = flatten(errors);
      return new BadRequestException({
        statusCode: HttpStatus.BAD_REQUEST,
        error: 'INVALID_REQUEST',
        message: `Invalid request: ${violations.flatMap((v) => Object.values(v.constraints)).join('; ')}.`,
        violations,
      });
    },
  });
}

function flatten(errors: ValidationError[], prefix = ''): Array<{ property: string; constraints: Record<string, string> }> {
  return errors.flatMap((error) => {
    const property = prefix ? `${prefix}.${error.property}` : error.property;
    const own = error.constraints ? [{ property, constraints: error.constraints }] : [];
    return [...own, ...flatten(error.children ?? [], property)];
  });
}
