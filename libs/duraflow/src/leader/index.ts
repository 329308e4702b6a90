export { type LeaderElection, type LeaderElectionLogger, REAPER_LEADER_KEY } from './leader-election';
export { RedisLeaderElection, type RedisLeaderElectionOptions } from './redis-leader-election';
export { PostgresLeaderElection, type PostgresLeaderElectionOptions } from './postgres-leader-election';
export { createLeaderElection, type LeaderElectionOptions } from './create-leader-election';
