/**
 * What a reaping pass carries so that the database, not the reaper's own belief, decides
 * whether it still leads: the reap statement does nothing unless the fence holds when it runs.
 *
 * - `lease` (PostgreSQL election): the leader row `name` still has this `holder` and `term` and
 *   has not expired; the statement locks that row FOR SHARE, so a new leader's takeover (which
 *   updates the row) waits for the pass to commit, and a pass that runs after the takeover finds
 *   another holder or term and reaps nothing.
 * - `deadline` (Redis election): the database clock has not reached `deadlineEpochMs` (ms since
 *   the epoch, in the database's clock), a moment at which the Redis key was still certainly
 *   held (see RedisLeaderElection.fence for why). A pass delayed past it (a frozen process, a
 *   slow network) reaps nothing.
 */
export type LeaderFence = { kind: 'lease'; name: string; holder: string; term: string } | { kind: 'deadline'; deadlineEpochMs: number };
