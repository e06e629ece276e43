import { type Known, recordOf } from '#lib/license/known';
import { CACHE_TTL_MS, isFresh } from '#lib/license/state';

/**
 * When a container looks again: its local traces every minute (changes by other containers show
 * up), the license server when a keyed license's last check is 12 hours old (5 minutes after a
 * failed one), and on `POST /api/license/refresh` at most every 10 seconds. Local ms throughout; a
 * clock that went back counts as due.
 */

/** After a failed validation, the server is asked again this soon (not on every request). */
const RETRY_MS = 5 * 60_000;
/** The file and the cache row are read again this often. */
const RELOAD_MS = 60_000;
/** `POST /api/license/refresh` asks the server at most this often (it needs no credentials). */
export const REFRESH_MS = 10_000;

const within = (since: number, ms: number) => since >= 0 && since < ms;

/** The local traces are due to be read again. */
export const reloadDue = (known: Known, now: Date) => !within(now.getTime() - known.loadedAt, RELOAD_MS);

/** A keyed license whose server check is due. */
export function validationDue(known: Known, now: Date): boolean {
  const record = recordOf(known);
  if (!record?.keyed) return false;
  if (!known.answer) return !isFresh(record.lastValidatedAt, now);
  const since = now.getTime() - known.checkedAt;
  if (!(since >= 0)) return true;
  if (known.answer.kind === 'unreachable') return since >= RETRY_MS;
  return since >= CACHE_TTL_MS && !isFresh(record.lastValidatedAt, now);
}

/** A refresh may ask the server: the license is keyed, and the last refresh that asked is 10 s old. */
export const refreshMayAsk = (known: Known, now: Date, lastRefresh: number) =>
  recordOf(known)?.keyed === true && !within(now.getTime() - lastRefresh, REFRESH_MS);
