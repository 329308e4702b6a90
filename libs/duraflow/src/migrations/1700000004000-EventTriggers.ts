import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Events that start workflows (docs/events.md): the published events, the subscriptions the nodes
 * declare at boot, one delivery per (event, subscribing workflow), the open debounces and batches,
 * and the SQL twins of submit and publish (`duraflow_submit`, `duraflow_publish`) that a trigger or
 * a service in another language calls. Duraflow's own events (`duraflow.task.<status>`,
 * `duraflow.dead_letter.created`) are published by two triggers, only while a workflow subscribes.
 */
export class EventTriggers1700000004000 implements MigrationInterface {
  name = 'EventTriggers1700000004000';

  async up(queryRunner: QueryRunner): Promise<void> {
    // One row per published event, kept for the events' retention whether or not anyone
    // subscribed. The partial unique index makes a second publish with one key find the first.
    await queryRunner.query(`CREATE TABLE duraflow_published_events (
      id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
      name VARCHAR(255) NOT NULL,
      payload JSONB,
      idempotency_key VARCHAR(255),
      created_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )`);
    await queryRunner.query(`CREATE UNIQUE INDEX idx_duraflow_published_events_key
      ON duraflow_published_events(name, idempotency_key) WHERE idempotency_key IS NOT NULL`);
    await queryRunner.query(`CREATE INDEX idx_duraflow_published_events_created ON duraflow_published_events(created_at, id)`);

    // What each workflow subscribes to, as the last node to boot with that workflow declared it:
    // what a publish from SQL knows. workflow_version and max_retries are what a task started
    // without the workflow's code (from SQL, or on a node not registering it) is created with.
    await queryRunner.query(`CREATE TABLE duraflow_event_subscriptions (
      event_name VARCHAR(255) NOT NULL,
      workflow_name VARCHAR(255) NOT NULL,
      workflow_version INTEGER,
      max_retries INTEGER NOT NULL,
      mode VARCHAR(10) NOT NULL DEFAULT 'each' CHECK (mode IN ('each', 'debounce', 'batch')),
      key_field VARCHAR(255),
      key_in_code BOOLEAN NOT NULL DEFAULT false,
      period_ms INTEGER,
      max_wait_ms INTEGER,
      max_size INTEGER,
      timeout_ms INTEGER,
      updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
      PRIMARY KEY (event_name, workflow_name)
    )`);

    // A debounce or a batch of one workflow and key: open (sealed_at NULL) while events join it,
    // started once (started_at, task_id) by whichever node closes it first (FOR UPDATE SKIP LOCKED
    // and started_at IS NULL). One open group per (workflow, key): the partial unique index.
    await queryRunner.query(`CREATE TABLE duraflow_event_groups (
      id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
      workflow_name VARCHAR(255) NOT NULL,
      mode VARCHAR(10) NOT NULL CHECK (mode IN ('debounce', 'batch')),
      group_key TEXT NOT NULL,
      event_count INTEGER NOT NULL DEFAULT 0,
      last_event_id UUID,
      opened_at TIMESTAMPTZ NOT NULL DEFAULT now(),
      due_at TIMESTAMPTZ NOT NULL,
      sealed_at TIMESTAMPTZ,
      started_at TIMESTAMPTZ,
      task_id UUID,
      refusal JSONB
    )`);
    await queryRunner.query(`CREATE UNIQUE INDEX idx_duraflow_event_groups_open
      ON duraflow_event_groups(workflow_name, group_key) WHERE sealed_at IS NULL`);
    await queryRunner.query(`CREATE INDEX idx_duraflow_event_groups_due ON duraflow_event_groups(due_at) WHERE started_at IS NULL`);
    // The task a group started: how the own-event trigger knows a task an own event started through a group.
    await queryRunner.query(`CREATE INDEX idx_duraflow_event_groups_task ON duraflow_event_groups(task_id) WHERE task_id IS NOT NULL`);

    // One row per (event, subscribing workflow): the task it started, the group it joined, or the
    // refusal (the workflow's DTO refused the payload; a key only TypeScript computes).
    await queryRunner.query(`CREATE TABLE duraflow_event_deliveries (
      event_id UUID NOT NULL REFERENCES duraflow_published_events(id) ON DELETE CASCADE,
      workflow_name VARCHAR(255) NOT NULL,
      task_id UUID,
      group_id UUID,
      refusal JSONB,
      created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
      PRIMARY KEY (event_id, workflow_name)
    )`);
    await queryRunner.query(
      `CREATE INDEX idx_duraflow_event_deliveries_group ON duraflow_event_deliveries(group_id) WHERE group_id IS NOT NULL`,
    );
    await queryRunner.query(
      `CREATE INDEX idx_duraflow_event_deliveries_task ON duraflow_event_deliveries(task_id) WHERE task_id IS NOT NULL`,
    );

    await this.createSubmit(queryRunner);
    await this.createJoinGroup(queryRunner);
    await this.createPublish(queryRunner);
    await this.createOwnEvents(queryRunner);
  }

