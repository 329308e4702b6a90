import { Module } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DURAFLOW_ENTITIES, DURAFLOW_MIGRATIONS, DuraflowModule } from '@duraflow/nestjs';
import { DuraflowDashboardModule } from '@duraflow/nestjs/dashboard';
import { OperatorKeyGuard } from './operator-key.guard.js';
import { CreateOrders1710000000000 } from './orders/create-orders.migration.js';
import { FulfilOrderWorkflow } from './orders/fulfil-order.workflow.js';
import { Order } from './orders/order.entity.js';
import { OrdersController } from './orders/orders.controller.js';
import { WarehouseService } from './orders/warehouse.service.js';

@Module({
  imports: [
    ConfigModule.forRoot({ isGlobal: true }),
    ScheduleModule.forRoot(),
    TypeOrmModule.forRootAsync({
      inject: [ConfigService],
      useFactory: (config: ConfigService) => ({
        type: 'postgres' as const,
        url: config.getOrThrow<string>('DATABASE_URL'),
        entities: [...DURAFLOW_ENTITIES, Order],
        // Duraflow's tables come with the app's own migrations, applied on start.
        migrations: [...DURAFLOW_MIGRATIONS, CreateOrders1710000000000],
        migrationsRun: true,
      }),
    }),
    TypeOrmModule.forFeature([Order]),
    DuraflowModule.forRootAsync({
      inject: [ConfigService],
      useFactory: (config: ConfigService) => {
        const redisUrl = config.get<string>('REDIS_URL');
        return {
          // Optional: the reaper's leader election through Redis (needs ioredis); else PostgreSQL.
          ...(redisUrl ? { redis: { url: redisUrl } } : {}),
          reaper: { leaderKey: config.get<string>('DURAFLOW_LEADER_KEY') ?? 'duraflow:reaper:leader' },
          worker: { concurrency: 5 },
        };
      },
    }),
    // The operator's view at /duraflow, behind the app's own guard.
    DuraflowDashboardModule.forRoot({ path: '/duraflow', guards: [OperatorKeyGuard] }),
  ],
  controllers: [OrdersController],
  providers: [WarehouseService, FulfilOrderWorkflow],
})
export class AppModule {}
