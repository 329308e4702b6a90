import { ArgumentsHost, Catch, ExceptionFilter } from '@nestjs/common';
import { DuraflowError } from '@duraflow/nestjs';
import { apiStatusOf } from '../api/duraflow-error-status';

/** Duraflow's typed errors as JSON: 404 unknown workflow/task/dead letter, 409 finished task or busy dead letter, 400 bad input. */
@Catch(DuraflowError)
export class DuraflowExceptionFilter implements ExceptionFilter {
  catch(error: DuraflowError, host: ArgumentsHost): void {
    const status = apiStatusOf(error.code).http;
    const violations = (error as { violations?: unknown }).violations;
    host
      .switchToHttp()
      .getResponse<{ status(code: number): { json(body: unknown): void } }>()
      .status(status)
      .json({ statusCode: status, error: error.code, message: error.message, ...(violations ? { violations } : {}) });
  }
}
