import { SeedSchema1700000000000 } from './1700000000000-SeedSchema';
import { EngineColumns1700000000001 } from './1700000000001-EngineColumns';
import { SagaColumns1700000000002 } from './1700000000002-SagaColumns';
import { LeaderLease1700000000100 } from './1700000000100-LeaderLease';

/** Every Duraflow migration, in order: pass to a TypeORM DataSource's `migrations`. */
export const DURAFLOW_MIGRATIONS = [
  SeedSchema1700000000000,
  EngineColumns1700000000001,
  SagaColumns1700000000002,
  LeaderLease1700000000100,
];
