/** The license server's clock: leases, heartbeats and expiries read it; tests move it. */
export const serverClock = { now: (): Date => new Date() };
