import type { MiddlewareObj } from '@middy/core';
import { Busy } from '#lib/errors';
import type { HttpEvent } from '#lib/http/event';
import type { HttpResponse } from '#lib/http/respond';

/**
 * Requests a process works on at once, whatever function's bundle serves them (the local host
 * runs them all in one process, so the count lives on its global object). Past the ceiling a
 * request is answered 503 Busy with Retry-After at once, before any work: a flood queues in the
 * callers, not in this process's memory. Each request needs a database connection, which the
 * process's budget (lib/db/connection-budget) hands out in turn; the ceiling is far above that
 * budget, so requests wait there, briefly and in order, long before anyone is turned away here.
 * A Lambda container serves one request at a time and never reaches it.
 */
export const IN_FLIGHT_LIMIT = 1000;

const IN_FLIGHT = Symbol.for('dbadmin.requests-in-flight');
const processGlobal = globalThis as { [IN_FLIGHT]?: { count: number } };
processGlobal[IN_FLIGHT] ??= { count: 0 };
const inFlight = processGlobal[IN_FLIGHT];

export function boundInFlight(limit = IN_FLIGHT_LIMIT): MiddlewareObj<HttpEvent, HttpResponse> {
  const counted = new WeakSet<object>();
  const done = (request: { event: HttpEvent }) => {
    if (counted.delete(request.event)) inFlight.count--;
  };
  return {
    before: (request) => {
      if (inFlight.count >= limit) throw new Busy(`this process is already working on ${limit} requests`);
      inFlight.count++;
      counted.add(request.event);
    },
    after: done,
    onError: done,
  };
}
