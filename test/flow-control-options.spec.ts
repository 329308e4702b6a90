import {
  InvalidConcurrencyKeyError,
  InvalidWorkflowDefinitionError,
  workflow,
  WorkflowOptions,
  WorkflowService,
  duraflowErrorStatus,
} from '@duraflow/nestjs';
import { SUBMIT_ONLY, useTestBed } from './support/test-bed';

/*
 * Flow-control options: a definition with bad limits stops the boot naming the option; a
 * concurrency key that cannot be computed for an input refuses the submit and writes nothing;
 * a good one is stored on the task at submit.
 */

const byTenant = (input: { tenant?: unknown }) => input.tenant as string;

describe('Flow-control options', () => {
  const bed = useTestBed();

  describe('at boot', () => {
    it.each<[string, WorkflowOptions, RegExp]>([
      ['concurrency 0', { concurrency: 0 }, /"concurrency" must be a whole number from 1/],
      ['a fractional concurrency', { concurrency: 1.5 }, /"concurrency" must be a whole number from 1/],
      ['keyConcurrency without a key', { keyConcurrency: 2 }, /"keyConcurrency" needs a "concurrencyKey"/],
      ['a concurrencyKey that is not a function', { concurrencyKey: 'tenant' as never }, /"concurrencyKey" must be a function/],
      ['keyConcurrency 0', { concurrencyKey: byTenant, keyConcurrency: 0 }, /"keyConcurrency" must be a whole number/],
      ['a rate limit of 0', { rateLimit: { limit: 0, periodMs: 1_000 } }, /"rateLimit.limit" must be a whole number/],
      ['a rate limit without a period', { rateLimit: { limit: 5 } as never }, /"rateLimit.periodMs" must be a whole number/],
      ['a per-key rate limit without a key', { rateLimit: { limit: 5, periodMs: 1_000, perKey: true } }, /"rateLimit.perKey" needs/],
    ])('refuses %s with InvalidWorkflowDefinitionError', async (_, options, message) => {
      const error = await bed.bootFailure({
        duraflow: { ...SUBMIT_ONLY, workflows: [workflow('limited', async () => 'done', options)] },
      });
      expect(error).toBeInstanceOf(InvalidWorkflowDefinitionError);
      expect((error as Error).message).toMatch(message);
      expect((error as Error).message).toContain('workflow("limited")');
    });
  });

  describe('at submit', () => {
    let workflows: WorkflowService;

    beforeAll(async () => {
      const app = await bed.start({
        duraflow: {
          ...SUBMIT_ONLY,
          workflows: [
            workflow('per-tenant', async () => 'done', { concurrencyKey: byTenant, keyConcurrency: 1 }),
            workflow('capped', async () => 'done', { concurrency: 2 }),
            workflow('plain', async () => 'done'),
          ],
        },
      });
      workflows = app.get(WorkflowService);
    });

    beforeEach(() => bed.db.client.query('TRUNCATE agent_tasks CASCADE'));

    it('stores the key of the input on the task: the key function’s value, "" without one, null without limits', async () => {
      const keyed = await workflows.submit('per-tenant', { tenant: 'acme' });
      const capped = await workflows.submit('capped', {});
      const plain = await workflows.submit('plain', {});
      const many = await workflows.submitMany('per-tenant', [{ tenant: 't1' }, { tenant: 't2' }]);
      expect([keyed.concurrencyKey, capped.concurrencyKey, plain.concurrencyKey]).toEqual(['acme', '', null]);
      const { rows } = await bed.db.client.query(`SELECT id, concurrency_key FROM agent_tasks ORDER BY created_at, concurrency_key`);
      expect(Object.fromEntries(rows.map((row) => [row.id, row.concurrency_key]))).toEqual({
        [keyed.id]: 'acme',
        [capped.id]: '',
        [plain.id]: null,
        [many[0].id]: 't1',
        [many[1].id]: 't2',
      });
    });

    it.each<[string, unknown, RegExp]>([
      ['returns a number', { tenant: 42 }, /returned number 42/],
      ['returns nothing', {}, /returned undefined/],
      ['returns an empty string', { tenant: '' }, /returned an empty string/],
      ['returns a string over 255 characters', { tenant: 'x'.repeat(256) }, /returned a string of 256 characters/],
    ])('refuses a submit whose key function %s, with InvalidConcurrencyKeyError, and writes nothing', async (_, input, message) => {
      const error = await workflows.submit('per-tenant', input).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(InvalidConcurrencyKeyError);
      expect(error).toMatchObject({ code: 'INVALID_CONCURRENCY_KEY', workflowName: 'per-tenant' });
      expect((error as Error).message).toMatch(message);
      expect(duraflowErrorStatus(error as InvalidConcurrencyKeyError).http).toBe(400);
      expect(await bed.rows.count('agent_tasks')).toBe(0);
    });

    it('refuses a whole submitMany when one input has no key, and writes none of them', async () => {
      const error = await workflows.submitMany('per-tenant', [{ tenant: 'a' }, { tenant: 7 }]).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(InvalidConcurrencyKeyError);
      expect(await bed.rows.count('agent_tasks')).toBe(0);
    });
  });

  describe('a key function that throws', () => {
    let workflows: WorkflowService;

    beforeAll(async () => {
      const app = await bed.start({
        duraflow: {
          ...SUBMIT_ONLY,
          workflows: [
            workflow('throwing-key', async () => 'done', {
              concurrencyKey: (input: { tenant: { id: string } }) => input.tenant.id,
            }),
          ],
        },
      });
      workflows = app.get(WorkflowService);
    });

    it('refuses the submit with InvalidConcurrencyKeyError carrying the cause, and writes nothing', async () => {
      await bed.db.client.query('TRUNCATE agent_tasks CASCADE');
      const error = await workflows.submit('throwing-key', {}).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(InvalidConcurrencyKeyError);
      expect((error as Error).message).toMatch(/concurrencyKey of workflow "throwing-key" threw \(.*undefined/);
      expect((error as Error).cause).toBeInstanceOf(TypeError);
      expect(await bed.rows.count('agent_tasks')).toBe(0);
    });
  });
});