  /** The SQL twin of submit: the create move's INSERT (lifecycle/create-tasks.ts), column for column. */
  private async createSubmit(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE FUNCTION duraflow_submit(workflow_name text, input jsonb, idempotency_key text DEFAULT NULL,
                                      priority integer DEFAULT 0, scheduled_at timestamptz DEFAULT NULL,
                                      max_retries integer DEFAULT 3, workflow_version integer DEFAULT NULL,
                                      tags jsonb DEFAULT '{}'::jsonb)
      RETURNS uuid LANGUAGE plpgsql AS $$
      #variable_conflict use_column
      DECLARE
        created uuid;
      BEGIN
        IF duraflow_submit.workflow_name IS NULL OR duraflow_submit.workflow_name !~ '^[A-Za-z0-9_-]{1,255}$' THEN
          RAISE EXCEPTION 'duraflow_submit: workflow name % must be 1 to 255 characters of [A-Za-z0-9_-]', quote_nullable(duraflow_submit.workflow_name)
            USING ERRCODE = '22023';
        END IF;
        INSERT INTO agent_tasks (workflow_name, input, priority, scheduled_at, max_retries, idempotency_key, trace_context, workflow_version,
                                 concurrency_key, parent_task_id, parent_step_key, forked_from, forked_from_step, tags)
        VALUES (duraflow_submit.workflow_name, coalesce(duraflow_submit.input, '{}'::jsonb), coalesce(duraflow_submit.priority, 0),
                duraflow_submit.scheduled_at, coalesce(duraflow_submit.max_retries, 3), duraflow_submit.idempotency_key, NULL,
                duraflow_submit.workflow_version, NULL, NULL, NULL, NULL, NULL, coalesce(duraflow_submit.tags, '{}'::jsonb))
        ON CONFLICT (workflow_name, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING id INTO created;
        IF created IS NULL THEN
          SELECT t.id INTO created FROM agent_tasks t
          WHERE t.workflow_name = duraflow_submit.workflow_name AND t.idempotency_key = duraflow_submit.idempotency_key;
          RETURN created;
        END IF;
        IF duraflow_submit.scheduled_at IS NULL OR duraflow_submit.scheduled_at <= duraflow_now() THEN
          PERFORM pg_notify('duraflow_task_submitted', duraflow_submit.workflow_name);
        END IF;
        RETURN created;
      END $$`);
  }

  /**
   * The one rule of a debounce or a batch, for the TypeScript publish and the SQL one alike: the
   * event joins the open group of its (workflow, key), or opens one. A debounce's group is due
   * `period_ms` after its last event (at most `max_wait_ms` after its first); one past due takes
   * no more events (it is sealed here and the event opens the next). A batch is due `timeout_ms`
   * after its first event, and sealed (due now) by the event that fills it.
   */
  private async createJoinGroup(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE FUNCTION duraflow_join_event_group(p_event_id uuid, p_workflow text, p_key text)
      RETURNS uuid LANGUAGE plpgsql AS $$
      DECLARE
        sub duraflow_event_subscriptions%ROWTYPE;
        joined duraflow_event_groups%ROWTYPE;
      BEGIN
        SELECT s.* INTO sub FROM duraflow_published_events e
        JOIN duraflow_event_subscriptions s ON s.event_name = e.name AND s.workflow_name = p_workflow
        WHERE e.id = p_event_id;
        FOR attempt IN 1..3 LOOP
          INSERT INTO duraflow_event_groups AS g (workflow_name, mode, group_key, event_count, last_event_id, opened_at, due_at)
          VALUES (p_workflow, sub.mode, p_key, 1, p_event_id, duraflow_now(),
                  duraflow_now() + make_interval(secs => (CASE WHEN sub.mode = 'debounce' THEN sub.period_ms ELSE sub.timeout_ms END) / 1000.0))
          ON CONFLICT (workflow_name, group_key) WHERE sealed_at IS NULL DO UPDATE
            SET event_count = g.event_count + 1, last_event_id = EXCLUDED.last_event_id,
                due_at = CASE WHEN g.mode = 'debounce'
                              THEN least(duraflow_now() + make_interval(secs => sub.period_ms / 1000.0),
                                         g.opened_at + make_interval(secs => sub.max_wait_ms / 1000.0))
                              ELSE g.due_at END
            WHERE g.due_at > duraflow_now()
          RETURNING g.* INTO joined;
          IF joined.id IS NOT NULL THEN
            IF joined.mode = 'batch' AND joined.event_count >= sub.max_size THEN
              UPDATE duraflow_event_groups SET sealed_at = duraflow_now(), due_at = duraflow_now() WHERE id = joined.id;
              PERFORM pg_notify('duraflow_event_group_due', p_workflow);
            END IF;
            RETURN joined.id;
          END IF;
          -- The open group is past due: it is sealed for its closer, and the event opens the next.
          UPDATE duraflow_event_groups SET sealed_at = duraflow_now()
          WHERE workflow_name = p_workflow AND group_key = p_key AND sealed_at IS NULL AND due_at <= duraflow_now();
        END LOOP;
        RAISE EXCEPTION 'duraflow_join_event_group: could not join or open a group of workflow % key %', p_workflow, p_key;
      END $$`);
  }

