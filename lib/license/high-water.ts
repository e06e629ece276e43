import type pg from 'pg';
import { type CacheRow, raiseHighWater } from '#lib/license/cache-table';
import type { Lease } from '#lib/license/known';

/**
 * The clock's high-water mark: the latest trustworthy time this deployment has seen. A licensee
 * who owns the clock can roll it back; the mark does not go back with it, so a trial or a grace
 * period measured against it does not start over (lib/license/state).
 */

/** How often the cache row's mark is raised to the time both clocks have reached. */
const KEEP_TIME_MS = 60_000;

/**
 * Records, about once a minute, the time both this host's clock and PostgreSQL's have reached:
 * rolling both back and restarting then shows as a rollback. The earlier of the two, so one clock
 * set wrongly ahead (and corrected) never makes an honest deployment look rolled back.
 */
export async function keepTime(
  db: pg.Pool,
  machineId: string,
  row: CacheRow | undefined,
  { hostNow, databaseNow }: { hostNow: number; databaseNow: number },
): Promise<void> {
  const agreed = Math.min(hostNow, databaseNow);
  if (!row || agreed - (row.highWater?.getTime() ?? 0) < KEEP_TIME_MS) return;
  await raiseHighWater(db, machineId, new Date(agreed));
}

/**
 * The mark from every trace: what this process knew, PostgreSQL's clock now, the cache row's and
 * (when it is not older than the row) the license file's marks, and the signed leases' server times.
 */
export function highWaterOf(traces: {
  previous: number | undefined;
  databaseNow: number;
  row: Date | null | undefined;
  file: Date | null | undefined;
  leases: readonly Lease[];
}): number {
  return Math.max(
    traces.previous ?? 0,
    traces.databaseNow,
    traces.row?.getTime() ?? 0,
    traces.file?.getTime() ?? 0,
    ...traces.leases.map((l) => Date.parse(l.payload.serverTime)),
  );
}
