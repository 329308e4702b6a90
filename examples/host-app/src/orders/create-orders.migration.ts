import { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateOrders1710000000000 implements MigrationInterface {
  name = 'CreateOrders1710000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`CREATE TABLE orders (
      id SERIAL PRIMARY KEY,
      sku VARCHAR(64) NOT NULL,
      quantity INTEGER NOT NULL,
      status VARCHAR(16) NOT NULL DEFAULT 'placed',
      task_id UUID
    )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE orders`);
  }
}