  /** The SQL twin of publish: the event, then one delivery per subscription as the TypeScript publish writes it. */
  private async createPublish(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE FUNCTION duraflow_publish(name text, payload jsonb, idempotency_key text DEFAULT NULL)
      RETURNS uuid LANGUAGE plpgsql AS $$
      #variable_conflict use_column
      DECLARE
        published uuid;
        sub duraflow_event_subscriptions%ROWTYPE;
        group_key text;
      BEGIN
        IF duraflow_publish.name IS NULL OR duraflow_publish.name !~ '^[A-Za-z0-9_.:-]{1,255}$' THEN
          RAISE EXCEPTION 'duraflow_publish: event name % must be 1 to 255 characters of [A-Za-z0-9_.:-]', quote_nullable(duraflow_publish.name)
            USING ERRCODE = '22023';
        END IF;
        INSERT INTO duraflow_published_events (name, payload, idempotency_key)
        VALUES (duraflow_publish.name, duraflow_publish.payload, duraflow_publish.idempotency_key)
        ON CONFLICT (name, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING id INTO published;
        IF published IS NULL THEN
          SELECT e.id INTO published FROM duraflow_published_events e
          WHERE e.name = duraflow_publish.name AND e.idempotency_key = duraflow_publish.idempotency_key;
          RETURN published;
        END IF;
        FOR sub IN SELECT s.* FROM duraflow_event_subscriptions s WHERE s.event_name = duraflow_publish.name ORDER BY s.workflow_name LOOP
          IF sub.mode = 'each' THEN
            INSERT INTO duraflow_event_deliveries (event_id, workflow_name, task_id)
            VALUES (published, sub.workflow_name,
                    duraflow_submit(sub.workflow_name, coalesce(duraflow_publish.payload, '{}'::jsonb), NULL, 0, NULL,
                                    sub.max_retries, sub.workflow_version, '{}'::jsonb));
          ELSIF sub.key_in_code THEN
            INSERT INTO duraflow_event_deliveries (event_id, workflow_name, refusal)
            VALUES (published, sub.workflow_name, jsonb_build_object('code', 'EVENT_KEY_IN_CODE', 'message',
              format('Workflow "%s" computes its %s key in TypeScript, which a publish from SQL cannot run: publish "%s" with workflows.publish, or declare the key as a payload field name.',
                     sub.workflow_name, sub.mode, duraflow_publish.name)));
          ELSIF sub.key_field IS NOT NULL AND jsonb_typeof(duraflow_publish.payload -> sub.key_field) IN ('object', 'array') THEN
            -- As the TypeScript twin refuses it (events/group-key.ts): their texts of an object differ.
            INSERT INTO duraflow_event_deliveries (event_id, workflow_name, refusal)
            VALUES (published, sub.workflow_name, jsonb_build_object('code', 'EVENT_KEY_NOT_SCALAR', 'message',
              format('The %s key field "%s" of workflow "%s" holds an %s: a key field must hold a string, a number or a boolean.',
                     sub.mode, sub.key_field, sub.workflow_name, jsonb_typeof(duraflow_publish.payload -> sub.key_field))));
          ELSE
            group_key := CASE WHEN sub.key_field IS NULL THEN '' ELSE coalesce(duraflow_publish.payload ->> sub.key_field, '') END;
            INSERT INTO duraflow_event_deliveries (event_id, workflow_name, group_id)
            VALUES (published, sub.workflow_name, duraflow_join_event_group(published, sub.workflow_name, group_key));
          END IF;
        END LOOP;
        RETURN published;
      END $$`);
  }

  /**
   * Duraflow's own events: a terminal status or a dead letter is published only when a workflow
   * subscribes to its name (one probe of the subscriptions' primary key; nothing else otherwise).
   * A task started by one of these events publishes none itself, so no subscriber loops on its
   * own end. A failure to publish never fails the move that triggered it (a warning instead).
   */
  private async createOwnEvents(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE FUNCTION duraflow_publish_task_finished() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        finished_event text := 'duraflow.task.' || NEW.status;
      BEGIN
        IF NOT EXISTS (SELECT 1 FROM duraflow_event_subscriptions s WHERE s.event_name = finished_event) THEN RETURN NULL; END IF;
        IF EXISTS (SELECT 1 FROM duraflow_event_deliveries d JOIN duraflow_published_events e ON e.id = d.event_id
                   WHERE d.task_id = NEW.id AND e.name LIKE 'duraflow.%')
           -- Started by a debounce or a batch that an own event joined.
           OR EXISTS (SELECT 1 FROM duraflow_event_groups g JOIN duraflow_event_deliveries d ON d.group_id = g.id
                      JOIN duraflow_published_events e ON e.id = d.event_id
                      WHERE g.task_id = NEW.id AND e.name LIKE 'duraflow.%') THEN
          RETURN NULL;
        END IF;
        BEGIN
          PERFORM duraflow_publish(finished_event, jsonb_build_object(
            'taskId', NEW.id, 'workflowName', NEW.workflow_name, 'workflowVersion', coalesce(NEW.workflow_version, 1),
            'status', NEW.status, 'parentTaskId', NEW.parent_task_id, 'tags', NEW.tags, 'finishedAt', now()), NULL);
        EXCEPTION WHEN OTHERS THEN
          RAISE WARNING 'Duraflow could not publish % for task %: %', finished_event, NEW.id, SQLERRM;
        END;
        RETURN NULL;
      END $$`);
    // The WHEN clause is evaluated without calling the function: a move to a non-terminal status costs nothing.
    await queryRunner.query(`
      CREATE TRIGGER duraflow_publish_task_finished
      AFTER UPDATE OF status ON agent_tasks
      FOR EACH ROW
      WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.status IN ('completed', 'failed', 'rolled_back', 'partial_rollback', 'cancelled'))
      EXECUTE FUNCTION duraflow_publish_task_finished()`);
    await queryRunner.query(`
      CREATE FUNCTION duraflow_publish_dead_letter() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NOT EXISTS (SELECT 1 FROM duraflow_event_subscriptions WHERE event_name = 'duraflow.dead_letter.created') THEN RETURN NULL; END IF;
        BEGIN
          PERFORM duraflow_publish('duraflow.dead_letter.created', (
            SELECT jsonb_build_object('deadLetterId', NEW.id, 'taskId', NEW.task_id, 'stepId', NEW.step_id,
                                      'stepKey', s.step_key, 'workflowName', t.workflow_name, 'createdAt', NEW.created_at)
            FROM (SELECT 1) AS one
            LEFT JOIN step_runs s ON s.id = NEW.step_id
            LEFT JOIN agent_tasks t ON t.id = NEW.task_id), NULL);
        EXCEPTION WHEN OTHERS THEN
          RAISE WARNING 'Duraflow could not publish duraflow.dead_letter.created for dead letter %: %', NEW.id, SQLERRM;
        END;
        RETURN NULL;
      END $$`);
    await queryRunner.query(`
      CREATE TRIGGER duraflow_publish_dead_letter
      AFTER INSERT ON dead_letter_queue
      FOR EACH ROW
      EXECUTE FUNCTION duraflow_publish_dead_letter()`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TRIGGER duraflow_publish_dead_letter ON dead_letter_queue`);
    await queryRunner.query(`DROP FUNCTION duraflow_publish_dead_letter()`);
    await queryRunner.query(`DROP TRIGGER duraflow_publish_task_finished ON agent_tasks`);
    await queryRunner.query(`DROP FUNCTION duraflow_publish_task_finished()`);
    await queryRunner.query(`DROP FUNCTION duraflow_publish(text, jsonb, text)`);
    await queryRunner.query(`DROP FUNCTION duraflow_join_event_group(uuid, text, text)`);
    await queryRunner.query(`DROP FUNCTION duraflow_submit(text, jsonb, text, integer, timestamptz, integer, integer, jsonb)`);
    await queryRunner.query(`DROP TABLE duraflow_event_deliveries`);
    await queryRunner.query(`DROP TABLE duraflow_event_groups`);
    await queryRunner.query(`DROP TABLE duraflow_event_subscriptions`);
    await queryRunner.query(`DROP TABLE duraflow_published_events`);
  }
}
