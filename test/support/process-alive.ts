/** The process exists (signal 0 checks without sending anything); a zombie not yet reaped counts as alive. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
