import { ArgumentsHost, Catch, ExceptionFilter, HttpStatus } from '@nestjs/common';
import { DuraflowError } from '@duraflow/nestjs';

const STATUS_BY_CODE: Record<string, HttpStatus> = {
  UNKNOWN_WORKFLOW: HttpStatus.NOT_FOUND,
  TASK_NOT_FOUND: HttpStatus.NOT_FOUND,
  TASK_ALREADY_FINISHED: HttpStatus.CONFLICT,
  WAIT_TIMEOUT: HttpStatus.REQUEST_TIMEOUT,
};

/** Duraflow's typed errors as JSON: 404 unknown, 409 finished, 400 for every bad input. */
@Catch(DuraflowError)
export class DuraflowExceptionFilter implements ExceptionFilter {
  catch(error: DuraflowError, host: ArgumentsHost): void {
    const status = STATUS_BY_CODE[error.code] ?? HttpStatus.BAD_REQUEST;
    const violations = (error as { violations?: unknown }).violations;
    host
      .switchToHttp()
      .getResponse<{ status(code: number): { json(body: unknown): void } }>()
      .status(status)
      .json({ statusCode: status, error: error.code, message: error.message, ...(violations ? { violations } : {}) });
  }
}
