import { Body, Controller, Get, Param, Post, Type, UseFilters } from '@nestjs/common';
import { APP_FILTER, HttpAdapterHost } from '@nestjs/core';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { IsInt, IsString, Min } from 'class-validator';
import { firstValueFrom, isObservable, Observable } from 'rxjs';
import {
  DURAFLOW_EXCEPTION_FILTER_OPTIONS,
  DuraflowError,
  DuraflowExceptionFilter,
  UnknownWorkflowError,
  duraflowErrorStatus,
  DuraflowModule,
  SagaService,
  TaskNotFoundError,
  workflow,
  WorkflowService,
} from '@duraflow/nestjs';
import { GrpcStatusCode } from '@duraflow/nestjs/domain/errors/error-status';
import { useTestBed } from './support/test-bed';

class OrderInput {
  @IsString()
  orderId: string;

  @Min(1)
  @IsInt()
  quantity: number;
}

const orders = workflow('orders', async () => ({ ok: true }), { input: OrderInput });
/** Another workflow of the host, which an API client that asks for a wrong name must not learn of. */
const payroll = workflow('payroll-internal', async () => ({ ok: true }));

/** What another part of the library throws for an idempotency key reused with another input. */
class KeyConflictError extends DuraflowError {
  readonly code = 'IDEMPOTENCY_KEY_CONFLICT';
  constructor(readonly idempotencyKey: string) {
    super(`Idempotency key "${idempotencyKey}" was used with another input.`);
  }
}

/** A host app's controller over WorkflowService and SagaService: it lets every error through. */
@Controller()
class OrdersController {
  constructor(
    private readonly workflows: WorkflowService,
    private readonly saga: SagaService,
  ) {}

  @Post('tasks')
  submit(@Body() body: { workflowName: string; input: unknown }) {
    return this.workflows.submit(body.workflowName, body.input);
  }

  @Post('tasks/:id/cancel')
  cancel(@Param('id') id: string) {
    return this.workflows.cancel(id);
  }

  @Get('tasks/:id')
  async get(@Param('id') id: string) {
    const task = await this.workflows.get(id);
    if (!task) throw new TaskNotFoundError(id);
    return task;
  }

  @Post('dead-letters/:id/retry')
  retry(@Param('id') id: string) {
    return this.saga.retryDeadLetter(id);
  }

  @Get('conflict')
  conflict() {
    throw new KeyConflictError('order-7');
  }

  @Get('bug')
  bug() {
    throw new Error(`a bug in ${__filename}`);
  }
}

@Controller('scoped')
@UseFilters(DuraflowExceptionFilter)
class ScopedController {
  constructor(private readonly workflows: WorkflowService) {}

  @Post()
  submit(@Body() body: { workflowName: string; input: unknown }) {
    return this.workflows.submit(body.workflowName, body.input);
  }
}

const MISSING = '00000000-0000-4000-8000-000000000000';

