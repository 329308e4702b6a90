import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the durable primitives need (sleep, signals, child workflows). Like the engine's other
 * migrations it only adds: nullable columns, a table of its own, indexes and a trigger.
 */
export class DurablePrimitives1700000000200 implements MigrationInterface {
  name = 'DurablePrimitives1700000000200';

  async up(queryRunner: QueryRunner): Promise<void> {
    // A sleep, a signal wait or a child is a step_runs row in the run's one key namespace:
    // `kind` says which (NULL: an ordinary step), `wake_at` when a sleep ends or a wait times out.
    // A wait that is not over yet has status 'waiting'.
    await queryRunner.query(`ALTER TABLE step_runs ADD COLUMN kind VARCHAR(20)`);
    await queryRunner.query(`ALTER TABLE step_runs ADD COLUMN wake_at TIMESTAMPTZ`);

    // A child task names its parent and the parent's step that started it.
    await queryRunner.query(`ALTER TABLE agent_tasks ADD COLUMN parent_task_id UUID`);
    await queryRunner.query(`ALTER TABLE agent_tasks ADD COLUMN parent_step_key VARCHAR(255)`);
    await queryRunner.query(`
      CREATE INDEX idx_agent_tasks_parent
      ON agent_tasks(parent_task_id, created_at)
      WHERE parent_task_id IS NOT NULL`);

    // Signals sent to a task, kept until a wait of their name takes them (oldest first: id order;
    // sends to one task serialize on its row lock, so id order is send order). No foreign key, as
    // dead_letter_queue has none: a TRUNCATE of agent_tasks (the operators' and the tests' way
    // to empty it) keeps working.
    await queryRunner.query(`
      CREATE TABLE task_signals (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        task_id UUID NOT NULL,
        name VARCHAR(255) NOT NULL,
        payload JSONB,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        consumed_at TIMESTAMPTZ,
        consumed_by_step VARCHAR(255)
      )`);
    await queryRunner.query(`
      CREATE INDEX idx_task_signals_undelivered
      ON task_signals(task_id, name, id)
      WHERE consumed_at IS NULL`);
    await queryRunner.query(`CREATE INDEX idx_task_signals_task ON task_signals(task_id, id)`);

    // The claim walks its index in claim order and stops after its limit; tasks that wait
    // (pending, scheduled_at later) sat in that order by created_at, ahead of the runnable ones
    // created after them, and every claim visited each of them on the heap: 100k sleeping tasks
    // made a claim of 10 cost ~22 ms instead of ~0.05 ms. Ordered by when a task became (or
    // becomes) runnable, COALESCE(scheduled_at, created_at), the waiting ones sort after every
    // runnable one of their priority, and `<= now()` is checked on the index entry.
    await queryRunner.query(`DROP INDEX idx_agent_tasks_claim`);
    await queryRunner.query(`
      CREATE INDEX idx_agent_tasks_claim
      ON agent_tasks(priority DESC, (COALESCE(scheduled_at, created_at, '-infinity'::timestamptz)), id)
      WHERE status = 'pending'`);

    // A child that reaches a terminal status wakes a parent waiting for it, in the statement
    // that ends the child, whichever path ends it (completion, failure, rollback, cancel,
    // reaper): the parent's wait can never miss it. Both sides lock the parent row before they
    // read the other's state (each later statement of plpgsql, like each statement of the
    // parent's suspension, reads a new snapshot): a parent suspending while its child ends
    // either sees the child ended, or is suspended before the child's wake-up reads it.
    await queryRunner.query(`
      CREATE FUNCTION duraflow_wake_parent() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM 1 FROM agent_tasks WHERE id = NEW.parent_task_id FOR NO KEY UPDATE;
        UPDATE agent_tasks p SET scheduled_at = now(), updated_at = now()
        WHERE p.id = NEW.parent_task_id AND p.status = 'pending'
          AND EXISTS (SELECT 1 FROM step_runs s
                      WHERE s.task_id = NEW.parent_task_id AND s.step_key = NEW.parent_step_key
                        AND s.kind = 'child' AND s.status = 'waiting');
        IF FOUND THEN
          PERFORM pg_notify('duraflow_task_submitted', (SELECT workflow_name FROM agent_tasks WHERE id = NEW.parent_task_id));
        END IF;
        RETURN NULL;
      END $$`);
    await queryRunner.query(`
      CREATE TRIGGER duraflow_wake_parent
      AFTER UPDATE OF status ON agent_tasks
      FOR EACH ROW
      WHEN (NEW.parent_task_id IS NOT NULL AND OLD.status IS DISTINCT FROM NEW.status
            AND NEW.status IN ('completed', 'failed', 'cancelled', 'rolled_back', 'partial_rollback'))
      EXECUTE FUNCTION duraflow_wake_parent()`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TRIGGER duraflow_wake_parent ON agent_tasks`);
    await queryRunner.query(`DROP FUNCTION duraflow_wake_parent()`);
    await queryRunner.query(`DROP TABLE task_signals`);
    await queryRunner.query(`DROP INDEX idx_agent_tasks_claim`);
    await queryRunner.query(`CREATE INDEX idx_agent_tasks_claim ON agent_tasks(priority DESC, created_at, id) WHERE status = 'pending'`);
    await queryRunner.query(`DROP INDEX idx_agent_tasks_parent`);
    await queryRunner.query(`ALTER TABLE agent_tasks DROP COLUMN parent_step_key`);
    await queryRunner.query(`ALTER TABLE agent_tasks DROP COLUMN parent_task_id`);
    await queryRunner.query(`ALTER TABLE step_runs DROP COLUMN wake_at`);
    await queryRunner.query(`ALTER TABLE step_runs DROP COLUMN kind`);
  }
}
