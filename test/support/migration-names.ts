/**
 * The library's migrations by name, in the order they run: what `duraflow migrate` reports and
 * the `migrations` table holds. Written out (not read from DURAFLOW_MIGRATIONS), so a migration
 * added, removed or renamed fails the specs that read it until this list says so.
 */
export const DURAFLOW_MIGRATION_NAMES = [
  'SeedSchema1700000000000',
  'EngineColumns1700000000001',
  'SagaColumns1700000000002',
  'LeaderLease1700000000100',
  'DurablePrimitives1700000000200',
  'TraceContext1700000000300',
  'FlowControl1700000000400',
  'SafeDeploys1700000000500',
  'Schedules1700000000700',
  'RunnableOrder1700000000800',
  'SignalsWithTheirTask1700000000900',
  'RetryAndFork1700000001000',
  'TaskTags1700000002000',
  'RunLogs1700000002050',
  'EventsAndStreams1700000003000',
  'Callbacks1700000003100',
  'EventTriggers1700000004000',
  'DashboardOverview1700000005000',
  'EngineClock1700000006000',
];
