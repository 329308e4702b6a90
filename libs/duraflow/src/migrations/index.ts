import { SeedSchema1700000000000 } from './1700000000000-SeedSchema';
import { EngineColumns1700000000001 } from './1700000000001-EngineColumns';
import { SagaColumns1700000000002 } from './1700000000002-SagaColumns';
import { LeaderLease1700000000100 } from './1700000000100-LeaderLease';
import { DurablePrimitives1700000000200 } from './1700000000200-DurablePrimitives';
import { TraceContext1700000000300 } from './1700000000300-TraceContext';
import { FlowControl1700000000400 } from './1700000000400-FlowControl';
import { SafeDeploys1700000000500 } from './1700000000500-SafeDeploys';
import { Schedules1700000000700 } from './1700000000700-Schedules';
import { RunnableOrder1700000000800 } from './1700000000800-RunnableOrder';
import { SignalsWithTheirTask1700000000900 } from './1700000000900-SignalsWithTheirTask';
import { RetryAndFork1700000001000 } from './1700000001000-RetryAndFork';
import { TaskTags1700000002000 } from './1700000002000-TaskTags';
import { RunLogs1700000002050 } from './1700000002050-RunLogs';
import { EventTriggers1700000004000 } from './1700000004000-EventTriggers';
import { EventsAndStreams1700000003000 } from './1700000003000-EventsAndStreams';
import { Callbacks1700000003100 } from './1700000003100-Callbacks';
import { EngineClock1700000006000 } from './1700000006000-EngineClock';
import { DashboardOverview1700000005000 } from './1700000005000-DashboardOverview';

/** Every Duraflow migration, in order: pass to a TypeORM DataSource's `migrations`. */
export const DURAFLOW_MIGRATIONS = [
  SeedSchema1700000000000,
  EngineColumns1700000000001,
  SagaColumns1700000000002,
  LeaderLease1700000000100,
  DurablePrimitives1700000000200,
  TraceContext1700000000300,
  FlowControl1700000000400,
  SafeDeploys1700000000500,
  Schedules1700000000700,
  RunnableOrder1700000000800,
  SignalsWithTheirTask1700000000900,
  RetryAndFork1700000001000,
  TaskTags1700000002000,
  RunLogs1700000002050,
  EventsAndStreams1700000003000,
  Callbacks1700000003100,
  EventTriggers1700000004000,
  DashboardOverview1700000005000,
  EngineClock1700000006000,
];
