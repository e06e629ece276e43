/**
 * Other processes, by pid: whether one still runs, and waiting for some to end (the local host's
 * supervision, the benchmarks' hosts, the tests that kill a host).
 */

/** Whether `pid` runs; one we may not signal (another user's) runs too. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Waits until every one of `pids` has ended; past `timeoutMs`, throws naming those still running. */
export async function gone(pids: number[], timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (pids.some(alive)) {
    if (performance.now() > deadline) throw new Error(`processes still running: ${pids.filter(alive)}`);
    await new Promise((wait) => setTimeout(wait, 20));
  }
}
