import { Column, CreateDateColumn, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

/** A compensation that failed for good: a row of `dead_letter_queue` (base schema). */
@Entity({ name: 'dead_letter_queue' })
@Index('idx_dlq_task_id', ['taskId'])
@Index('idx_dlq_step_id', ['stepId'], { unique: true })
export class DeadLetter {
  // How TypeORM reads back `UUID PRIMARY KEY DEFAULT gen_random_uuid()`; a plain default would drift.
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'task_id', type: 'uuid' })
  taskId: string;

  @Column({ name: 'step_id', type: 'uuid' })
  stepId: string;

  @Column({ type: 'jsonb', nullable: true })
  error: Record<string, unknown> | null;

  @Column({ name: 'retry_count', type: 'integer', nullable: true, default: 0 })
  retryCount: number;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz', nullable: true, default: () => 'NOW()' })
  createdAt: Date;
}
