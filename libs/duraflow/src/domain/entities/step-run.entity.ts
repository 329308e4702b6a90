import { Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn, Unique } from 'typeorm';
import { AgentTask } from './agent-task.entity';

/** `waiting`: a sleep, signal wait or child wait that is not over yet. */
export type StepRunStatus = 'pending' | 'running' | 'completed' | 'failed' | 'waiting';

/** One step's checkpoint: a row of `step_runs` (base schema). A `completed` row is the memo. */
@Entity({ name: 'step_runs' })
// Named as PostgreSQL names the base schema's inline UNIQUE and REFERENCES, so TypeORM sees no drift.
@Unique('step_runs_task_id_step_key_key', ['taskId', 'stepKey'])
@Index('idx_step_runs_task_step', ['taskId', 'stepKey'], { unique: true })
@Index('idx_step_runs_compensation', ['taskId'], { where: 'compensation_fn IS NOT NULL' })
export class StepRun {
  // How TypeORM reads back `UUID PRIMARY KEY DEFAULT gen_random_uuid()`; a plain default would drift.
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'task_id', type: 'uuid' })
  taskId: string;

  @ManyToOne(() => AgentTask, { onDelete: 'CASCADE', createForeignKeyConstraints: true })
  @JoinColumn({ name: 'task_id', foreignKeyConstraintName: 'step_runs_task_id_fkey' })
  task?: AgentTask;

  @Column({ name: 'step_key', type: 'varchar', length: 255 })
  stepKey: string;

  @Column({ type: 'varchar', length: 50, default: 'pending' })
  status: StepRunStatus;

  @Column({ type: 'jsonb', nullable: true })
  input: unknown;

  @Column({ type: 'jsonb', nullable: true })
  output: unknown;

  @Column({ type: 'jsonb', nullable: true })
  error: Record<string, unknown> | null;

  /** The name the saga resolves to this step's compensation, in any process. */
  @Column({ name: 'compensation_fn', type: 'text', nullable: true })
  compensationFn: string | null;

  @Column({ name: 'compensated_at', type: 'timestamptz', nullable: true })
  compensatedAt: Date | null;

  @Column({ name: 'started_at', type: 'timestamptz', nullable: true })
  startedAt: Date | null;

  @Column({ name: 'completed_at', type: 'timestamptz', nullable: true })
  completedAt: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz', nullable: true, default: () => 'NOW()' })
  createdAt: Date;

  @Column({ type: 'integer', nullable: true, default: 0 })
  attempt: number;

  /** Engine column: position in the order the run's steps completed (LIFO rollback). */
  @Column({ name: 'completion_seq', type: 'integer', nullable: true })
  completionSeq: number | null;

  /** Engine column: `sleep`, `signal` or `child` for a durable primitive; null for an ordinary step. */
  @Column({ type: 'varchar', length: 20, nullable: true })
  kind: StepKind | null;

  /** Engine column: when a sleep ends, or a signal wait times out. */
  @Column({ name: 'wake_at', type: 'timestamptz', nullable: true })
  wakeAt: Date | null;
}

/** What a `step_runs` row records besides an ordinary step. */
export type StepKind = 'sleep' | 'signal' | 'child';