describe('DuraflowExceptionFilter in a Nest HTTP app', () => {
  const bed = useTestBed();

  /** A host app on the test database: the filter registered by `register`, listening on a free port. */
  async function startHostApp(
    register: 'APP_FILTER' | 'useGlobalFilters' | 'new without HttpAdapterHost' | 'none',
    controllers: Type[] = [OrdersController],
    options?: { exposeWorkflowNames: boolean },
  ) {
    const filterOptions = options ? [{ provide: DURAFLOW_EXCEPTION_FILTER_OPTIONS, useValue: options }] : [];
    const host = await bed.serve({
      duraflowModule: DuraflowModule.forRoot({ workflows: [orders, payroll], worker: { enabled: false } }),
      controllers,
      providers: register === 'APP_FILTER' ? [{ provide: APP_FILTER, useClass: DuraflowExceptionFilter }, ...filterOptions] : [],
      logger: false,
      configure: (app) => {
        if (register === 'useGlobalFilters') app.useGlobalFilters(new DuraflowExceptionFilter(app.get(HttpAdapterHost), options));
        if (register === 'new without HttpAdapterHost') app.useGlobalFilters(new DuraflowExceptionFilter(undefined, options));
      },
    });
    const call = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(`${host.url}${path}`, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: response.status, text: await response.text() };
    };
    return Object.assign(host, { call });
  }

  describe.each(['APP_FILTER', 'useGlobalFilters', 'new without HttpAdapterHost'] as const)('registered with %s', (register) => {
    let host: Awaited<ReturnType<typeof startHostApp>>;

    beforeAll(async () => {
      host = await startHostApp(register);
    });
    afterAll(() => bed.close(host));

    it('answers an unknown workflow 404 with { statusCode, code, message, details }, naming no registered workflow', async () => {
      const response = await host.call('POST', '/tasks', { workflowName: 'nope', input: {} });
      expect(response.status).toBe(404);
      expect(JSON.parse(response.text)).toEqual({
        statusCode: 404,
        code: 'UNKNOWN_WORKFLOW',
        message: 'No workflow named "nope" is registered. Check the workflow name.',
        details: { workflowName: 'nope' },
      });
      expect(response.text).not.toMatch(/orders|payroll/);
    });

    it('answers input failing the workflow DTO 400, with the violations in details', async () => {
      const response = await host.call('POST', '/tasks', { workflowName: 'orders', input: { orderId: 7, quantity: 0 } });
      expect(response.status).toBe(400);
      expect(JSON.parse(response.text)).toEqual({
        statusCode: 400,
        code: 'INVALID_INPUT',
        message: expect.stringMatching(/Input for workflow "orders" is invalid/),
        details: {
          workflowName: 'orders',
          violations: [
            { property: 'orderId', constraints: { isString: 'orderId must be a string' } },
            { property: 'quantity', constraints: { min: 'quantity must not be less than 1' } },
          ],
        },
      });
    });

    it('answers a cancel of a finished task 409, an unknown task or dead letter 404', async () => {
      const task = await host.call('POST', '/tasks', { workflowName: 'orders', input: { orderId: 'o1', quantity: 1 } });
      expect(task.status).toBe(201);
      const { id } = JSON.parse(task.text);
      expect((await host.call('POST', `/tasks/${id}/cancel`)).status).toBe(201);
      const again = await host.call('POST', `/tasks/${id}/cancel`);
      expect([again.status, JSON.parse(again.text)]).toEqual([
        409,
        { statusCode: 409, code: 'TASK_ALREADY_FINISHED', message: expect.any(String), details: { taskId: id, status: 'cancelled' } },
      ]);
      expect(JSON.parse((await host.call('GET', `/tasks/${MISSING}`)).text)).toMatchObject({ statusCode: 404, code: 'TASK_NOT_FOUND' });
      expect(JSON.parse((await host.call('POST', `/dead-letters/${MISSING}/retry`)).text)).toMatchObject({
        statusCode: 404,
        code: 'DEAD_LETTER_NOT_FOUND',
      });
    });

    it('answers an idempotency key conflict 409', async () => {
      const response = await host.call('GET', '/conflict');
      expect([response.status, JSON.parse(response.text)]).toEqual([
        409,
        {
          statusCode: 409,
          code: 'IDEMPOTENCY_KEY_CONFLICT',
          message: 'Idempotency key "order-7" was used with another input.',
          details: { idempotencyKey: 'order-7' },
        },
      ]);
    });

    it('never sends a stack, and leaves errors that are not Duraflow errors to Nest', async () => {
      const bug = await host.call('GET', '/bug');
      expect([bug.status, JSON.parse(bug.text)]).toEqual([500, { statusCode: 500, message: 'Internal server error' }]);
      for (const path of ['/conflict', `/tasks/${MISSING}`]) {
        const { text } = await host.call('GET', path);
        expect(text).not.toMatch(/stack|\n\s+at |\.ts:\d+/);
        expect(text).not.toContain(process.cwd());
      }
    });
  });

  it('works as @UseFilters(DuraflowExceptionFilter) on one controller, and only there', async () => {
    const host = await startHostApp('none', [ScopedController, OrdersController]);
    const scoped = await host.call('POST', '/scoped', { workflowName: 'nope', input: {} });
    expect([scoped.status, JSON.parse(scoped.text).code]).toEqual([404, 'UNKNOWN_WORKFLOW']);
    const unfiltered = await host.call('POST', '/tasks', { workflowName: 'nope', input: {} });
    expect([unfiltered.status, JSON.parse(unfiltered.text)]).toEqual([500, { statusCode: 500, message: 'Internal server error' }]);
  });

  it.each(['APP_FILTER', 'useGlobalFilters', 'new without HttpAdapterHost'] as const)(
    'lists every registered workflow only when told to (exposeWorkflowNames, for development), registered with %s',
    async (register) => {
      const host = await startHostApp(register, [OrdersController], { exposeWorkflowNames: true });
      const response = await host.call('POST', '/tasks', { workflowName: 'nope', input: {} });
      expect([response.status, JSON.parse(response.text)]).toEqual([
        404,
        {
          statusCode: 404,
          code: 'UNKNOWN_WORKFLOW',
          message: expect.stringMatching(/^No workflow named "nope" is registered\. Registered workflows: "orders", "payroll-internal"/),
          details: { workflowName: 'nope' },
        },
      ]);
    },
  );

  it('keeps the registered workflows in the error’s own message, for the logs', () => {
    const error = new UnknownWorkflowError('nope', ['orders', 'payroll-internal']);
    expect(error.message).toMatch(/Registered workflows: "orders", "payroll-internal"/);
    expect(error.publicMessage).toBe('No workflow named "nope" is registered. Check the workflow name.');
    expect(new TaskNotFoundError(MISSING).publicMessage).toBe(new TaskNotFoundError(MISSING).message);
  });

  it('names no other workflow to an RPC client either, unless told to', async () => {
    const host = new ExecutionContextHost([{}, {}]);
    host.setType('rpc');
    const error = new UnknownWorkflowError('nope', ['orders', 'payroll-internal']);
    const hidden = new DuraflowExceptionFilter().catch(error, host) as Observable<never>;
    await expect(firstValueFrom(hidden)).rejects.toEqual({ code: GrpcStatus.NOT_FOUND, message: error.publicMessage });
    const listed = new DuraflowExceptionFilter(undefined, { exposeWorkflowNames: true }).catch(error, host) as Observable<never>;
    await expect(firstValueFrom(listed)).rejects.toEqual({ code: GrpcStatus.NOT_FOUND, message: error.message });
  });

  it('passes the error on to an RPC handler as { code, message } with the gRPC status code', async () => {
    const host = new ExecutionContextHost([{}, {}]);
    host.setType('rpc');
    const result = new DuraflowExceptionFilter().catch(new TaskNotFoundError(MISSING), host) as Observable<never>;
    expect(isObservable(result)).toBe(true);
    await expect(firstValueFrom(result)).rejects.toEqual({ code: GrpcStatus.NOT_FOUND, message: new TaskNotFoundError(MISSING).message });
  });
});

