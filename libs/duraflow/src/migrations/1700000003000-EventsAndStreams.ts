import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Events and streams (`ctx.setEvent`, `ctx.writeStream`): the latest value of each event key of
 * a task, with the position in the run that set it (a replayed part of the run, at an earlier
 * position, never overwrites a newer value); each stream's head (its last seq and whether it is
 * closed) and its chunks, numbered per (task, key) from 1, each with the origin that wrote it
 * (a position in the run's body, or a step's key and index) so that writing it again adds
 * nothing. They go with their task as its logs do (migration 2050): statement triggers delete
 * them with the tasks a statement deletes and empty them with a TRUNCATE of agent_tasks.
 */
export class EventsAndStreams1700000003000 implements MigrationInterface {
  name = 'EventsAndStreams1700000003000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE task_events (
        task_id uuid NOT NULL,
        key varchar(255) NOT NULL,
        value jsonb,
        position integer NOT NULL,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (task_id, key)
      )`);
    await queryRunner.query(`
      CREATE TABLE task_streams (
        task_id uuid NOT NULL,
        key varchar(255) NOT NULL,
        last_seq integer NOT NULL DEFAULT 0,
        closed_at timestamptz,
        PRIMARY KEY (task_id, key)
      )`);
    await queryRunner.query(`
      CREATE TABLE task_stream_chunks (
        task_id uuid NOT NULL,
        key varchar(255) NOT NULL,
        seq integer NOT NULL,
        chunk jsonb,
        origin varchar(600) NOT NULL,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (task_id, key, seq),
        UNIQUE (task_id, origin)
      )`);
    await queryRunner.query(`
      CREATE FUNCTION duraflow_delete_task_talk() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        DELETE FROM task_events WHERE task_id IN (SELECT id FROM deleted_tasks);
        DELETE FROM task_stream_chunks WHERE task_id IN (SELECT id FROM deleted_tasks);
        DELETE FROM task_streams WHERE task_id IN (SELECT id FROM deleted_tasks);
        RETURN NULL;
      END $$`);
    await queryRunner.query(`
      CREATE TRIGGER duraflow_delete_task_talk
      AFTER DELETE ON agent_tasks
      REFERENCING OLD TABLE AS deleted_tasks
      FOR EACH STATEMENT
      EXECUTE FUNCTION duraflow_delete_task_talk()`);
    await queryRunner.query(`
      CREATE FUNCTION duraflow_truncate_task_talk() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        TRUNCATE task_events, task_stream_chunks, task_streams;
        RETURN NULL;
      END $$`);
    await queryRunner.query(`
      CREATE TRIGGER duraflow_truncate_task_talk
      AFTER TRUNCATE ON agent_tasks
      FOR EACH STATEMENT
      EXECUTE FUNCTION duraflow_truncate_task_talk()`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TRIGGER duraflow_truncate_task_talk ON agent_tasks`);
    await queryRunner.query(`DROP FUNCTION duraflow_truncate_task_talk()`);
    await queryRunner.query(`DROP TRIGGER duraflow_delete_task_talk ON agent_tasks`);
    await queryRunner.query(`DROP FUNCTION duraflow_delete_task_talk()`);
    await queryRunner.query(`DROP TABLE task_stream_chunks`);
    await queryRunner.query(`DROP TABLE task_streams`);
    await queryRunner.query(`DROP TABLE task_events`);
  }
}
