import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';

@Entity('orders')
export class Order {
  @PrimaryGeneratedColumn()
  id!: number;

  @Column({ type: 'varchar', length: 64 })
  sku!: string;

  @Column({ type: 'int' })
  quantity!: number;

  /** placed -> shipped (by the fulfil-order workflow). */
  @Column({ type: 'varchar', length: 16, default: 'placed' })
  status!: string;

  /** The fulfil-order task, created in the same transaction as the order. */
  @Column({ name: 'task_id', type: 'uuid', nullable: true })
  taskId!: string | null;
}
