export { REAPER_LEADER_KEY } from '../domain/duraflow.constants';
export { type LeaderElection, type LeaderElectionLogger, reaperLeaderApplicationName } from './leader-election';
export { RedisLeaderElection, type RedisLeaderElectionOptions } from './redis-leader-election';
export { PostgresLeaderElection, type PostgresLeaderElectionOptions } from './postgres-leader-election';
export { advisoryLockId } from '../util/advisory-lock-id';
export { createLeaderElection, type LeaderElectionOptions } from './create-leader-election';
export type { LeaderFence } from '../persistence/lifecycle/leader-fence';