describe('duraflowErrorStatus (the mapping the filter and the engine share)', () => {
  it.each([
    ['UNKNOWN_WORKFLOW', 404, GrpcStatus.NOT_FOUND],
    ['TASK_NOT_FOUND', 404, GrpcStatus.NOT_FOUND],
    ['TASK_ALREADY_FINISHED', 409, GrpcStatus.FAILED_PRECONDITION],
    ['IDEMPOTENCY_KEY_CONFLICT', 409, GrpcStatus.ALREADY_EXISTS],
    ['DEAD_LETTER_BUSY', 409, GrpcStatus.ABORTED],
    ['INPUT_TOO_LARGE', 413, GrpcStatus.INVALID_ARGUMENT],
    ['INVALID_INPUT', 400, GrpcStatus.INVALID_ARGUMENT],
    ['INVALID_CURSOR', 400, GrpcStatus.INVALID_ARGUMENT],
    ['INVALID_WAIT_OPTIONS', 400, GrpcStatus.INVALID_ARGUMENT],
    ['OUTPUT_TOO_LARGE', 400, GrpcStatus.INVALID_ARGUMENT],
    ['WAIT_TIMEOUT', 408, GrpcStatus.DEADLINE_EXCEEDED],
    ['DUPLICATE_STEP_KEY', 500, GrpcStatus.INTERNAL],
    ['A_CODE_OF_TOMORROW', 400, GrpcStatus.INVALID_ARGUMENT],
  ])('%s is HTTP %i, gRPC %i', (code, http, grpc) => {
    expect(duraflowErrorStatus(code)).toEqual({ http, grpc });
  });

  it('uses the gRPC protocol numbers of @grpc/grpc-js', () => {
    for (const [name, code] of Object.entries(GrpcStatusCode))
      expect([name, code]).toEqual([name, GrpcStatus[name as keyof typeof GrpcStatus]]);
  });
});
